"""In-loop vs isolated costs: which part of the loop the micro-benchmark model gets wrong.

The micro-benchmark model (``costs.model_speedup``) predicts a fixed-K configuration's
speedup from parts timed alone: the target step t_T = v_iso(1), the draft step c_iso and
the verify call v_iso(K+1), with no residual,

    S_model = v_iso(1) E[C|K] / (K c_iso + v_iso(K+1)).

Inside a run the same parts are timed again (rounds.parquet), interleaved as the loop runs
them. Per greedy fixed-K configuration this module sets each in-loop cost beside its
isolated measurement:

    target   t_loop: the target-only cost per token of the bracketing runs (1 / their
             tokens/s: the call and its sampling), against v_iso(1);
    draft    the draft time per drafted token (draft_ns / k, pooled), against c_iso;
    verify   the verify time per round against v_iso(B) at each round's own B (pooled);
    residual the rest of a round (residual_ns + replay_ns), which the model omits.

The log of realized / model, log(S_measured / S_model), is then split exactly into one
factor per term: S is written t E[C] / (d + v + x), each of t, d, v, x takes its isolated
value (v_iso(1), K c_iso, v_iso(K+1), 0) or its in-loop mean per round, and a term's
factor is its Shapley share of the change from all-isolated to all-in-loop (the mean over
the 4! orders of substituting the terms of its marginal log-change, exponentiated). What
is left, ``gap_committed`` = S_measured / S_all_loop, is the committed tokens per round
against the E[C|K] of the pooled acceptance by drafted position (stop rules; for an n-gram
drafter, proposals shorter than K, which the model prices as K). The product of the five
factors is ``realized_over_model``; ``explains`` names the factor furthest from 1.

Per pair, the draft time per round is fitted as a + b k over the rounds of its greedy
fixed-K configurations: ``draft_round_overhead_ms`` (a) is what the first draft call
after a verify costs beyond a draft step, ``draft_token_ms`` (b) the in-loop cost per
drafted token, to set beside c_iso.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from ..decode.costmodel import acceptance_by_position, expected_committed, fit_draft_round
from .costs import baselines

TERMS = ("target", "draft", "verify", "residual")
FACTORS = (*TERMS, "committed")


def shapley_log_factors(iso: dict[str, float], loop: dict[str, float], e_c: float) -> dict[str, float]:
    """Per term, exp of its Shapley share of log S(all in loop) - log S(all isolated), with
    S(sub) = t E[C] / (d + v + x) and each term's value taken from ``loop`` if it is in
    ``sub``, else from ``iso``. The factors multiply to S(all loop) / S(all isolated)."""

    def log_s(sub: frozenset) -> float:
        val = {n: (loop if n in sub else iso)[n] for n in TERMS}
        return math.log(val["target"] * e_c / (val["draft"] + val["verify"] + val["residual"]))

    share = dict.fromkeys(TERMS, 0.0)
    orders = list(itertools.permutations(TERMS))
    for order in orders:
        done: frozenset = frozenset()
        for name in order:
            share[name] += log_s(done | {name}) - log_s(done)
            done = done | {name}
    return {n: math.exp(share[n] / len(orders)) for n in TERMS}


def loop_costs(runs: pd.DataFrame, rounds: pd.DataFrame, micro: pd.DataFrame) -> pd.DataFrame:
    """One row per (pair, config) of greedy fixed-K speculative runs: in-loop and isolated
    costs (ms), their ratios, the model and realized speedups and the gap factors (see
    the module docstring)."""
    cols = ["run_id", "pair", "target", "draft", "config", "k", "policy", "temperature", "path"]
    base = baselines(runs)
    rr = rounds.merge(runs[cols].rename(columns={"k": "K"}), on="run_id")
    spec_runs = runs[(runs["path"] == "speculative") & (runs["policy"] == "fixed") & (runs["temperature"] == 0)]
    spec_runs = spec_runs.merge(base, on=["pair", "prompt_id", "rep", "temperature"], how="left")
    fits = {}
    rows = []
    for (pair, config), g in spec_runs.groupby(["pair", "config"], sort=False):
        tgt, drf, k = g["target"].iloc[0], g["draft"].iloc[0], int(g["k"].iloc[0])
        vm = micro[(micro["role"] == "target") & (micro["name"] == tgt)]
        v_iso = dict(zip(vm["B"].astype(int), vm["median_ms"].astype(float)))
        if k + 1 not in v_iso or 1 not in v_iso:
            continue
        r = rr[rr["run_id"].isin(g["run_id"])]
        if pair not in fits:
            fixed = rr[(rr["pair"] == pair) & (rr["path"] == "speculative") & (rr["policy"] == "fixed")
                       & (rr["temperature"] == 0) & (rr["k"] > 0)]
            fits[pair] = fit_draft_round(fixed["k"].to_numpy(), fixed["draft_ns"].to_numpy() / 1e6)
        dm = micro[(micro["role"] == "draft") & (micro["name"] == drf)]
        drafted = int(r["k"].sum())
        d_loop_step = float(r["draft_ns"].sum()) / max(drafted, 1) / 1e6
        # a model-free drafter has no isolated step: the model uses the in-loop one (as config_costs)
        d_iso_step = float(dm["median_ms"].iloc[0]) if len(dm) else d_loop_step
        n = len(r)
        v_at_b = r["verify_positions"].map(v_iso)
        decode_ms = g["decode_ns"].to_numpy() / 1e6
        t_run = 1e3 / g["baseline_tokens_per_s"].to_numpy()
        t_loop = float(decode_ms.sum() / (decode_ms / t_run).sum())
        target_rounds = rr[(rr["pair"] == pair) & (rr["path"] == "target")]
        alpha = acceptance_by_position(r, k)
        e_c = expected_committed(alpha, k)
        iso = {"target": v_iso[1], "draft": k * d_iso_step, "verify": v_iso[k + 1], "residual": 0.0}
        loop = {"target": t_loop, "draft": float(r["draft_ns"].sum()) / n / 1e6,
                "verify": float(r["verify_ns"].sum()) / n / 1e6,
                "residual": float((r["residual_ns"] + r["replay_ns"]).sum()) / n / 1e6}
        s_model = iso["target"] * e_c / (iso["draft"] + iso["verify"])
        s_loop = loop["target"] * e_c / (loop["draft"] + loop["verify"] + loop["residual"])
        s_measured = float(r["committed"].sum()) / float((decode_ms / t_run).sum())
        factors = shapley_log_factors(iso, loop, e_c)
        row = {"pair": pair, "config": config, "target": tgt, "draft": drf, "k": k, "runs": len(g), "rounds": n,
               "target_loop_ms": t_loop, "target_iso_ms": v_iso[1], "target_ratio": t_loop / v_iso[1],
               "target_verify_ratio": float(target_rounds["verify_ns"].mean() / 1e6 / v_iso[1])
               if len(target_rounds) else float("nan"),
               "draft_loop_ms": d_loop_step, "draft_iso_ms": float(dm["median_ms"].iloc[0]) if len(dm) else float("nan"),
               "verify_loop_ms": loop["verify"], "verify_iso_ms": float(v_at_b.mean()),
               "verify_ratio": float(r["verify_ns"].sum() / 1e6 / v_at_b.sum()),
               "residual_ms": loop["residual"], "expected_committed": e_c,
               "committed_per_round": float(r["committed"].mean()),
               "S_model": s_model, "S_all_loop": s_loop, "S_measured": s_measured,
               "realized_over_model": s_measured / s_model,
               **{f"gap_{t}": factors[t] for t in TERMS}, "gap_committed": s_measured / s_loop}
        row["draft_ratio"] = row["draft_loop_ms"] / row["draft_iso_ms"]
        row["explains"] = max(FACTORS, key=lambda t: abs(math.log(row[f"gap_{t}"])))
        row["draft_round_overhead_ms"], row["draft_token_ms"] = fits[pair]
        rows.append(row)
    return pd.DataFrame(rows)


def pair_summary(lc: pd.DataFrame) -> pd.DataFrame:
    """Per pair, pooled over its greedy fixed-K configurations: the in-loop / isolated
    ratios (means of the configurations'), the range of realized / model, the geometric
    mean of each gap factor, and the term that explains most of the gap."""
    rows = []
    for pair, g in lc.groupby("pair", sort=False):
        gm = {t: float(np.exp(np.log(g[f"gap_{t}"]).mean())) for t in FACTORS}
        rows.append({"pair": pair, "configs": len(g),
                     "target_ratio": float(g["target_ratio"].mean()),
                     "draft_ratio": float(g["draft_ratio"].mean()),
                     "verify_ratio": float(g["verify_ratio"].mean()),
                     "residual_ms": float(g["residual_ms"].mean()),
                     "realized_over_model_min": float(g["realized_over_model"].min()),
                     "realized_over_model_max": float(g["realized_over_model"].max()),
                     **{f"gap_{t}": v for t, v in gm.items()},
                     "explains": max(FACTORS, key=lambda t: abs(math.log(gm[t]))),
                     "draft_round_overhead_ms": float(g["draft_round_overhead_ms"].iloc[0]),
                     "draft_token_ms": float(g["draft_token_ms"].iloc[0])})
    return pd.DataFrame(rows)
