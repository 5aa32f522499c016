"""Sealed target-only references: greedy ids per (target, prompt), sealed before any
speculative run. The seal is sha256(canonical ids) together with the provenance's
sha256; every later stage calls ``records.check_seal`` and refuses a changed reference."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from ..decode.decoding import DecodeSettings, decode_target_only
from ..models.loader import ModelPool
from ..records import reference_ids_sha256, sha256_file, write_json, write_parquet
from ..study.config import Study
from ..study.workloads import prompt_ids


def run_reference(study: Study, prompt_set: list[dict], provenance: Path, out: Path, seal: Path) -> None:
    seal_reference(study, reference_rows(study, prompt_set), provenance, out, seal)


def reference_rows(study: Study, prompt_set: list[dict]) -> pd.DataFrame:
    """Greedy target-only ids of every (target, prompt) of the study, in target order."""
    settings = DecodeSettings(max_new_tokens=study.settings["max_new_tokens"], temperature=0.0,
                              seed=study.settings["seed"])
    pool, rows = ModelPool(study), []
    bar = tqdm(total=len(study.target_names) * len(prompt_set), desc="reference", unit="run")
    for tname, target in pool.each_target(study.target_names):
        for rec in prompt_set:
            ids = prompt_ids(target, rec)
            r = decode_target_only(target, ids, settings)
            rows.append({"target": tname, "prompt_id": rec["id"], "workload": rec["workload"],
                         "prompt_ids": ids, "ids": r.new_ids, "text": r.text,
                         "stop_reason": r.stop_reason})
            bar.update()
    bar.close()
    return pd.DataFrame(rows)


def seal_reference(study: Study, df: pd.DataFrame, provenance: Path, out: Path, seal: Path) -> None:
    """Write the reference and its seal: sha256 of the canonical ids with the provenance's."""
    write_parquet(df, out)
    write_json({"study": study.name, "ids_sha256": reference_ids_sha256(df),
                "provenance_sha256": sha256_file(provenance),
                "sealed_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}, seal)


def reference_lookup(df: pd.DataFrame) -> dict[tuple[str, str], dict]:
    return {(r.target, r.prompt_id): {"ids": [int(x) for x in r.ids], "text": r.text}
            for r in df.itertuples()}


def first_divergence(a: list[int], b: list[int]) -> int:
    """Index of the first differing position (len of the shorter if one is a prefix);
    -1 when equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return -1 if len(a) == len(b) else min(len(a), len(b))


def divergences(runs: pd.DataFrame, qualification: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """(target, prompt_id, index) of every first divergence from the reference, over the
    greedy grid runs and then the qualification runs, each once, in that order."""
    ref = reference_lookup(reference)
    greedy = runs[runs["temperature"] == 0]
    rows = []
    for r in list(greedy.itertuples()) + list(qualification.itertuples()):
        want, ids = ref[(r.target, r.prompt_id)]["ids"], [int(x) for x in r.ids]
        if ids != want:
            rows.append({"target": r.target, "prompt_id": r.prompt_id,
                         "index": first_divergence(ids, want)})
    return pd.DataFrame(rows, columns=["target", "prompt_id", "index"]).drop_duplicates()


def score_margins(study: Study, prompt_set: list[dict], reference: pd.DataFrame, todo: pd.DataFrame,
                  out: Path) -> None:
    """Top-2 logit margin of the target at each first divergence in ``todo``, scored
    along the reference sequence (the prefix fed in one prefill call)."""
    prompts = {r["id"]: r for r in prompt_set}
    ref = {(r.target, r.prompt_id): [int(x) for x in r.ids] for r in reference.itertuples()}
    groups = dict(list(todo.groupby("target")))
    pool, rows = ModelPool(study), []
    for tname, target in pool.each_target(list(groups)):
        for r in groups[tname].itertuples():
            ids = prompt_ids(target, prompts[r.prompt_id])
            seq = ids + ref[(tname, r.prompt_id)][: int(r.index)]
            target.reset()
            logits = target.forward(seq, last_only=True)[0]
            top2 = np.sort(logits)[-2:]
            rows.append({"target": tname, "prompt_id": r.prompt_id, "index": int(r.index),
                         "top2_margin": float(top2[1] - top2[0])})
    write_parquet(pd.DataFrame(rows, columns=["target", "prompt_id", "index", "top2_margin"]), out)
