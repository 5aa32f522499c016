"""Benchmark 3: model drafting on the default pair (hf fp32 SmolLM2 target, llama.cpp
Q4_1 SmolLM2 draft), greedy, code and chat prompts: realized speedup vs the cost
model's ideal for the acceptance measured in the same runs.

    ideal(K) = t_T * E[C|K] / (K * c_draft + v(K+1))       (X = 0)

E[C|K] from acceptance by position (product of survival probabilities). Costs measured
in the same runs: t_T = target-only decode time per token, c_draft = (draft + replay
time) per drafted token, v(K+1) = median verify time of the rounds. The micro-benchmark
ideal (c_draft and v(B) from isolated calls, t_T = v(1)) is shown beside it. realized =
tokens/s(spec) / tokens/s(target-only), runs alternating per prompt and repetition.

    python benchmarks/model_draft.py [--ks 2 4 6 8] [--new-tokens 64] [--repeats 2]
    python benchmarks/model_draft.py --pair qwen --ks 1 2 3 4 6 --table model_draft_qwen   # needs .[qwen]

``--pair qwen``: the paper's real pair, llama.cpp Qwen2.5-Coder 1.5B target with its 0.5B
draft (both Q4_K_M).
"""
from __future__ import annotations

import argparse
import statistics

import pandas as pd

from common import CHAT_PROMPTS, CODE_PROMPTS, write_table
from specproof.decode.costmodel import acceptance_by_position, expected_committed
from specproof.decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from specproof.decode.drafters import ModelDrafter
from specproof.models.loader import load_backend
from specproof.evidence.micro import time_forward
from specproof.decode.policies import FixedPolicy


# pair -> (title's name, target spec, draft spec)
PAIRS = {"smollm2": ("default pair", {"backend": "hf", "model": "embedded:smollm2-q4_1", "threads": 2},
                     {"backend": "llama", "model": "embedded:smollm2-q4_1", "threads": 2}),
         "qwen": ("Qwen2.5-Coder 1.5B + 0.5B, llama.cpp Q4_K_M",
                  {"backend": "llama", "model": "embedded:qwen2.5-coder-1.5b-q4_k_m", "threads": 2},
                  {"backend": "llama", "model": "embedded:qwen2.5-coder-0.5b-q4_k_m", "threads": 2})}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ks", type=int, nargs="+", default=[2, 4, 6, 8])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--pair", choices=sorted(PAIRS), default="smollm2")
    ap.add_argument("--table", default="model_draft", help="results/<table>.md/.json (the Qwen pair: its own)")
    a = ap.parse_args()
    pair_name, target_spec, draft_spec = PAIRS[a.pair]
    target = load_backend(target_spec)
    draft = load_backend(draft_spec)
    s = DecodeSettings(a.new_tokens, 0.0, 0, stop_at_eos=False)
    workloads = {"code": [target.encode(p) for p in CODE_PROMPTS],
                 "chat": [target.encode(target.chat_prompt(p)) for p in CHAT_PROMPTS]}
    ctx = workloads["code"][0]
    kmax = max(a.ks)
    verify = {b: statistics.median(time_forward(target, ctx, (ctx * 4)[:b], 5)) for b in range(1, kmax + 2)}
    c_micro = statistics.median(time_forward(draft, ctx, ctx[:1], 20, last_only=True))
    rows, changed = [], 0
    for wl, prompts in workloads.items():
        for k in a.ks:
            tok_t = ns_t = tok_s = ns_s = same = 0
            frames = []
            for _ in range(a.repeats):
                for ids in prompts:
                    base = decode_target_only(target, ids, s)
                    run = decode_speculative(target, ModelDrafter(draft), ids, s, FixedPolicy(k))
                    same += run.new_ids == base.new_ids
                    tok_t, ns_t = tok_t + base.new_tokens, ns_t + base.decode_ns
                    tok_s, ns_s = tok_s + run.new_tokens, ns_s + run.decode_ns
                    frames.append(run.rounds_frame())
            changed += a.repeats * len(prompts) - same
            rounds = pd.concat(frames)
            full = rounds[rounds["k"] == k]
            e_c = expected_committed(acceptance_by_position(rounds, k), k)
            realized = (tok_s / ns_s) / (tok_t / ns_t)
            t_t = ns_t / tok_t / 1e6
            c_run = (full["draft_ns"] + full["replay_ns"]).sum() / full["k"].sum() / 1e6
            v_run = full["verify_ns"].median() / 1e6
            x_run = full["residual_ns"].mean() / 1e6
            ideal = t_t * e_c / (k * c_run + v_run)
            ideal_micro = verify[1] * e_c / (k * c_micro + verify[k + 1])
            rows.append([wl, k, realized, ideal, realized / ideal, ideal_micro, e_c,
                         float(full["committed"].mean()), t_t, c_run, v_run, x_run,
                         f"{same}/{a.repeats * len(prompts)}"])
            print(rows[-1], flush=True)
    write_table(a.table, f"Model drafting: realized speedup vs the cost model's ideal ({pair_name})",
                ["workload", "K", "realized x", "ideal x (same runs)", "realized/ideal", "ideal x (micro)",
                 "E[C|K]", "mean C", "t_T ms", "c_draft ms", "v(K+1) ms", "x ms/round", "ids equal (runs)"], rows,
                [f"{a.new_tokens} new tokens, greedy, {len(CODE_PROMPTS)} prompts per workload x {a.repeats} "
                 "repetitions; ids compared with target-only's (last column: runs equal; batched verification "
                 "can change a greedy output on llama.cpp, every run has the same length).",
                 "Costs in the same runs: t_T target-only ms per token, c_draft (draft + replay) ms per "
                 "drafted token, v(K+1) median verify ms, x mean residual ms per round (not in the ideal).",
                 f"Micro (isolated calls): c_draft = {c_micro:.2f} ms, t_T = v(1) = {verify[1]:.2f} ms, "
                 f"v(K+1) = {', '.join(f'{verify[k + 1]:.1f}' for k in a.ks)} ms for K = {a.ks}.",
                 "Goals: realized >= 0.95 x ideal, and >= 2.0x over target-only at the best K"
                 + ("." if a.pair == "smollm2" else "; realized >= 0.9 x the micro-benchmark ideal (issue 24)."),
                 bound_note(headline(rows)), *([TRIED] if a.pair == "smollm2" else [])],
                {**headline(rows), "runs_ids_changed": (changed, "runs")})


TRIED = ("Tried to cut c_draft, each measured against the build in use: llama.cpp built with "
         "AVX512-VNNI/VBMI/BF16 (draft step 11.3 vs 12.4 ms, within noise); OMP_WAIT_POLICY=PASSIVE, "
         "in case torch's and llama.cpp's OpenMP threads spin against each other on 2 cores (slower: draft "
         "step 30 vs 22 ms). The draft step already runs at llama-cpp-python's own per-token speed for "
         "that file (target_only table): no caller-side cost is left to remove.")


def headline(rows: list[list]) -> dict[str, tuple]:
    """Where the 2.0x goal stands against the cost model: the best realized and the best
    ideal speedup, and the two cost ratios that bound the ideal at the best K (every
    draft accepted: (K+1) / (K c_draft/t_T + v(K+1)/t_T))."""
    best = max(rows, key=lambda r: r[2])
    top = max(rows, key=lambda r: r[3])
    k, t_t, c, v = best[1], best[8], best[9], best[10]
    return {"best.realized": (best[2], "x"), "best.k": (k, "K"), "best.workload": (best[0], "text"),
            "best_ideal.ideal": (top[3], "x"), "best_ideal.k": (top[1], "K"),
            "best_ideal.workload": (top[0], "text"),
            "best.c_draft_over_t_target": (c / t_t, ""), "best.verify_over_t_target": (v / t_t, ""),
            "best.full_acceptance_bound": ((k + 1) / (k * c / t_t + v / t_t), "x"),
            "min_realized_over_ideal": (min(r[4] for r in rows), ""),
            "min_realized_over_micro": (min(r[2] / r[5] for r in rows), ""),
            "max_realized_over_ideal": (max(r[4] for r in rows), ""),
            "rows_meeting_0.95": (sum(r[4] >= 0.95 for r in rows), "rows"), "rows": (len(rows), "rows")}


def bound_note(h: dict[str, tuple]) -> str:
    v = {key: val for key, (val, _) in h.items()}
    return (f"Best realized {v['best.realized']:.2f}x ({v['best.workload']}, K={v['best.k']}); best ideal "
            f"{v['best_ideal.ideal']:.2f}x ({v['best_ideal.workload']}, K={v['best_ideal.k']}). At K={v['best.k']}: "
            f"c_draft/t_T = {v['best.c_draft_over_t_target']:.2f}, v(K+1)/t_T = {v['best.verify_over_t_target']:.2f}; "
            f"even with every draft accepted the ideal is (K+1) / (K c_draft/t_T + v(K+1)/t_T) = "
            f"{v['best.full_acceptance_bound']:.2f}x.")


if __name__ == "__main__":
    main()
