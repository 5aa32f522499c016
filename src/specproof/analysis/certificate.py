"""The losslessness certificate on the real models (level 3) and a dependence-respecting
two-sample check.

Level 3: PIT of sampled speculative tokens scored on the target-only path (see
``evidence.pit``), tested for uniformity (Kolmogorov-Smirnov and binned chi-square),
pooled and per workload; the detectable TV comes from the calibration on the mock
(``evidence.calibration``).

Why the PIT and not a chi-square over pooled token counts: tokens in a sequence are
dependent and seed-paired runs share randomness, so pooled counts have no valid null;
the sequential PIT values are i.i.d. U(0,1) under the null whatever the dependence.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ..evidence.pit import uniformity


def paired_permutation(pit: pd.DataFrame, seed: int) -> dict:
    """Sign-flip permutation test on per-prompt summaries (mean log p_t(x_t) of the
    speculative run minus that of the target-only runs on the same prompt and target),
    not on pooled tokens."""
    df = pit.assign(logp=np.log(np.clip(pit["p_token"], 1e-300, None)))
    per = df.groupby(["target", "prompt_id", "path"])["logp"].mean().unstack("path")
    per = per.dropna()
    if per.empty or "speculative" not in per or "target" not in per:
        return {"prompts": 0, "pvalue": float("nan")}
    d = (per["speculative"] - per["target"]).to_numpy()
    res = stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=9999,
                                 random_state=seed, alternative="two-sided")
    return {"prompts": int(d.size), "mean_difference_logp": float(d.mean()), "pvalue": float(res.pvalue)}


def certificate(pit: pd.DataFrame, calibration: dict, seed: int, alpha: float = 0.05) -> dict:
    """Pooled, per-workload and per-pair uniformity of the speculative tokens' PIT (id
    order as the headline, rank order alongside), the target-only control, the
    calibration's detectable TV and the per-prompt permutation test."""
    spec = pit[pit["path"] == "speculative"]
    ctrl = pit[pit["path"] == "target"]
    pooled = uniformity(spec["u"].to_numpy())
    rank = uniformity(spec["u_rank"].to_numpy())
    out = {"alpha": alpha, **pooled, "rank_order": rank,
           "rejected": bool(min(pooled["ks_pvalue"], pooled["chi2_pvalue"], rank["ks_pvalue"],
                                rank["chi2_pvalue"]) < alpha / 4),
           "per_workload_rank": {w: uniformity(g["u_rank"].to_numpy()) for w, g in spec.groupby("workload")},
           "per_workload": {w: uniformity(g["u"].to_numpy()) for w, g in spec.groupby("workload")},
           "per_pair": {p: uniformity(g["u"].to_numpy()) for p, g in spec.groupby("pair")},
           "control_target_only": uniformity(ctrl["u"].to_numpy()),
           "detectable_tv_80": calibration["detectable_tv_80"],
           "detectable_tv_80_id_order": calibration["detectable_tv_80_id_order"],
           "power_family": calibration["power_family"],
           "two_sample_permutation": paired_permutation(pit, seed)}
    return out
