"""Where ``advise``'s loop model and the study's own runs part, term by term.

``advise`` predicts S(K) = t_T E[C|K] / E[T|K] from a short probe on discovery prompts
(``evidence.advise.predict_loop``; t_T ms per target-only token, E[C|K] tokens committed
per round, E[T|K] ms per round). Its check run realizes one K without round records. The
study's grid has round records, so at every greedy fixed K the grid ran for an advised
pair the same three terms are measured on the reserved prompts:

    t_T   target-only decode time per token of the pair's target-only runs (ms),
    E[C]  mean tokens committed per round of the K's speculative runs,
    E[T]  mean round time of those runs (ms; draft, verify and residual, as the loop ran),

and S_real = t_T E[C] / E[T], the pooled cost-identity speedup. Then, exactly,

    S_real / S_pred = (t_T,real / t_T,pred) * (E[C]_real / E[C]_pred) * (E[T]_pred / E[T]_real),

so each factor is the share of the miss one term carries: the target-only step, acceptance
(which the probe measures on its own prompts), or the cost of a round. A factor below 1
means that term made the realized speedup lower than predicted; ``explains`` names the
factor furthest from 1 (largest |log|).
"""
from __future__ import annotations

import math

import pandas as pd

from ..evidence.advise import predict_loop

FACTORS = {"target_factor": "target step", "acceptance_factor": "acceptance", "round_factor": "round cost"}


def advise_gap(advise_micro: pd.DataFrame, advise_rounds: pd.DataFrame, runs: pd.DataFrame,
               rounds: pd.DataFrame, reserved: list[str], k_max: int = 8) -> pd.DataFrame:
    """One row per (advised pair, greedy fixed-K batched config of the grid with K <= k_max):
    predicted and realized S with their terms, and the three factors (module docstring).
    Empty when the set has no advise probe records."""
    rows = []
    if advise_rounds is None or advise_rounds.empty:
        return pd.DataFrame(rows)
    greedy = runs[(runs["temperature"] == 0) & runs["prompt_id"].isin(reserved)]
    for pair, probe in advise_rounds.groupby("pair", sort=False):
        model = predict_loop(advise_micro[advise_micro["pair"] == pair], probe, k_max, resamples=0)
        pr = greedy[greedy["pair"] == pair]
        target = pr[pr["path"] == "target"]
        if target.empty:
            continue
        t_real = float(target["decode_ns"].sum() / target["new_tokens"].sum() / 1e6)
        spec = pr[(pr["path"] == "speculative") & (pr["policy"] == "fixed") & (pr["verify_mode"] == "batched")]
        for (config, k), runs_k in spec.groupby(["config", "k"], sort=True):
            if not 1 <= int(k) <= k_max:
                continue
            r = rounds[rounds["run_id"].isin(runs_k["run_id"])]
            pred = model["table"][int(k) - 1]
            c_real, round_real = float(r["committed"].mean()), float(r["round_ns"].mean() / 1e6)
            t_pred, c_pred, round_pred = model["target_ms_per_token"], pred["expected_committed"], pred["round_ms"]
            factors = {"target_factor": t_real / t_pred, "acceptance_factor": c_real / c_pred,
                       "round_factor": round_pred / round_real}
            rows.append({"pair": pair, "config": config, "k": int(k), "prompts": runs_k["prompt_id"].nunique(),
                         "probe_prompts": int(probe["prompt"].nunique()),
                         "predicted": pred["predicted_speedup"], "realized": t_real * c_real / round_real,
                         "t_target_pred_ms": t_pred, "t_target_real_ms": t_real,
                         "committed_pred": c_pred, "committed_real": c_real,
                         "round_pred_ms": round_pred, "round_real_ms": round_real, **factors,
                         "explains": FACTORS[max(factors, key=lambda f: abs(math.log(factors[f])))]})
    return pd.DataFrame(rows)
