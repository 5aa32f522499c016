"""Benchmark 4: policies. Adaptive vs the best fixed K chosen in hindsight per workload
(default pair), and guard on a decelerating pair (llama.cpp F16 target with n_ubatch=1,
whose batched verification is serial, + Q4_1 draft) vs target-only.

Speedups are total tokens / total decode time over alternating target-only and
speculative runs. The guard's cost is also read from its own runs, free of the drift
between runs: opening cost = sum over its speculative rounds of (round time - tokens
committed x the median target-only step of the same run), as a share of the decode time.

    python benchmarks/policies.py [--new-tokens 64] [--repeats 2] [--guard-repeats 5]
"""
from __future__ import annotations

import argparse
import statistics

from common import CHAT_PROMPTS, CODE_PROMPTS, write_table
from specproof.decoding import DecodeSettings, decode_speculative, decode_target_only
from specproof.drafters import ModelDrafter
from specproof.loader import load_backend
from specproof.policies import make_policy


def speed(target, draft, prompts, s, policy_fn, repeats):
    """(speedup, speculative runs): target-only and speculative runs alternate, their
    order flipping every repetition, ids checked equal."""
    tok_t = ns_t = tok_s = ns_s = 0
    runs = []
    for rep in range(repeats):
        for ids in prompts:
            def spec():
                return decode_speculative(target, ModelDrafter(draft), ids, s, policy_fn())
            if rep % 2:
                r = spec()
                b = decode_target_only(target, ids, s)
            else:
                b = decode_target_only(target, ids, s)
                r = spec()
            assert r.new_ids == b.new_ids
            tok_t, ns_t = tok_t + b.new_tokens, ns_t + b.decode_ns
            tok_s, ns_s = tok_s + r.new_tokens, ns_s + r.decode_ns
            runs.append(r)
    return (tok_s / ns_s) / (tok_t / ns_t), runs


def opening_cost(runs) -> tuple[float, float]:
    """(share of decode time the speculative rounds cost beyond the target-only steps
    that would have committed the same tokens, mean speculative rounds per run)."""
    extra = total = rounds = 0
    for r in runs:
        steps = [row["round_ns"] for row in r.rounds if row["k"] == 0]
        step = statistics.median(steps) if steps else 0
        spec = [row for row in r.rounds if row["k"] > 0]
        extra += sum(row["round_ns"] - row["committed"] * step for row in spec)
        total += r.decode_ns
        rounds += len(spec)
    return extra / total, rounds / len(runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--guard-repeats", type=int, default=5)
    a = ap.parse_args()
    s = DecodeSettings(a.new_tokens, 0.0, 0, stop_at_eos=False)
    draft = load_backend({"backend": "llama", "model": "embedded:smollm2-q4_1", "threads": 2})
    rows, values = [], {}
    target = load_backend({"backend": "hf", "model": "embedded:smollm2-q4_1", "threads": 2})
    for wl, texts in (("code", CODE_PROMPTS), ("chat", [target.chat_prompt(p) for p in CHAT_PROMPTS])):
        prompts = [target.encode(t) for t in texts]
        fixed = {k: speed(target, draft, prompts, s, lambda k=k: make_policy("fixed", k), a.repeats)[0]
                 for k in (2, 4, 6, 8)}
        best_k = max(fixed, key=fixed.get)
        adaptive, _ = speed(target, draft, prompts, s, lambda: make_policy("adaptive", 8), a.repeats)
        rows.append(["hf fp32 + Q4_1", wl, "adaptive (K<=8)", adaptive, f"best fixed K={best_k}: {fixed[best_k]:.2f}x",
                     adaptive / fixed[best_k], "", ""])
        values |= {f"adaptive.{wl}.speedup": (adaptive, "x"), f"adaptive.{wl}.best_fixed_k": (best_k, "K"),
                   f"adaptive.{wl}.best_fixed_speedup": (fixed[best_k], "x"),
                   f"adaptive.{wl}.ratio": (adaptive / fixed[best_k], "x")}
        print(rows[-1], flush=True)
    target.close()
    slow = load_backend({"backend": "llama", "model": "embedded:smollm2-f16", "n_ubatch": 1, "threads": 2})
    for wl, texts in (("code", CODE_PROMPTS), ("chat", [slow.chat_prompt(p) for p in CHAT_PROMPTS])):
        prompts = [slow.encode(t) for t in texts]
        fixed4, _ = speed(slow, draft, prompts, s, lambda: make_policy("fixed", 4), a.repeats)
        guard, runs = speed(slow, draft, prompts, s, lambda: make_policy("guard", 8), a.guard_repeats)
        cost, probes = opening_cost(runs)
        rows.append(["llama F16 n_ubatch=1 + Q4_1", wl, "guard (K<=8)", guard,
                     f"target-only: 1.00x (fixed K=4: {fixed4:.2f}x)", guard, cost, probes])
        values |= {f"guard.{wl}.ratio": (guard, "x"), f"guard.{wl}.opening_cost": (cost, "share"),
                   f"guard.{wl}.probes_per_run": (probes, "rounds"), f"guard.{wl}.fixed4": (fixed4, "x")}
        print(rows[-1], flush=True)
    values |= {"new_tokens": (a.new_tokens, "tokens"), "guard_repeats": (a.guard_repeats, "runs")}
    write_table("policies", "Policies: adaptive vs best fixed K; guard on a decelerating pair",
                ["pair", "workload", "policy", "speedup x", "reference", "ratio", "opening cost (same runs)",
                 "K>0 rounds per run"], rows,
                [f"{a.new_tokens} new tokens, greedy, 2 prompts per workload, ids checked equal to target-only; "
                 f"{a.repeats} repetitions (adaptive, fixed K), {a.guard_repeats} for the guard; target-only and "
                 "speculative runs alternate, their order flipping every repetition.",
                 "Opening cost: the guard's speculative rounds beyond the target-only steps that would have "
                 "committed the same tokens (the median target-only step of the same run), as a share of "
                 "the decode time; unlike the ratio it is free of the machine's drift between runs.",
                 "Goals: adaptive >= 0.95 x best fixed K (ratio column); guard >= 0.97 x target-only."],
                values)


if __name__ == "__main__":
    main()
