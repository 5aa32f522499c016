"""Micro-benchmarks for the cost model: target verify cost v(B) for B = 1..max_b, and
the draft step cost (one token, last-position logits), per backend and n_ubatch.

Each measurement: prefill a prompt, then time forward(B tokens) and roll back; the
median of ``repeats`` (after one warm-up) is recorded in ms, every sample kept.
"""
from __future__ import annotations

import statistics
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from ..decode.backend import Backend, timed_forward_ms
from ..models.loader import ModelPool
from ..records import write_parquet
from ..load import warn_if_busy, watch
from ..study.config import Study
from ..study.workloads import prompt_ids


def time_forward(backend: Backend, context: list[int], block: list[int], repeats: int,
                 last_only: bool = False) -> list[float]:
    """ms per forward(block) after ``context`` is cached (``timed_forward_ms``), the first
    call discarded as warm-up."""
    backend.reset()
    backend.forward(context, last_only=True)
    return [timed_forward_ms(backend, block, last_only) for _ in range(repeats + 1)][1:]


def run_micro(study: Study, prompt_set: list[dict], out: Path) -> None:
    cfg = study.section("micro", max_b=16, repeats=5)
    pool, rows = ModelPool(study), []
    rec = prompt_set[0]
    bar = tqdm(total=len(study.target_names) * cfg["max_b"], desc="micro", unit="B")
    for tname, target in pool.each_target(study.target_names):
        ids = prompt_ids(target, rec)
        block = (ids * 4)[: cfg["max_b"]]
        spec = study.target_spec(tname)
        for b in range(1, cfg["max_b"] + 1):
            with watch() as w:
                samples = time_forward(target, ids, block[:b], cfg["repeats"])
            rows.append({"role": "target", "name": tname, "backend": spec["backend"],
                         "n_ubatch": study.n_ubatch(spec), "B": b, "median_ms": statistics.median(samples),
                         "samples_ms": samples, "other_cpu_share": w.share})
            bar.update()
        for pair in study.pairs:
            if pair["target"] != tname:
                continue
            draft = pool.draft_backend(pair["draft"])
            if draft is None or any(r["role"] == "draft" and r["name"] == pair["draft"] for r in rows):
                continue
            with watch() as w:
                samples = time_forward(draft, ids, block[:1], cfg["repeats"] * 4, last_only=True)
            dspec = study.draft_spec(pair["draft"])
            rows.append({"role": "draft", "name": pair["draft"], "backend": dspec["backend"],
                         "n_ubatch": study.n_ubatch(dspec), "B": 1, "median_ms": statistics.median(samples),
                         "samples_ms": samples, "other_cpu_share": w.share})
    bar.close()
    warn_if_busy("the micro-benchmark", [r["other_cpu_share"] for r in rows])
    write_parquet(pd.DataFrame(rows), out)
