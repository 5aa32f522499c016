"""Bootstrap confidence intervals over prompts (scipy.stats.bootstrap, seeded).

Speedup: per prompt, s_j = mean over repetitions of tokens/s(spec) / tokens/s(target-only);
the configuration's speedup is the geometric mean exp(mean_j log s_j), with a 95% BCa
(percentile when BCa is degenerate) bootstrap CI resampling prompts.
Acceptance by position i: per prompt alpha_ij, mean over prompts with a bootstrap CI.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats

from ..decode.costmodel import acceptance_by_position

N_RESAMPLES = 2000


def bootstrap_mean_ci(values: np.ndarray, seed: int, level: float = 0.95) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size < 2 or np.ptp(values) == 0:
        v = float(values.mean()) if values.size else float("nan")
        return v, v
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((values,), np.mean, n_resamples=N_RESAMPLES, confidence_level=level,
                              method="BCa", random_state=np.random.default_rng(seed))
        lo, hi = res.confidence_interval
        if not (np.isfinite(lo) and np.isfinite(hi)):
            res = stats.bootstrap((values,), np.mean, n_resamples=N_RESAMPLES, confidence_level=level,
                                  method="percentile", random_state=np.random.default_rng(seed))
            lo, hi = res.confidence_interval
    return float(lo), float(hi)


def speedup_stats(costs: pd.DataFrame, seed: int) -> list[dict]:
    out = []
    keys = ["pair", "config", "k", "policy", "verify_mode", "temperature"]
    for key, g in costs.groupby(keys, sort=False):
        for workload in ["all", *sorted(g["workload"].unique())]:
            sub = g if workload == "all" else g[g["workload"] == workload]
            per_prompt = sub.groupby("prompt_id")["S_measured"].mean()
            logs = np.log(per_prompt.to_numpy())
            lo, hi = bootstrap_mean_ci(logs, seed)
            out.append({**dict(zip(keys, key)), "workload": workload, "prompts": int(len(logs)),
                        "gmean_speedup": float(np.exp(logs.mean())), "ci_low": float(np.exp(lo)),
                        "ci_high": float(np.exp(hi))})
    return out


def acceptance_stats(costs: pd.DataFrame, rounds: pd.DataFrame, seed: int) -> list[dict]:
    out = []
    for (pair, config), g in costs.groupby(["pair", "config"], sort=False):
        k = int(g["k"].iloc[0])
        per_prompt = []
        for _, gp in g.groupby("prompt_id"):
            per_prompt.append(acceptance_by_position(rounds[rounds["run_id"].isin(gp["run_id"])], k))
        mat = np.array(per_prompt)
        for i in range(k):
            col = mat[:, i]
            lo, hi = bootstrap_mean_ci(col, seed + i)
            out.append({"pair": pair, "config": config, "position": i + 1,
                        "alpha": float(np.nanmean(col)) if np.isfinite(col).any() else float("nan"),
                        "ci_low": lo, "ci_high": hi, "prompts": int(np.isfinite(col).sum())})
    return out
