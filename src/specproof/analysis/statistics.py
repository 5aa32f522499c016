"""Bootstrap confidence intervals over prompts and repetitions (seeded, deterministic).

Speedup of one configuration: with y_jr = log(tokens/s(spec) / tokens/s(target-only)) for
prompt j = 1..n and repetition r = 1..R_j (the target-only speed is the mean of the two
runs bracketing the speculative one in its block), the per-prompt mean
m_j = (1/R_j) sum_r y_jr and theta = (1/n) sum_j m_j; the reported speedup is the
geometric mean exp(theta) (dimensionless, x).

Its 95% interval is a two-stage BCa bootstrap on the log scale (Davison & Hinkley 1997,
sect. 3.8 for the two-stage resampling; Efron 1987 for BCa), mapped back by exp:
  1. draw n prompts with replacement; for each drawn prompt, draw R_j of its repetitions
     with replacement; theta*_b = mean over drawn prompts of their resampled means;
     b = 1..B (B = N_RESAMPLES, from a generator seeded by the study seed);
  2. bias correction z0 = Phi^-1(#{theta*_b < theta} / B); acceleration from the
     leave-one-prompt-out jackknife theta_(j), with d_j = mean(theta_(.)) - theta_(j):
     a = sum d_j^3 / (6 (sum d_j^2)^(3/2));
  3. the interval is [theta*_(alpha1), theta*_(alpha2)] (quantiles of the theta*_b) with
     alpha_i = Phi(z0 + (z0 + z_i) / (1 - a (z0 + z_i))), z_i = Phi^-1((1 -+ level) / 2).
With one repetition per prompt the second stage has nothing to resample and the procedure
is the one-stage BCa of ``scipy.stats.bootstrap`` over prompts, which is then called
directly (same seed, same B), so record sets with one repetition keep their intervals.

A record set recorded since 2026-12-03 uses instead the Student-t interval over prompts
(``t_interval``, the study's ``statistics.interval``, default t):
  theta +- t_{n-1, (1+level)/2} sd(m_j) / sqrt(n), mapped back by exp.
The set's provenance names its interval (``statistics.interval``; ``interval_method``), so
a set frozen earlier keeps its BCa intervals and the audit recomputes each with its own.
The change: at the paper tier's size the 'best K' procedure's BCa interval covered about
92% of simulated studies, the t interval about 94%, on the same skewed data.

``simulated_coverage`` measures how often the interval covers the truth at a given
study size on skewed data; the paper prints that figure next to the intervals.
Acceptance by position i: per prompt alpha_ij, mean over prompts with a bootstrap CI.
"""
from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats

from ..decode.costmodel import acceptance_by_position
from ..errors import SpecproofError

N_RESAMPLES = 2000
INTERVALS = ("bca", "t")  # two_stage_ci, t_interval (a study's statistics.interval, default t)


def bootstrap_mean_ci(values: np.ndarray, seed: int, level: float = 0.95) -> tuple[float, float]:
    """One-stage BCa interval (percentile if BCa is degenerate) for the mean of
    ``values`` (NaNs dropped); a single value or constant values give [v, v]."""
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


def two_stage_ci(groups: list[np.ndarray], seed: int, level: float = 0.95,
                 n_resamples: int = N_RESAMPLES) -> tuple[float, float]:
    """Two-stage BCa interval for theta = mean over groups (prompts) of the mean within
    each group (repetitions); see the module docstring for the formula. NaNs are
    dropped, empty groups ignored; all groups of size one give ``bootstrap_mean_ci``."""
    groups = [g[np.isfinite(g)] for g in (np.asarray(x, dtype=float) for x in groups)]
    groups = [g for g in groups if g.size]
    if all(g.size == 1 for g in groups):
        return bootstrap_mean_ci(np.concatenate(groups) if groups else np.array([]), seed, level)
    n, sizes = len(groups), np.array([g.size for g in groups])
    means = np.array([g.mean() for g in groups])
    theta = float(means.mean())
    if n < 2 or np.ptp(np.concatenate(groups)) == 0:
        return theta, theta
    padded = np.zeros((n, sizes.max()))
    for j, g in enumerate(groups):
        padded[j, :g.size] = g
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, n, size=(n_resamples, n))                 # stage 1: prompts
    size_b = sizes[pick]                                              # (B, n)
    within = np.floor(rng.random((n_resamples, n, sizes.max())) * size_b[..., None]).astype(int)
    used = np.arange(sizes.max()) < size_b[..., None]                 # stage 2: R_j draws
    draws = np.where(used, padded[pick[..., None], within], 0.0)
    boot = (draws.sum(axis=2) / size_b).mean(axis=1)
    z0 = stats.norm.ppf(np.mean(boot < theta))
    jack = (means.sum() - means) / (n - 1)
    d = jack.mean() - jack
    denom = 6 * np.sum(d ** 2) ** 1.5
    a = float(np.sum(d ** 3) / denom) if denom > 0 else 0.0
    z = stats.norm.ppf([(1 - level) / 2, (1 + level) / 2])
    if not np.isfinite(z0):  # every resample on one side: BCa undefined, use percentile
        q = (1 - level) / 2, (1 + level) / 2
    else:
        q = stats.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))
    lo, hi = np.quantile(boot, q)
    return float(lo), float(hi)


def t_interval(groups: list[np.ndarray], level: float = 0.95) -> tuple[float, float]:
    """Student-t interval for theta = mean over groups (prompts) of the mean within each:
    theta +- t_{n-1, (1+level)/2} sd(m_j) / sqrt(n) (``scipy.stats.t.interval`` with
    ``scipy.stats.sem`` of the prompt means m_j). NaNs dropped, empty groups ignored;
    fewer than two prompts or equal means give [theta, theta]."""
    means = np.array([g[np.isfinite(g)].mean() for g in (np.asarray(x, dtype=float) for x in groups)
                      if np.isfinite(g).any()])
    theta = float(means.mean()) if means.size else float("nan")
    if means.size < 2 or np.ptp(means) == 0:
        return theta, theta
    lo, hi = stats.t.interval(level, means.size - 1, loc=theta, scale=stats.sem(means))
    return float(lo), float(hi)


def speedup_interval(groups: list[np.ndarray], seed: int, method: str, level: float = 0.95) -> tuple[float, float]:
    """The interval ``method`` names (``INTERVALS``) on the log scale: 'bca' is
    ``two_stage_ci`` (seeded), 't' is ``t_interval``."""
    if method == "t":
        return t_interval(groups, level)
    if method == "bca":
        return two_stage_ci(groups, seed, level)
    raise ValueError(f"interval method must be one of {INTERVALS} (got {method!r})")


def interval_method(provenance: dict) -> str:
    """The interval a record set's speedups use: its provenance's ``statistics.interval``,
    which must be the one its study config names (``statistics.interval``, default 't',
    as ``Study.interval`` chooses it); 'bca' for a set recorded before provenance named it."""
    recorded = provenance.get("statistics", {}).get("interval")
    if recorded is None:
        return "bca"
    chosen = provenance["study"]["config"].get("statistics", {}).get("interval", "t")
    if recorded != chosen:
        raise SpecproofError(f"provenance.json: field statistics.interval is {recorded!r}; its study.config "
                             f"chooses {chosen!r}")
    return recorded


SPEEDUP_KEYS = ["pair", "config", "k", "policy", "verify_mode", "temperature"]


def _speedup_cells(costs: pd.DataFrame):
    """Per configuration and workload ('all' and each workload): (the configuration's
    SPEEDUP_KEYS values, workload, its rows, log S_measured per prompt, NaNs dropped)."""
    for key, g in costs.groupby(SPEEDUP_KEYS, sort=False):
        for workload in ["all", *sorted(g["workload"].unique())]:
            sub = g if workload == "all" else g[g["workload"] == workload]
            logs = [np.log(gp["S_measured"].to_numpy(dtype=float)) for _, gp in sub.groupby("prompt_id")]
            yield dict(zip(SPEEDUP_KEYS, key)), workload, sub, [x[np.isfinite(x)] for x in logs if np.isfinite(x).any()]


def speedup_stats(costs: pd.DataFrame, seed: int, prompts: list[str] | None = None,
                  method: str = "bca") -> list[dict]:
    """Per configuration and workload ('all' and each workload): the geometric-mean
    speedup over prompts and its interval (``speedup_interval`` with ``method``).
    ``prompts`` restricts the rows to those prompt ids (None: every prompt)."""
    if prompts is not None:
        costs = costs[costs["prompt_id"].isin(prompts)]
    out = []
    for key, workload, sub, groups in _speedup_cells(costs):
        theta = float(np.mean([x.mean() for x in groups])) if groups else float("nan")
        lo, hi = speedup_interval(groups, seed, method)
        out.append({**key, "workload": workload, "prompts": len(groups),
                    "repetitions": int(sub.groupby("prompt_id").size().max()),
                    "gmean_speedup": float(np.exp(theta)), "ci_low": float(np.exp(lo)),
                    "ci_high": float(np.exp(hi))})
    return out


def cross_target_stats(cross: pd.DataFrame, seed: int, method: str = "bca") -> list[dict]:
    """Per speculative configuration and other target of its network
    (``costs.cross_target_costs``): the geometric mean over prompts of its speed over the
    other target's target-only speed and its interval (``speedup_interval``), all prompts."""
    out = []
    for key, g in cross.groupby([*SPEEDUP_KEYS, "other"], sort=False):
        groups = [np.log(gp["S_measured"].to_numpy(dtype=float)) for _, gp in g.groupby("prompt_id")]
        groups = [x[np.isfinite(x)] for x in groups if np.isfinite(x).any()]
        lo, hi = speedup_interval(groups, seed, method)
        out.append({**dict(zip([*SPEEDUP_KEYS, "other"], key)), "prompts": len(groups),
                    "gmean_speedup": float(np.exp(np.mean([x.mean() for x in groups]))),
                    "ci_low": float(np.exp(lo)), "ci_high": float(np.exp(hi))})
    return out


def tied_with_best(costs: pd.DataFrame, level: float = 0.95) -> list[dict]:
    """Per pair, every greedy configuration (fixed K and each policy) against the pair's
    best fixed K (highest geometric-mean speedup over all prompts), paired over the
    prompts both ran: ratio = exp(mean_j d_j), d_j = mean log S_(j,config) - mean log
    S_(j,best) over prompt j's repetitions, with its Student-t interval over prompts
    (``t_interval``). ``tied``: the interval covers 1, so the data do not tell the
    configuration from the best; the best is listed too (ratio 1, tied). A paired
    comparison, not overlapping marginal intervals."""
    greedy = costs[costs["temperature"] == 0]
    out = []
    for pair, g in greedy.groupby("pair", sort=False):
        per = g.assign(logS=np.log(g["S_measured"].astype(float))).groupby(
            ["policy", "k", "config", "prompt_id"])["logS"].mean()
        means = per.groupby(level=["policy", "k", "config"]).mean()
        if "fixed" not in means.index.get_level_values("policy"):
            continue
        best = means.xs("fixed", level="policy", drop_level=False).idxmax()
        base = per.xs(best, level=["policy", "k", "config"])
        for (policy, k, config), _ in means.items():
            diff = (per.xs((policy, k, config), level=["policy", "k", "config"]) - base).dropna()
            lo, hi = t_interval([np.array([d]) for d in diff.to_numpy()], level)
            out.append({"pair": pair, "config": config, "k": int(k), "policy": policy, "best_config": best[2],
                        "ratio": float(np.exp(diff.mean())), "ci_low": float(np.exp(lo)),
                        "ci_high": float(np.exp(hi)), "prompts": int(len(diff)),
                        "tied": bool(config == best[2] or lo <= 0 <= hi)})
    return out


FAMILY_ALPHA = 0.05  # the family-wise error rate of familywise_intervals


def familywise_intervals(costs: pd.DataFrame, method: str) -> list[dict] | None:
    """Per row of ``speedup_stats`` (same order; pair, config, workload): ``fw_ci_low``,
    ``fw_ci_high``, the 't' interval at ``fw_level`` = 1 - FAMILY_ALPHA / m, m the rows
    (Bonferroni: every row's verdict holds together with family-wise error <=
    FAMILY_ALPHA). None for a set whose intervals are 'bca': a bootstrap's tails that
    far out would need far more resamples than it draws."""
    if method != "t":
        return None
    cells = list(_speedup_cells(costs))
    level = 1 - FAMILY_ALPHA / len(cells)
    out = []
    for key, workload, _, groups in cells:
        lo, hi = t_interval(groups, level)
        out.append({"pair": key["pair"], "config": key["config"], "workload": workload,
                    "fw_ci_low": float(np.exp(lo)), "fw_ci_high": float(np.exp(hi)), "fw_level": level})
    return out


def category_speedups(costs: pd.DataFrame, categories: dict[str, str], seed: int,
                      method: str = "bca") -> list[dict]:
    """``speedup_stats`` per category within each workload whose prompts hold several
    categories (a Spec-Bench file is one workload of six), each row with its ``workload``
    and ``category``; ``categories`` maps a prompt id to its category."""
    out = []
    for workload, g in costs.groupby("workload", sort=False):
        cats = g["prompt_id"].map(categories)
        if cats.nunique() < 2:
            continue
        for r in speedup_stats(g.assign(workload=cats), seed, method=method):
            if r["workload"] != "all":
                out.append({**r, "workload": workload, "category": r["workload"]})
    return out


def best_k_reserved(costs: pd.DataFrame, discovery: list[str], reserved: list[str],
                    seed: int, method: str = "bca") -> dict[str, dict]:
    """Per pair: the greedy fixed-K configuration with the highest geometric-mean speedup
    on the ``discovery`` prompts, and its speedup and interval on the ``reserved`` prompts
    only. Choosing and reporting on disjoint prompts keeps the headline from being the
    maximum of noisy estimates (a winner's-curse bias)."""
    fixed = costs[(costs["policy"] == "fixed") & (costs["temperature"] == 0)]
    chosen = speedup_stats(fixed, seed, prompts=discovery, method=method)
    held = {(r["pair"], r["config"]): r for r in speedup_stats(fixed, seed, prompts=reserved, method=method)
            if r["workload"] == "all"}
    out: dict[str, dict] = {}
    for r in chosen:
        if r["workload"] != "all" or (r["pair"], r["config"]) not in held:
            continue
        if r["pair"] not in out or r["gmean_speedup"] > out[r["pair"]]["discovery_gmean"]:
            h = held[(r["pair"], r["config"])]
            out[r["pair"]] = {"k": r["k"], "config": r["config"], "discovery_gmean": r["gmean_speedup"],
                              "discovery_prompts": r["prompts"], "prompts": h["prompts"],
                              "gmean_speedup": h["gmean_speedup"], "ci_low": h["ci_low"],
                              "ci_high": h["ci_high"]}
    return out


def skewed_log_speedups(rng: np.random.Generator, prompts: int, repetitions: int,
                        theta: float = 0.4, prompt_sd: float = 0.25,
                        repetition_sd: float = 0.12) -> np.ndarray:
    """Simulated log speedups, shape (prompts, repetitions), with population mean ``theta``:
    y_jr = theta + prompt_sd (1 - E_j) + repetition_sd (G_jr - 2) / sqrt(2), E_j ~ Exp(1),
    G_jr ~ Gamma(2, 1). The prompt effect is left-skewed (skewness -2: a few prompts on
    which speculation pays far less, like a run that stops early), the repetition noise
    right-skewed (skewness sqrt(2): timing spikes); both have mean 0. The defaults are of
    the size seen in the frozen cpu-smollm2 records (log-speedup sd over prompts about
    0.25, bracketing target-only runs differing by up to about 25%)."""
    prompt = prompt_sd * (1 - rng.exponential(size=(prompts, 1)))
    rep = repetition_sd * (rng.gamma(2.0, size=(prompts, repetitions)) - 2) / np.sqrt(2)
    return theta + prompt + rep


@lru_cache(maxsize=16)
def simulated_coverage(prompts: int, repetitions: int, simulations: int = 1000, seed: int = 13,
                       level: float = 0.95, method: str = "bca") -> float:
    """The fraction of ``simulations`` studies of ``prompts`` x ``repetitions`` runs
    (``skewed_log_speedups``) whose interval (``speedup_interval`` with ``method``) contains the
    true theta: the interval's actual coverage at that size, to set against ``level``.
    Deterministic in ``seed``; the Monte Carlo standard error is
    sqrt(c (1 - c) / simulations), about 0.007 at c = 0.95 and 1000 simulations."""
    rng = np.random.default_rng(seed)
    theta, hits = 0.4, 0
    for i in range(simulations):
        y = skewed_log_speedups(rng, prompts, repetitions, theta)
        lo, hi = speedup_interval(list(y), seed + 1 + i, method, level)
        hits += lo <= theta <= hi
    return hits / simulations


SELECTION_THETAS = (0.40, 0.38, 0.35, 0.30, 0.20, 0.10)  # true log speedups of a K grid: two near the top


@lru_cache(maxsize=16)
def simulated_selection_coverage(discovery: int, reserved: int, configurations: int, simulations: int = 1000,
                                 seed: int = 13, level: float = 0.95, method: str = "bca") -> float:
    """The fraction of ``simulations`` studies in which the 'best K' procedure's interval
    contains the true log speedup of the K it chose: over ``configurations`` greedy K
    values with true log speedups ``SELECTION_THETAS`` (the first ``configurations``), each
    prompt's log speedups share a prompt effect across K (``skewed_log_speedups``) plus
    an independent K-by-prompt term (sd 0.05); K is the argmax of the mean over the
    ``discovery`` prompts and its interval (``speedup_interval`` with ``method``, one run per
    prompt) is taken over the ``reserved`` prompts alone, as ``best_k_reserved`` does.
    Deterministic in ``seed``; Monte Carlo SE sqrt(c (1 - c) / simulations), about 0.007
    at c = 0.95 and 1000 simulations."""
    rng = np.random.default_rng(seed)
    thetas = np.array(SELECTION_THETAS[:configurations])
    hits = 0
    for i in range(simulations):
        base = skewed_log_speedups(rng, discovery + reserved, 1, 0.0)            # (prompts, 1)
        y = base + thetas[None, :] + 0.05 * rng.standard_normal((discovery + reserved, len(thetas)))
        chosen = int(np.argmax(y[:discovery].mean(axis=0)))
        lo, hi = speedup_interval([np.array([v]) for v in y[discovery:, chosen]], seed + 1 + i, method, level)
        hits += lo <= thetas[chosen] <= hi
    return hits / simulations


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
