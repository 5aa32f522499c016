"""Execution-path qualification, batch invariance and the sealed-prediction protocol.

- Batch invariance: score the same K+1 positions in one call vs one per call; record
  max |delta logit|, total variation between the T=1 softmaxes, and greedy argmax flips.
  Run on the discovery prompts (no stage touches a reserved prompt before the seal).
- Qualification: batched and serialized verify paths, greedy, R repetitions on every
  reserved prompt, after the predictions are sealed (``evidence.prediction``): these are
  the reserved live runs that P is scored on too. A path qualifies only if its ids equal
  the sealed reference on every run, and on at least ``min_runs`` runs.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from ..decode.decoding import VERIFY_MODES, DecodeSettings, decode_speculative
from ..models.loader import ModelPool
from ..decode.policies import make_policy
from ..records import utc_stamp, write_parquet
from .prediction import qualification_draft
from .reference import reference_lookup
from ..decode.sampling import softmax
from ..study.config import Study
from ..study.workloads import prompt_ids


def probe_batch_invariance(study: Study, prompt_set: list[dict], reference: pd.DataFrame,
                           out: Path, k: int = 4) -> None:
    pool, rows = ModelPool(study), []
    ref = reference_lookup(reference)
    for tname, target in pool.each_target(study.qualified_targets):
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


def run_qualification(study: Study, prompt_set: list[dict], reference: pd.DataFrame, out: Path) -> None:
    """Greedy runs of both verify paths on ``prompt_set`` (the reserved prompts), R times;
    each row records its ids, whether they equal the reference, and when it started."""
    cfg = study.section("qualification", repetitions=2, k=4)
    ref = reference_lookup(reference)
    pool, rows = ModelPool(study), []
    n = len(study.qualified_targets) * len(prompt_set) * 2 * cfg["repetitions"]
    bar = tqdm(total=n, desc="qualification", unit="run")
    settings = DecodeSettings(study.settings["max_new_tokens"], 0.0, study.settings["seed"])
    for tname, target in pool.each_target(study.qualified_targets):
        dname = qualification_draft(study, tname)
        for rep in range(cfg["repetitions"]):
            for rec in prompt_set:
                ids = prompt_ids(target, rec)
                for mode in VERIFY_MODES:
                    started = utc_stamp()
                    drafter = pool.drafter(dname, target, 0.0, settings.seed)
                    s = DecodeSettings(settings.max_new_tokens, 0.0, settings.seed, mode)
                    r = decode_speculative(target, drafter, ids, s, make_policy("fixed", cfg["k"]))
                    want = ref[(tname, rec["id"])]
                    rows.append({"target": tname, "draft": dname, "verify_mode": mode, "rep": rep,
                                 "prompt_id": rec["id"], "workload": rec["workload"], "k": cfg["k"],
                                 "ids": r.new_ids, "ids_equal": r.new_ids == want["ids"],
                                 "text_equal": r.text == want["text"], "started_at": started})
                    bar.update()
    bar.close()
    write_parquet(pd.DataFrame(rows), out)
