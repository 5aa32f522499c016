"""The physical limit (issue 24, section 2): this machine's memory bandwidth, the bound it
puts on each llama.cpp target's target-only speed, and where a frozen record set's
speeds sit against it; for the headline pair, the speedup every round's full acceptance
would give at each K from the set's micro-benchmarked verify curve, and the realized
speedup over it (``specproof.evidence.bandwidth``, ``analysis.costs.model_speedup``).

Measure on a quiet machine, the one the record set was timed on (its provenance names
the CPU; the table records this run's).

    python benchmarks/bandwidth.py [--set manifests/paper-qwen-v2/epyc-avx512]
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from common import write_table
from specproof.analysis.analyze import analyze, target_only_speed
from specproof.analysis.costs import model_speedup
from specproof.evidence.bandwidth import bound_tokens_per_s, add_bandwidth, weight_bytes_per_token
from specproof.models.files import resolve
from specproof.records import models_by_role, read_json

ROOT = Path(__file__).resolve().parents[1]


def llama_targets(set_dir: Path, model_dir: Path) -> dict[str, Path]:
    """Target name -> its GGUF file, resolved from the set's models.json specs (embedded
    models assembled and checked by sha256 on first use), for every llama target."""
    models = models_by_role(read_json(set_dir / "models.json"))
    return {name: resolve(str(m["spec"]["model"]), model_dir=model_dir)
            for (role, name), m in models.items() if role == "target" and m["spec"].get("backend") == "llama"}


def target_rows(set_dir: Path, speeds: dict[str, float], bandwidth: float, model_dir: Path) -> list[list]:
    """[target, W MB, bound tokens/s, measured tokens/s, measured/bound] per llama target."""
    rows = []
    for name, path in llama_targets(set_dir, model_dir).items():
        w = weight_bytes_per_token(path)
        bound = bound_tokens_per_s(bandwidth, w)
        rows.append([name, w / 1e6, bound, speeds[name], speeds[name] / bound])
    return rows


def full_acceptance_rows(a, pair: str) -> list[list]:
    """[K, full-acceptance bound x, realized x, realized/bound] per greedy fixed K of ``pair``:
    the bound t_T (K+1) / (K c_draft + v(K+1)) from the set's micro-benchmarks."""
    micro = a.micro[(a.micro["role"] == "target")]
    rows = []
    for r in a.config_costs.itertuples():
        if r.pair != pair or r.policy != "fixed" or r.temperature != 0:
            continue
        vm = micro[micro["name"] == r.target]
        bound = model_speedup(np.ones(r.k), r.k, r.draft_ms, dict(zip(vm["B"].astype(int), vm["median_ms"])),
                              r.target_ms)
        rows.append([r.k, bound, r.S_measured, r.S_measured / bound])
    return sorted(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", type=Path, default=ROOT / "manifests/paper-qwen-v2/epyc-avx512")
    ap.add_argument("--model-dir", type=Path, default=ROOT / "resources/models")
    ap.add_argument("--pair", default="qwen-1b5+qwen-0b5-draft", help="the pair whose K grid is bounded")
    a = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    bw = {1: add_bandwidth(1), cores: add_bandwidth(cores)}
    analysis = analyze(a.set)
    speeds = target_only_speed(analysis.runs).set_index("target")["tokens_per_s"].to_dict()
    targets = target_rows(a.set, speeds, bw[cores], a.model_dir)
    ks = full_acceptance_rows(analysis, a.pair)
    rows = ([[f"target {t}", f"{w:.0f} MB", b, s, s / b] for t, w, b, s, _ in targets]
            + [[f"{a.pair} K={k}", "full acceptance", b, s, s / b] for k, b, s, _ in ks])
    values = {"bandwidth_1_thread_gb_s": (bw[1] / 1e9, "GB/s"), "bandwidth_all_gb_s": (bw[cores] / 1e9, "GB/s"),
              "threads_all": (cores, "threads"), "pair": (a.pair, "text")}
    for t, w, b, s, ratio in targets:
        values |= {f"{t}.weight_mb": (w, "MB"), f"{t}.bound_tokens_per_s": (b, "tokens/s"),
                   f"{t}.measured_tokens_per_s": (s, "tokens/s"), f"{t}.measured_over_bound": (ratio, "")}
    for k, b, s, ratio in ks:
        values |= {f"K{k}.full_acceptance_bound": (b, "x"), f"K{k}.realized": (s, "x"),
                   f"K{k}.realized_over_bound": (ratio, "")}
    write_table("bandwidth", f"The memory-bandwidth bound and where {a.set.parent.name}@{a.set.name} sits against it",
                ["what", "weights per token / kind", "bound (tokens/s or x)", "measured", "measured/bound"], rows,
                [f"STREAM Add bandwidth (a = b + c, 24 bytes per element, best of 5 over 3 x 256 MiB): "
                 f"{bw[1] / 1e9:.1f} GB/s on 1 thread, {bw[cores] / 1e9:.1f} GB/s on {cores}; the target bounds "
                 f"use the {cores}-thread figure (llama.cpp runs on every core).",
                 "Target rows: bound = bandwidth / weight bytes per token (every tensor but the embedding "
                 "lookup; KV cache left out); measured = the set's median greedy target-only tokens/s.",
                 "Full-acceptance rows: t_T (K+1) / (K c_draft + v(K+1)) from the set's micro-benchmarks "
                 "(every draft accepted); measured = the set's pooled speedup S at that K."],
                values)


if __name__ == "__main__":
    main()
