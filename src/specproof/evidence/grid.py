"""The study grid: pairs x configurations x prompts x repetitions, timed.

Order within one (pair, prompt, temperature, repetition) block: target-only, then each
speculative configuration, then target-only again (A B.. A), so slow drift hits both
paths; a speculative run's baseline is the mean of the two bracketing target-only
runs. Timing excludes model load and prefill (``decode_ns`` only). Each run records the
host that timed it (``host``): the analysis compares runs of one block only on one host.
"""
from __future__ import annotations

import socket
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from ..decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from ..models.loader import ModelPool
from ..decode.policies import make_policy
from ..records import seed_from, write_parquet
from ..study.config import Study
from ..decode.trace import RunResult
from ..study.workloads import prompt_ids


def run_seed(study: Study, *parts) -> int:
    """A distinct seed per run: sha256(study seed, pair, prompt, repetition, temperature,
    position in the block). Sampled sequences must not share randomness: the
    certificate pools them and needs them independent."""
    return seed_from("|".join(str(x) for x in (study.settings["seed"], *parts)))


def _row(run_id: str, base: dict, cfg: dict, r: RunResult) -> dict:
    return {"run_id": run_id, **base, **cfg, "path": r.path, "new_tokens": r.new_tokens,
            "prefill_ns": r.prefill_ns, "decode_ns": r.decode_ns, "tokens_per_s": r.tokens_per_s,
            "ids": r.new_ids, "text": r.text, "stop_reason": r.stop_reason,
            "mean_accepted": r.mean_accepted() if r.path == "speculative" else float("nan"),
            "trace_closure": r.trace_closure()}


def run_grid(study: Study, prompt_set: list[dict], runs_out: Path, rounds_out: Path) -> None:
    grid = study.grid()
    temps = list(dict.fromkeys(c.temperature for c in grid))
    reps = int(study.settings.get("repetitions", 1))
    n_runs = len(study.pairs) * len(prompt_set) * reps * sum(
        2 + sum(c.temperature == t for c in grid) for t in temps)
    pool, run_rows, round_frames = ModelPool(study), [], []
    bar = tqdm(total=n_runs, desc=f"runs {study.name}", unit="run")
    order, host = 0, socket.gethostname()
    for _, pair, target in pool.each_pair(study.pairs):
        for rec in prompt_set:
            ids = prompt_ids(target, rec)
            for rep in range(reps):
                for temp in temps:
                    block = f"{pair['name']}|{rec['id']}|r{rep}|T{temp:g}"
                    plan = ["A"] + [c for c in grid if c.temperature == temp] + ["A"]
                    for j, item in enumerate(plan):
                        seed = run_seed(study, block, j)
                        base = {"pair": pair["name"], "target": pair["target"], "draft": pair["draft"],
                                "workload": rec["workload"], "prompt_id": rec["id"], "rep": rep,
                                "seed": seed, "host": host}
                        settings = DecodeSettings(study.settings["max_new_tokens"], temp, seed, "batched")
                        if item == "A":
                            r = decode_target_only(target, ids, settings)
                            cfg = {"config": "target-only", "k": 0, "policy": "none",
                                   "verify_mode": "none", "temperature": temp}
                        else:
                            drafter = pool.drafter(pair["draft"], target, temp, seed)
                            s = DecodeSettings(settings.max_new_tokens, temp, seed, item.verify_mode)
                            r = decode_speculative(target, drafter, ids, s, make_policy(item.policy, item.k))
                            cfg = {"config": item.label, "k": item.k, "policy": item.policy,
                                   "verify_mode": item.verify_mode, "temperature": temp}
                        run_id = f"{block}|{j}|{cfg['config']}"
                        run_rows.append(dict(_row(run_id, base, cfg, r), order=order))
                        order += 1
                        rf = r.rounds_frame()
                        rf.insert(0, "run_id", run_id)
                        round_frames.append(rf)
                        bar.update()
    bar.close()
    write_parquet(pd.DataFrame(run_rows), runs_out)
    write_parquet(pd.concat(round_frames, ignore_index=True), rounds_out)
