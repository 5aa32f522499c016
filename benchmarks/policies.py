"""Benchmark 4: policies. Adaptive vs the best fixed K chosen in hindsight per workload
(default pair), and guard on a decelerating pair (llama.cpp F16 target with n_ubatch=1,
whose batched verification is serial, + Q4_1 draft) vs target-only.

    python benchmarks/policies.py [--new-tokens 64] [--repeats 2]
"""
from __future__ import annotations

import argparse

from common import CHAT_PROMPTS, CODE_PROMPTS, write_table
from specproof.decoding import DecodeSettings, decode_speculative, decode_target_only
from specproof.drafters import ModelDrafter
from specproof.loader import load_backend
from specproof.policies import make_policy


def speed(target, draft, prompts, s, policy_fn, repeats):
    """Total tokens / total decode time, target-only and speculative alternating."""
    tok_t = ns_t = tok_s = ns_s = 0
    for ids in prompts * repeats:
        b = decode_target_only(target, ids, s)
        r = decode_speculative(target, ModelDrafter(draft), ids, s, policy_fn())
        assert r.new_ids == b.new_ids
        tok_t, ns_t = tok_t + b.new_tokens, ns_t + b.decode_ns
        tok_s, ns_s = tok_s + r.new_tokens, ns_s + r.decode_ns
    return (tok_s / ns_s) / (tok_t / ns_t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    s = DecodeSettings(a.new_tokens, 0.0, 0, stop_at_eos=False)
    draft = load_backend({"backend": "llama", "model": "embedded:smollm2-q4_1", "threads": 2})
    rows = []
    target = load_backend({"backend": "hf", "model": "embedded:smollm2-q4_1", "threads": 2})
    for wl, texts in (("code", CODE_PROMPTS), ("chat", [target.chat_prompt(p) for p in CHAT_PROMPTS])):
        prompts = [target.encode(t) for t in texts]
        fixed = {k: speed(target, draft, prompts, s, lambda k=k: make_policy("fixed", k), a.repeats) for k in (2, 4, 6, 8)}
        best_k = max(fixed, key=fixed.get)
        adaptive = speed(target, draft, prompts, s, lambda: make_policy("adaptive", 8), a.repeats)
        rows.append(["hf fp32 + Q4_1", wl, "adaptive (K<=8)", adaptive, f"best fixed K={best_k}: {fixed[best_k]:.2f}x",
                     adaptive / fixed[best_k]])
        print(rows[-1], flush=True)
    target.close()
    slow = load_backend({"backend": "llama", "model": "embedded:smollm2-f16", "n_ubatch": 1, "threads": 2})
    for wl, texts in (("code", CODE_PROMPTS), ("chat", [slow.chat_prompt(p) for p in CHAT_PROMPTS])):
        prompts = [slow.encode(t) for t in texts]
        fixed4 = speed(slow, draft, prompts, s, lambda: make_policy("fixed", 4), a.repeats)
        guard = speed(slow, draft, prompts, s, lambda: make_policy("guard", 8), a.repeats)
        rows.append(["llama F16 n_ubatch=1 + Q4_1", wl, "guard (K<=8)", guard,
                     f"target-only: 1.00x (fixed K=4: {fixed4:.2f}x)", guard])
        print(rows[-1], flush=True)
    write_table("policies", "Policies: adaptive vs best fixed K; guard on a decelerating pair",
                ["pair", "workload", "policy", "speedup x", "reference", "ratio"], rows,
                [f"{a.new_tokens} new tokens, greedy, 2 prompts per workload x {a.repeats} repetitions, ids "
                 "checked equal to target-only.",
                 "Goals: adaptive >= 0.95 x best fixed K (ratio column); guard >= 0.97 x target-only."])


if __name__ == "__main__":
    main()
