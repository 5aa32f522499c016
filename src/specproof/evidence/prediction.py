"""Endpoint P, seed 002's protocol: discovery -> frozen hypothesis -> sealed ids -> reserved
live runs. A draft-free predictor (``decode.decoding.predict_greedy``: ``ub1`` or
``verify_shape``; never the reference path) is chosen per verify path on the discovery
prompts, where each candidate is compared with one live greedy run of the path; the chosen
predictor's ids for every reserved prompt are written to ``predictions.json`` and sealed in
``prediction_seal.json`` (sha256 of that file and the time), a separate file that the
reserved-run rules take as input. The live reserved runs are the qualification runs
(``evidence.qualification``), so P and Q are counted on the same ids.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from tqdm import tqdm

from ..decode.decoding import (PREDICTORS, VERIFY_MODES, DecodeSettings, decode_speculative,
                               predict_greedy)
from ..decode.policies import make_policy
from ..errors import SpecproofError
from ..models.loader import ModelPool
from ..records import (canonical_json, read_json, sha256_file, sha256_text, utc_stamp, write_json,
                       write_parquet)
from ..study.config import Study
from ..study.workloads import prompt_ids

HYPOTHESIS = ("For each target and verify path (batched, serialized) at the qualification K, "
              "the draft-free predictor that matched the most discovery runs (ties: the first of "
              f"{', '.join(PREDICTORS)}) gives the path's greedy ids on every reserved prompt.")


def qualification_draft(study: Study, target: str) -> str:
    """The draft a target's paths are qualified and predicted with: its first pair's."""
    return next(p["draft"] for p in study.pairs if p["target"] == target)


def path_key(target: str, verify_mode: str, prompt_id: str) -> str:
    return f"{target}|{verify_mode}|{prompt_id}"


def seal_predictions(study: Study, discovery: list[dict], reserved: list[dict],
                     predictions_out: Path, seal_out: Path) -> None:
    """Choose a predictor per path on ``discovery``, predict ``reserved``, write and seal."""
    k = study.section("qualification", k=4)["k"]
    n = study.settings["max_new_tokens"]
    pool, disc_rows, paths, predictions = ModelPool(study), [], [], {}
    # one tick per decode: each predictor on each discovery prompt, each path's live run on
    # each, and at most every predictor on each reserved prompt (fewer ticks when fewer chosen)
    per_target = len(discovery) * (len(PREDICTORS) + len(VERIFY_MODES)) + len(reserved) * len(PREDICTORS)
    bar = tqdm(total=per_target * len(study.qualified_targets), desc="predict", unit="decode")
    tick = lambda x: (bar.update(1), x)[1]  # noqa: E731
    for tname, target in pool.each_target(study.qualified_targets):
        done = bar.n
        dname = qualification_draft(study, tname)
        cand = {(p, rec["id"]): tick(predict_greedy(target, prompt_ids(target, rec), n, p, k))
                for p in PREDICTORS for rec in discovery}
        for mode in VERIFY_MODES:
            s = DecodeSettings(n, 0.0, study.settings["seed"], mode)
            for rec in discovery:
                live = tick(decode_speculative(target, pool.drafter(dname, target, 0.0, s.seed),
                                               prompt_ids(target, rec), s, make_policy("fixed", k)).new_ids)
                disc_rows += [{"target": tname, "verify_mode": mode, "prompt_id": rec["id"],
                               "predictor": p, "holds": cand[p, rec["id"]] == live} for p in PREDICTORS]
            held = {p: sum(r["holds"] for r in disc_rows
                           if (r["target"], r["verify_mode"], r["predictor"]) == (tname, mode, p))
                    for p in PREDICTORS}
            best = max(PREDICTORS, key=lambda p: (held[p], -PREDICTORS.index(p)))
            paths.append({"target": tname, "draft": dname, "verify_mode": mode, "predictor": best,
                          "discovery_matched": held[best], "discovery_total": len(discovery)})
        chosen = {p["predictor"] for p in paths if p["target"] == tname}
        reserved_ids = {(p, rec["id"]): tick(predict_greedy(target, prompt_ids(target, rec), n, p, k))
                        for p in chosen for rec in reserved}
        bar.update(done + per_target - bar.n)
        for path in (p for p in paths if p["target"] == tname):
            for rec in reserved:
                predictions[path_key(tname, path["verify_mode"], rec["id"])] = \
                    reserved_ids[path["predictor"], rec["id"]]
    bar.close()
    write_json({"hypothesis": HYPOTHESIS, "k": k, "paths": paths, "discovery": disc_rows,
                "reserved_prompts": [r["id"] for r in reserved], "predictions": predictions},
               predictions_out)
    write_json({"file": Path(predictions_out).name, "predictions_sha256": sha256_file(predictions_out),
                "sealed_at": utc_stamp()}, seal_out)


def load_sealed(predictions: Path, seal: Path) -> tuple[dict, dict]:
    """(predictions document, seal), or an error naming the file changed after sealing.
    A set frozen before the seal was its own file holds both in ``prediction_seal.json``."""
    sealed = read_json(seal)
    if "predictions" in sealed:  # the earlier form: the hash inside the file it seals
        if sha256_text(canonical_json(sealed["predictions"])) != sealed.get("predictions_sha256"):
            raise SpecproofError(f"{seal}: field predictions: changed after sealing "
                                 "(predictions_sha256 mismatch)")
        return sealed, sealed
    if not Path(predictions).is_file():
        raise SpecproofError(f"{predictions}: missing; the seal {seal} names it")
    actual = sha256_file(predictions)
    if actual != sealed.get("predictions_sha256"):
        raise SpecproofError(f"{predictions}: changed after sealing (sha256 {actual[:12]} != "
                             f"sealed {str(sealed.get('predictions_sha256'))[:12]} in {seal})")
    return read_json(predictions), sealed


def require_seal(d: Path, stage: str) -> None:
    """A stage that touches reserved prompts runs only after the predictions are sealed."""
    seal = Path(d) / "prediction_seal.json"
    if not seal.is_file():
        raise SpecproofError(f"{seal}: missing; stage {stage} touches the reserved prompts and "
                             "runs only after the predictions are sealed (stage predict)")
    load_sealed(Path(d) / "predictions.json", seal)


def _key(row: dict) -> str:
    if row.get("verify_mode") is not None:
        return path_key(row["target"], row["verify_mode"], row["prompt_id"])
    return f"{row['target']}|{row['prompt_id']}"  # the earlier form: serialized path only


def prediction_counts(doc: dict, live: list[dict]) -> dict:
    """Endpoint P from the sealed predictions and the live runs' ids: a live run matches
    when its ids equal the prediction sealed for its (target, verify path, prompt);
    P_matched of P_total live runs, per target and per path. discovery_holds counts the
    discovery runs the chosen predictors matched before sealing (earlier form: the
    discovery prompts on which the hypothesis held)."""
    rows = [{"target": x["target"], "verify_mode": x.get("verify_mode"), "prompt_id": x["prompt_id"],
             "match": list(x["ids"]) == list(doc["predictions"][_key(x)])} for x in live]

    def tally(keep) -> dict:
        sel = [x for x in rows if keep(x)]
        return {"matched": sum(x["match"] for x in sel), "total": len(sel)}

    per_target = {t: tally(lambda x, t=t: x["target"] == t) for t in dict.fromkeys(x["target"] for x in rows)}
    per_path = {f"{t}|{m}": tally(lambda x, t=t, m=m: (x["target"], x["verify_mode"]) == (t, m))
                for t, m in dict.fromkeys((x["target"], x["verify_mode"]) for x in rows) if m}
    if "paths" in doc:
        holds = sum(p["discovery_matched"] for p in doc["paths"])
        total = sum(p["discovery_total"] for p in doc["paths"])
    else:
        holds, total = sum(d["holds"] for d in doc["discovery"]), len(doc["discovery"])
    return {"discovery_holds": holds, "discovery_total": total, "live": rows, "per_target": per_target,
            "per_path": per_path, "paths": doc.get("paths", []), "P_matched": sum(x["match"] for x in rows), "P_total": len(rows)}


def first_reserved_start(qualification: pd.DataFrame, runs: pd.DataFrame, reserved: list[str]) -> str | None:
    """The earliest ``started_at`` of a live run on a reserved prompt (qualification and
    study runs); None when the records predate run times."""
    stamps = [df.loc[df["prompt_id"].isin(reserved), "started_at"]
              for df in (qualification, runs) if "started_at" in df]
    stamps = [s for col in stamps for s in col.dropna()]
    return min(stamps) if stamps else None


LIVE_COLUMNS = ["target", "verify_mode", "rep", "prompt_id", "ids", "started_at"]


def reserved_live(qualification: pd.DataFrame, reserved: list[str]) -> pd.DataFrame:
    """The reserved live runs P is scored on: the qualification runs on the reserved
    prompts, in their order, with their ids as lists of ints (prediction_live.parquet)."""
    live = qualification[qualification["prompt_id"].isin(reserved)]
    live = live[LIVE_COLUMNS].copy()
    live["ids"] = live["ids"].map(lambda v: [int(x) for x in v])
    return live.reset_index(drop=True)


def score_predictions(predictions: Path, seal: Path, qualification: Path, runs: Path,
                      out: Path, live_out: Path) -> None:
    """P from the sealed predictions and the qualification runs (the reserved live runs);
    refuses when a reserved run started before the seal was written."""
    doc, sealed = load_sealed(predictions, seal)
    q = pd.read_parquet(qualification)
    first = first_reserved_start(q, pd.read_parquet(runs), doc["reserved_prompts"])
    if first is not None and first <= sealed["sealed_at"]:
        raise SpecproofError(f"{seal}: sealed at {sealed['sealed_at']}, after a reserved run started "
                             f"({first}); the protocol needs the seal first")
    live = reserved_live(q, doc["reserved_prompts"])
    write_parquet(live, live_out)
    write_json({"hypothesis": doc["hypothesis"], "predictions_sha256": sealed["predictions_sha256"],
                "sealed_at": sealed["sealed_at"], "first_reserved_run_at": first,
                **prediction_counts(doc, live.to_dict(orient="records"))}, out)
