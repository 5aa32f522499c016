"""Benchmark 3: model drafting on the default pair (hf fp32 SmolLM2 target, llama.cpp
Q4_1 SmolLM2 draft), greedy, code and chat prompts: realized speedup vs the cost
model's ideal for the acceptance measured in the same runs.

ideal(K) = t_T * E[C|K] / (K * c_draft + v(K+1)), with E[C|K] from acceptance by
position (product of survival probabilities), c_draft and v(B) measured here (median
of repeats), t_T = v(1). realized = tokens/s(spec) / tokens/s(target-only), A/B per prompt.

    python benchmarks/model_draft.py [--ks 2 4 6 8] [--new-tokens 64]
"""
from __future__ import annotations

import argparse
import statistics

import pandas as pd

from common import CHAT_PROMPTS, CODE_PROMPTS, write_table
from specproof.costs import acceptance_by_position, expected_committed
from specproof.decoding import DecodeSettings, decode_speculative, decode_target_only
from specproof.drafters import ModelDrafter
from specproof.loader import load_backend
from specproof.micro import time_forward
from specproof.policies import FixedPolicy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ks", type=int, nargs="+", default=[2, 4, 6, 8])
    ap.add_argument("--new-tokens", type=int, default=64)
    a = ap.parse_args()
    target = load_backend({"backend": "hf", "model": "embedded:smollm2-q4_1", "threads": 2})
    draft = load_backend({"backend": "llama", "model": "embedded:smollm2-q4_1", "threads": 2})
    s = DecodeSettings(a.new_tokens, 0.0, 0, stop_at_eos=False)
    workloads = {"code": [target.encode(p) for p in CODE_PROMPTS],
                 "chat": [target.encode(target.chat_prompt(p)) for p in CHAT_PROMPTS]}
    ctx = workloads["code"][0]
    kmax = max(a.ks)
    verify = {b: statistics.median(time_forward(target, ctx, (ctx * 4)[:b], 5)) for b in range(1, kmax + 2)}
    c_draft = statistics.median(time_forward(draft, ctx, ctx[:1], 20, last_only=True))
    rows = []
    for wl, prompts in workloads.items():
        for k in a.ks:
            tok_t = ns_t = tok_s = ns_s = 0
            frames = []
            for ids in prompts:
                base = decode_target_only(target, ids, s)
                run = decode_speculative(target, ModelDrafter(draft), ids, s, FixedPolicy(k))
                assert run.new_ids == base.new_ids
                tok_t, ns_t = tok_t + base.new_tokens, ns_t + base.decode_ns
                tok_s, ns_s = tok_s + run.new_tokens, ns_s + run.decode_ns
                frames.append(run.rounds_frame())
            rounds = pd.concat(frames)
            alpha = acceptance_by_position(rounds, k)
            realized = (tok_s / ns_s) / (tok_t / ns_t)
            ideal = verify[1] * expected_committed(alpha, k) / (k * c_draft + verify[k + 1])
            measured_draft = rounds["draft_ns"].sum() / rounds["k"].sum() / 1e6
            rows.append([wl, k, realized, ideal, realized / ideal, float(rounds["accepted"].mean()),
                         measured_draft, verify[k + 1]])
            print(rows[-1], flush=True)
    write_table("model_draft", "Model drafting: realized speedup vs the cost model's ideal (default pair)",
                ["workload", "K", "realized x", "ideal x", "realized/ideal", "mean accepted",
                 "draft ms/token (in runs)", "v(K+1) ms"], rows,
                [f"{a.new_tokens} new tokens, greedy, ids checked equal to target-only; "
                 f"c_draft = {c_draft:.2f} ms (micro), t_T = v(1) = {verify[1]:.2f} ms.",
                 "Goals: realized >= 0.95 x ideal, and >= 2.0x over target-only at the best K."])


if __name__ == "__main__":
    main()
