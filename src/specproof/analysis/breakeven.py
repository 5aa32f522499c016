"""Where speculation pays: the micro-benchmark cost model as a map of two machine ratios.

With the target step t_T = v(1), a draft step c and a verify call v(B) scoring B
positions, the cost model of ``costs.model_speedup`` is, in target steps,

    S_model(K) = E[C|K] / (v(K+1)/v(1) + K r)      r = c / v(1)   (draft ratio)
               = E[C|K] / (1 + K (s_K + r))          s_K = (v(K+1)/v(1) - 1) / K

s_K, the verify slope, is what each drafted position adds to a verify call (in target
steps); r is what drafting it costs. Both are properties of the machine and the stored
models; the acceptance by position alpha_i (through E[C|K], ``decode.costmodel``) is a
property of the two networks' functions. So at fixed alpha the model pays (S > 1) exactly
when the marginal cost per drafted position is below the break-even cost

    s_K + r < b_K = (E[C|K] - 1) / K = (1/K) sum_{j<=K} prod_{i<=j} alpha_i,

the mean accepted prefix per drafted position. The map draws, over the (s, r) plane, the
best predicted speedup max_K E[C|K] / (1 + K (s + r)) at one pair's alpha (a verify slope
held constant in K), and places each measured greedy fixed-K configuration at its own
(s_K, r) with its realized speedup (geometric mean over prompts and interval).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..decode.costmodel import expected_committed


def break_even_cost(alpha: np.ndarray, k: int) -> float:
    """b_K = (E[C|K] - 1) / K: the marginal cost per drafted position (verify slope plus
    draft ratio, in target steps) at which the model's speedup at K is exactly 1."""
    return (expected_committed(np.asarray(alpha, dtype=float), k) - 1.0) / k


def best_predicted(alpha: np.ndarray, marginal_cost: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """(S, K): the best model speedup max_K E[C|K] / (1 + K m) over K = 1..len(alpha) at
    the marginal cost m = s + r per drafted position (target steps), and the K that
    reaches it; elementwise over ``marginal_cost``."""
    m = np.asarray(marginal_cost, dtype=float)
    ks = np.arange(1, len(alpha) + 1)
    committed = np.array([expected_committed(np.asarray(alpha, dtype=float), int(k)) for k in ks])
    s = committed[:, None] / (1.0 + ks[:, None] * m.reshape(1, -1))
    best = s.argmax(axis=0)
    return s.max(axis=0).reshape(m.shape), ks[best].reshape(m.shape)


def map_points(config_costs: pd.DataFrame, micro: pd.DataFrame, speedups: list[dict]) -> pd.DataFrame:
    """Per greedy fixed-K configuration: its target, draft and K; the verify slope s_K from
    the target's micro-benchmark medians; the draft ratio r = c / v(1), with c the draft's
    isolated step where the micro-benchmark timed one and otherwise (a model-free drafter:
    n-gram lookup) its drafting time per drafted position in the timed runs, as
    ``costs.config_costs`` takes it (``draft_timed``: 'isolated' or 'in-run'); b_K from its
    own pooled acceptance; the model speedup S_model; and its realized speedup over prompts
    (all workloads: geometric mean, ci_low, ci_high)."""
    cc = config_costs[(config_costs["policy"] == "fixed") & (config_costs["temperature"] == 0)]
    drafts = set(micro.loc[micro["role"] == "draft", "name"])
    realized = {(r["pair"], r["config"]): r for r in speedups if r["workload"] == "all"}
    rows = []
    for r in cc.itertuples():
        v = micro[(micro["role"] == "target") & (micro["name"] == r.target)].set_index("B")["median_ms"]
        k = int(r.k)
        if k + 1 not in v.index or (r.pair, r.config) not in realized:
            continue
        s = realized[(r.pair, r.config)]
        rows.append({"pair": r.pair, "config": r.config, "target": r.target, "draft": r.draft, "k": k,
                     "draft_timed": "isolated" if r.draft in drafts else "in-run",
                     "verify_slope": float((v[k + 1] / v[1] - 1.0) / k),
                     "draft_ratio": float(r.draft_ms / v[1]),
                     "break_even_cost": break_even_cost(np.asarray(r.alpha), k),
                     "S_model": float(r.S_model), "gmean": float(s["gmean_speedup"]),
                     "ci_low": float(s["ci_low"]), "ci_high": float(s["ci_high"])})
    out = pd.DataFrame(rows, columns=["pair", "config", "target", "draft", "k", "draft_timed", "verify_slope", "draft_ratio",
                                      "break_even_cost", "S_model", "gmean", "ci_low", "ci_high"])
    out["marginal_cost"] = out["verify_slope"] + out["draft_ratio"]
    out["realized_over_model"] = out["gmean"] / out["S_model"]
    return out


def map_alpha(config_costs: pd.DataFrame, points: pd.DataFrame) -> tuple[str, str, np.ndarray]:
    """(pair, config, alpha): the acceptance by position the map's contours are drawn at,
    that of the mapped configuration with the largest K (the longest alpha; the first such
    in record order), among those with a model draft timed in isolation where there are
    any (an n-gram lookup proposes fewer than K tokens when it finds no match)."""
    if points.empty:
        raise ValueError("no greedy fixed-K configuration to map")
    isolated = points[points["draft_timed"] == "isolated"]
    pool = isolated if len(isolated) else points
    top = pool.loc[pool["k"].idxmax()]
    row = config_costs[(config_costs["pair"] == top["pair"]) & (config_costs["config"] == top["config"])].iloc[0]
    return str(top["pair"]), str(top["config"]), np.asarray(row["alpha"], dtype=float)
