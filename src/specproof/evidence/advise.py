"""``specproof advise``: should speculation be enabled on this machine, and at which K?

Measures, for a target and a drafter: the target's verify cost v(B) for B = 1..K_max+1,
the draft step cost c_draft, and acceptance by draft position alpha_i from a short
speculative probe at K_max on the user's prompts (greedy unless a temperature is given;
a position the drafter was asked for but did not propose, as an n-gram lookup without a
long enough match does, counts as rejected).
It then predicts, for every K,

    S(K) = t_T * E[C|K] / E[T|K],   E[C|K] = 1 + sum_j prod_{i<=j} alpha_i,
    E[T|K] = mean over probe rounds of (d_K c_draft + v(d_K + 1)) + x,  d_K = min(K, d)

with d the tokens the drafter proposed in a probe round (K_max for a model drafter, so
E[T|K] = K c_draft + v(K+1) + x; an n-gram lookup proposes fewer, or none, and a round
that proposes none costs one target step), t_T = v(1) + x_T the target-only cost per
token (x_T its per-step residual, x the per-round residual, both measured in the probe).
It recommends K* = argmax S(K); speculation is enabled only if S(K*) > 1.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..decode.backend import Backend
from ..decode.costmodel import acceptance_by_position, expected_committed, expected_round_ms
from ..decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from ..decode.drafters import Drafter, ModelDrafter
from ..decode.policies import FixedPolicy
from ..models.loader import ModelPool
from ..records import write_parquet
from ..study.config import Study
from ..study.workloads import prompt_ids, split_discovery
from .micro import time_forward


def advise(target: Backend, drafter: Drafter, prompts: list[list[int]], k_max: int = 8,
           temperature: float = 0.0, probe_tokens: int = 48, repeats: int = 5, seed: int = 0) -> dict:
    t0 = time.perf_counter()
    ctx = prompts[0]
    block = (ctx * (k_max + 2))[: k_max + 1]
    verify = {b: statistics.median(time_forward(target, ctx, block[:b], repeats)) for b in range(1, k_max + 2)}
    if isinstance(drafter, ModelDrafter):
        draft_ms = statistics.median(time_forward(drafter.backend, ctx, block[:1], repeats * 2, last_only=True))
    else:
        draft_ms = None  # measured from the probe's rounds below (model-free drafters)
    settings = DecodeSettings(probe_tokens, temperature, seed)
    frames, target_x, spec_x = [], [], []
    for ids in prompts:
        base = decode_target_only(target, ids, settings).rounds_frame()
        target_x.append(float(base["residual_ns"].mean()) / 1e6)
        run = decode_speculative(target, drafter, ids, settings, FixedPolicy(k_max)).rounds_frame()
        # what the decoder asked for: K_max, or fewer where the token budget ran out
        run["requested"] = np.minimum(k_max, probe_tokens - (run["committed"].cumsum() - run["committed"]) - 1)
        frames.append(run)
        spec_x.append(float((run["residual_ns"] + run["replay_ns"]).mean()) / 1e6)
    import pandas as pd
    rounds = pd.concat(frames, ignore_index=True)
    alpha = acceptance_by_position(rounds, k_max, requested=rounds["requested"])
    if draft_ms is None:
        drafted = rounds["k"].sum()
        draft_ms = float(rounds["draft_ns"].sum() / max(drafted, 1) / 1e6)
    x_t, x_s = float(np.mean(target_x)), float(np.mean(spec_x))
    t_target = verify[1] + x_t
    # proposal lengths when K_max was asked for: at K the drafter proposes min(K, length)
    full = rounds[rounds["requested"] == k_max]
    lengths = (full if len(full) else rounds)["k"].to_numpy()
    table = []
    for k in range(1, k_max + 1):
        e_c = expected_committed(alpha, k)
        round_ms = expected_round_ms(k, lengths, draft_ms, verify, x_s)
        table.append({"k": k, "expected_committed": e_c, "round_ms": round_ms,
                      "predicted_speedup": t_target * e_c / round_ms})
    best = max(table, key=lambda r: r["predicted_speedup"])
    return {"k": best["k"], "predicted_speedup": best["predicted_speedup"],
            "enable": best["predicted_speedup"] > 1.0, "table": table,
            "verify_ms": verify, "draft_step_ms": draft_ms, "target_ms_per_token": t_target,
            "alpha": [None if not np.isfinite(a) else float(a) for a in alpha],
            "draft_to_target_ratio": draft_ms / verify[1], "seconds": time.perf_counter() - t0}


def realized_speedup(target: Backend, drafter: Drafter, prompts: list[list[int]], k: int,
                     temperature: float = 0.0, max_new_tokens: int = 64, seed: int = 0) -> float:
    """Measured tokens/s ratio at fixed K (target-only and speculative alternate per
    prompt); ratio of total tokens over total decode time."""
    s = DecodeSettings(max_new_tokens, temperature, seed)
    tok_t = ns_t = tok_s = ns_s = 0
    for ids in prompts:
        a = decode_target_only(target, ids, s)
        b = decode_speculative(target, drafter, ids, s, FixedPolicy(k))
        tok_t, ns_t = tok_t + a.new_tokens, ns_t + a.decode_ns
        tok_s, ns_s = tok_s + b.new_tokens, ns_s + b.decode_ns
    return (tok_s / ns_s) / (tok_t / ns_t)


def advise_study(study: Study, prompt_set: list[dict], out: Path) -> None:
    """Per pair: the advised K and predicted speedup (probe on the discovery prompts),
    and the realized speedup at that K on the reserved prompts (greedy)."""
    import pandas as pd
    discovery, reserved = split_discovery(prompt_set, 0.5)
    pool, rows = ModelPool(study), []
    for _, pair, target in tqdm(pool.each_pair(study.pairs), total=len(study.pairs), desc="advise",
                                unit="pair"):
        drafter = pool.drafter(pair["draft"], target, 0.0, study.settings["seed"])
        probe = [prompt_ids(target, r) for r in discovery[:2]]
        res = advise(target, drafter, probe, k_max=8, probe_tokens=study.settings["max_new_tokens"])
        real = realized_speedup(target, drafter, [prompt_ids(target, r) for r in reserved], res["k"],
                                max_new_tokens=study.settings["max_new_tokens"])
        rows.append({"pair": pair["name"], "target": pair["target"], "draft": pair["draft"],
                     "k": res["k"], "predicted_speedup": res["predicted_speedup"],
                     "realized_speedup": real, "enable": res["enable"],
                     "draft_to_target_ratio": res["draft_to_target_ratio"],
                     "advise_seconds": res["seconds"]})
    write_parquet(pd.DataFrame(rows), out)
