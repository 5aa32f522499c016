"""Execution-path qualification, batch invariance and the sealed-prediction protocol.

- Batch invariance: score the same K+1 positions in one call vs one per call; record
  max |delta logit|, total variation between the T=1 softmaxes, and greedy argmax flips.
- Qualification: batched and serialized verify paths, greedy, R repetitions on every
  prompt; a path qualifies only if its ids equal the sealed reference on every run.
- Prediction (endpoint P): a written hypothesis, checked on discovery prompts; its
  predictions for the reserved prompts are hashed and sealed before the live reserved
  runs execute (a separate pipeline rule), then compared.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from ..decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from ..errors import SpecproofError
from ..models.loader import ModelPool
from ..decode.policies import make_policy
from ..records import canonical_json, read_json, sha256_text, write_json, write_parquet
from .reference import reference_lookup
from ..decode.sampling import softmax
from ..study.config import Study
from ..study.workloads import prompt_ids, split_discovery

HYPOTHESIS = ("For every target, the serialized speculative path (one position per target "
              "call) reproduces target-only greedy decoding: its ids equal those of a fresh "
              "target-only greedy run on the same prompt, computed before the live run.")


def probe_batch_invariance(study: Study, prompt_set: list[dict], reference: pd.DataFrame,
                           out: Path, k: int = 4) -> None:
    pool, rows = ModelPool(study), []
    ref = reference_lookup(reference)
    for tname, target in pool.each_target(study.target_names):
        spec = study.target_spec(tname)
        for rec in prompt_set:
            ids = prompt_ids(target, rec)
            cont = ref[(tname, rec["id"])]["ids"][:k]
            block = [ids[-1]] + cont
            target.reset()
            target.forward(ids[:-1], last_only=True)
            batched = target.forward(block)
            target.rollback(len(ids) - 1)
            single = np.stack([target.forward([t])[0] for t in block])
            pb, ps = softmax(batched, 1.0), softmax(single, 1.0)
            rows.append({"target": tname, "backend": spec["backend"],
                         "n_ubatch": study.n_ubatch(spec),
                         "prompt_id": rec["id"], "positions": len(block),
                         "max_abs_dlogit": float(np.abs(batched - single).max()),
                         "max_tv": float(0.5 * np.abs(pb - ps).sum(axis=1).max()),
                         "argmax_flips": int((batched.argmax(1) != single.argmax(1)).sum())})
    write_parquet(pd.DataFrame(rows), out)


def _qual_draft(study: Study, tname: str) -> str:
    return next(p["draft"] for p in study.pairs if p["target"] == tname)


def run_qualification(study: Study, prompt_set: list[dict], reference: pd.DataFrame, out: Path) -> None:
    cfg = study.section("qualification", repetitions=2, k=4)
    ref = reference_lookup(reference)
    pool, rows = ModelPool(study), []
    n = len(study.target_names) * len(prompt_set) * 2 * cfg["repetitions"]
    bar = tqdm(total=n, desc="qualification", unit="run")
    settings = DecodeSettings(study.settings["max_new_tokens"], 0.0, study.settings["seed"])
    for tname, target in pool.each_target(study.target_names):
        dname = _qual_draft(study, tname)
        for rep in range(cfg["repetitions"]):
            for rec in prompt_set:
                ids = prompt_ids(target, rec)
                for mode in ("batched", "serialized"):
                    drafter = pool.drafter(dname, target, 0.0, settings.seed)
                    s = DecodeSettings(settings.max_new_tokens, 0.0, settings.seed, mode)
                    r = decode_speculative(target, drafter, ids, s, make_policy("fixed", cfg["k"]))
                    want = ref[(tname, rec["id"])]
                    rows.append({"target": tname, "draft": dname, "verify_mode": mode, "rep": rep,
                                 "prompt_id": rec["id"], "workload": rec["workload"], "k": cfg["k"],
                                 "ids": r.new_ids, "ids_equal": r.new_ids == want["ids"],
                                 "text_equal": r.text == want["text"]})
                    bar.update()
    bar.close()
    write_parquet(pd.DataFrame(rows), out)


def seal_predictions(study: Study, prompt_set: list[dict], out: Path) -> None:
    """Check the hypothesis on discovery prompts, then predict and seal the reserved ones."""
    frac = study.section("prediction", discovery_fraction=0.5)["discovery_fraction"]
    discovery, reserved = split_discovery(prompt_set, frac)
    pool = ModelPool(study)
    settings = DecodeSettings(study.settings["max_new_tokens"], 0.0, study.settings["seed"], "serialized")
    disc_rows, predictions = [], {}
    for tname, target in pool.each_target(tqdm(study.target_names, desc="predict", unit="target")):
        dname = _qual_draft(study, tname)
        for rec in discovery:
            ids = prompt_ids(target, rec)
            pred = decode_target_only(target, ids, settings).new_ids
            live = decode_speculative(target, pool.drafter(dname, target, 0.0, settings.seed), ids,
                                      settings, make_policy("fixed", 4)).new_ids
            disc_rows.append({"target": tname, "prompt_id": rec["id"], "holds": pred == live})
        for rec in reserved:
            predictions[f"{tname}|{rec['id']}"] = decode_target_only(target, prompt_ids(target, rec),
                                                                     settings).new_ids
    write_json({"hypothesis": HYPOTHESIS, "discovery": disc_rows,
                "reserved_prompts": [r["id"] for r in reserved], "predictions": predictions,
                "predictions_sha256": sha256_text(canonical_json(predictions)),
                "sealed_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}, out)


def run_predicted(study: Study, prompt_set: list[dict], sealed: Path, out: Path,
                  live_out: Path | None = None) -> None:
    """Live serialized runs on the reserved prompts, compared to the sealed predictions.
    ``live_out`` receives the live runs' ids (target, prompt_id, ids), the raw record the
    audit recounts P from (``prediction_counts``)."""
    seal = read_json(sealed)
    if sha256_text(canonical_json(seal["predictions"])) != seal["predictions_sha256"]:
        raise SpecproofError(f"{sealed}: predictions changed after sealing (predictions_sha256 mismatch)")
    reserved = [r for r in prompt_set if r["id"] in set(seal["reserved_prompts"])]
    pool, live = ModelPool(study), []
    settings = DecodeSettings(study.settings["max_new_tokens"], 0.0, study.settings["seed"], "serialized")
    for tname, target in pool.each_target(tqdm(study.target_names, desc="prediction live", unit="target")):
        dname = _qual_draft(study, tname)
        for rec in reserved:
            ids = prompt_ids(target, rec)
            r = decode_speculative(target, pool.drafter(dname, target, 0.0, settings.seed), ids,
                                   settings, make_policy("fixed", 4))
            live.append({"target": tname, "prompt_id": rec["id"], "ids": list(r.new_ids)})
    counts = prediction_counts(seal, live)
    if live_out is not None:
        write_parquet(pd.DataFrame(live, columns=["target", "prompt_id", "ids"]), live_out)
    write_json({"hypothesis": seal["hypothesis"], "predictions_sha256": seal["predictions_sha256"],
                **counts}, out)


def prediction_counts(seal: dict, live: list[dict]) -> dict:
    """Endpoint P from the sealed predictions and the live runs' ids: a live run matches
    when its ids equal the prediction sealed for its (target, prompt); P_matched counts
    the matches over P_total live runs, per target too. discovery_holds counts the
    discovery prompts on which the hypothesis held before sealing."""
    rows = [{"target": x["target"], "prompt_id": x["prompt_id"],
             "match": list(x["ids"]) == list(seal["predictions"][f"{x['target']}|{x['prompt_id']}"])}
            for x in live]
    per_target = {t: {"matched": sum(x["match"] for x in rows if x["target"] == t),
                      "total": sum(1 for x in rows if x["target"] == t)}
                  for t in dict.fromkeys(x["target"] for x in rows)}
    return {"discovery_holds": sum(d["holds"] for d in seal["discovery"]),
            "discovery_total": len(seal["discovery"]), "live": rows, "per_target": per_target,
            "P_matched": sum(x["match"] for x in rows), "P_total": len(rows)}
