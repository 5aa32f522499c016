"""The losslessness certificate on the real models (level 3) and a dependence-respecting
two-sample check.

Level 3: PIT of sampled speculative tokens scored on the target-only path (see
``evidence.pit``), tested for uniformity (Kolmogorov-Smirnov and binned chi-square) in
id, rank and q/p-ratio order, pooled, per pair and per workload. The decision is the
whole family (``evidence.pit.rule_decision``: each test at alpha/m, m = 6 when the ratio
order is recorded); a record set written before the ratio order existed lacks
``u_ratio``, and its certificate reports the ratio order as not recorded and decides on
the four tests it has (alpha/4). The detectable TV and the rule's size and power come
from the calibration on the mock (``evidence.calibration``).

Why the PIT and not a chi-square over pooled token counts: tokens in a sequence are
dependent and seed-paired runs share randomness, so pooled counts have no valid null;
the sequential PIT values are i.i.d. U(0,1) under the null whatever the dependence.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ..evidence.pit import order_pvalues, rule_decision, uniformity


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


def whole_rule(g: pd.DataFrame, alpha: float) -> dict:
    """One group of PIT rows under the whole rule: id-order uniformity at the top level
    (n_tokens, ks/chi2 p-values), rank and ratio order alongside (ratio None when not
    recorded), and the rule's decision (tests, level, min_pvalue, rejected)."""
    ratio = g["u_ratio"].to_numpy() if "u_ratio" in g else None
    pv = order_pvalues(g["u"].to_numpy(), g["u_rank"].to_numpy(), ratio)
    return {**uniformity(g["u"].to_numpy()), "rank_order": uniformity(g["u_rank"].to_numpy()),
            "ratio_order": uniformity(ratio) if ratio is not None else None,
            "pvalues": pv, **rule_decision(pv, alpha)}


def certificate(pit: pd.DataFrame, calibration: dict, seed: int, alpha: float = 0.05) -> dict:
    """Pooled and per-pair whole-rule certificates of the speculative tokens' PIT,
    per-workload uniformity (id and rank order), the target-only control, the
    calibration's detectable TV and the per-prompt permutation test."""
    spec = pit[pit["path"] == "speculative"]
    ctrl = pit[pit["path"] == "target"]
    pooled = whole_rule(spec, alpha)
    out = {"alpha": alpha, **pooled, "ratio_recorded": "u_ratio" in pit,
           "per_workload_rank": {w: uniformity(g["u_rank"].to_numpy()) for w, g in spec.groupby("workload")},
           "per_workload": {w: uniformity(g["u"].to_numpy()) for w, g in spec.groupby("workload")},
           "per_pair": {p: whole_rule(g, alpha) for p, g in spec.groupby("pair")},
           "control_target_only": uniformity(ctrl["u"].to_numpy()),
           "detectable_tv_80": calibration["detectable_tv_80"],
           "detectable_tv_80_id_order": calibration["detectable_tv_80_id_order"],
           "power_family": calibration["power_family"],
           "two_sample_permutation": paired_permutation(pit, seed)}
    return out
