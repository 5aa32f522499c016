"""The study grid: pairs x configurations x prompts x repetitions, timed.

Order within one (pair, prompt, temperature, repetition) block: target-only, then each
speculative configuration, then target-only again (A B.. A), so slow drift hits both
paths; a speculative run's baseline is the mean of the two bracketing target-only
runs. With ``settings.shuffle_runs`` the speculative configurations run in an order drawn
per block from the study seed (``block_order``), so no configuration always runs first
after the target-only run or last before it; a run keeps its seed and run id (its place
in the unshuffled block), and ``order`` records when it ran. Timing excludes model load
and prefill (``decode_ns`` only).

Greedy runs stop at EOS, as a user's would. Sampled runs (T > 0) decode exactly
``max_new_tokens`` tokens (no stop at EOS; the models go on sampling past it): whether a
sample hits EOS early is chance, and a speedup of runs of different lengths would
compare unequal work (one T = 1 run that stopped after one token read S = 0.145). Each run records the
host that timed it (``host``): the analysis compares runs of one block only on one host.
"""
from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from ..decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from ..models.loader import ModelPool
from ..decode.policies import make_policy
from ..records import seed_from, utc_stamp, write_parquet
from ..load import warn_if_busy, watch
from ..study.config import Study
from ..decode.trace import RunResult
from ..study.workloads import prompt_ids


def run_seed(study: Study, *parts) -> int:
    """A distinct seed per run: sha256(study seed, pair, prompt, repetition, temperature,
    position in the block). Sampled sequences must not share randomness: the
    certificate pools them and needs them independent."""
    return seed_from("|".join(str(x) for x in (study.settings["seed"], *parts)))


def block_order(study: Study, block: str, n: int) -> list[int]:
    """The order in which a block's ``n`` speculative configurations run: 0..n-1, or with
    ``settings.shuffle_runs`` a permutation drawn from sha256(study seed, block, 'order')."""
    if not study.settings.get("shuffle_runs", False):
        return list(range(n))
    rng = np.random.default_rng(run_seed(study, block, "order"))
    return [int(i) for i in rng.permutation(n)]


def _row(run_id: str, base: dict, cfg: dict, r: RunResult) -> dict:
    return {"run_id": run_id, **base, **cfg, "path": r.path, "new_tokens": r.new_tokens,
            "prefill_ns": r.prefill_ns, "decode_ns": r.decode_ns, "tokens_per_s": r.tokens_per_s,
            "ids": r.new_ids, "text": r.text, "stop_reason": r.stop_reason,
            "mean_accepted": r.mean_accepted() if r.path == "speculative" else float("nan"),
            "trace_closure": r.trace_closure()}


def run_grid(study: Study, prompt_set: list[dict], runs_out: Path, rounds_out: Path) -> None:
    grids = {p["name"]: study.grid(p["name"]) for p in study.pairs}
    reps = int(study.settings.get("repetitions", 1))
    n_runs = len(prompt_set) * reps * sum(
        2 + sum(c.temperature == t for c in g) for g in grids.values()
        for t in dict.fromkeys(c.temperature for c in g))
    pool, run_rows, round_frames = ModelPool(study), [], []
    bar = tqdm(total=n_runs, desc=f"runs {study.name}", unit="run")
    order, host = 0, socket.gethostname()
    for _, pair, target in pool.each_pair(study.pairs):
        for rec in prompt_set:
            ids = prompt_ids(target, rec)
            grid = grids[pair["name"]]
            for rep in range(reps):
                for temp in dict.fromkeys(c.temperature for c in grid):
                    block = f"{pair['name']}|{rec['id']}|r{rep}|T{temp:g}"
                    configs = [c for c in grid if c.temperature == temp]
                    plan = ["A", *configs, "A"]
                    positions = [0, *(1 + i for i in block_order(study, block, len(configs))), len(plan) - 1]
                    for j in positions:
                        item = plan[j]
                        seed = run_seed(study, block, j)
                        base = {"pair": pair["name"], "target": pair["target"], "draft": pair["draft"],
                                "workload": rec["workload"], "prompt_id": rec["id"], "rep": rep,
                                "seed": seed, "host": host, "started_at": utc_stamp()}
                        settings = DecodeSettings(study.settings["max_new_tokens"], temp, seed, "batched",
                                                  stop_at_eos=temp == 0)
                        if item == "A":
                            with watch() as w:
                                r = decode_target_only(target, ids, settings)
                            cfg = {"config": "target-only", "k": 0, "policy": "none",
                                   "verify_mode": "none", "temperature": temp}
                        else:
                            drafter = pool.drafter(pair["draft"], target, temp, seed)
                            s = DecodeSettings(settings.max_new_tokens, temp, seed, item.verify_mode,
                                               stop_at_eos=settings.stop_at_eos)
                            with watch() as w:
                                r = decode_speculative(target, drafter, ids, s, make_policy(item.policy, item.k))
                            cfg = {"config": item.label, "k": item.k, "policy": item.policy,
                                   "verify_mode": item.verify_mode, "temperature": temp}
                        run_id = f"{block}|{j}|{cfg['config']}"
                        run_rows.append(dict(_row(run_id, base, cfg, r), order=order, other_cpu_share=w.share))
                        order += 1
                        rf = r.rounds_frame()
                        rf.insert(0, "run_id", run_id)
                        round_frames.append(rf)
                        bar.update()
    bar.close()
    warn_if_busy("the grid", [r["other_cpu_share"] for r in run_rows])
    write_parquet(pd.DataFrame(run_rows), runs_out)
    write_parquet(pd.concat(round_frames, ignore_index=True), rounds_out)
