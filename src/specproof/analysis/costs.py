"""The complete-cost identity and its counterfactuals.

For one speculative run with C committed tokens (accepted + correction/bonus tokens)
and decode time split into D_real (drafting, including draft replay), R_target
(target verification) and X (residual: sampling, bookkeeping, synchronization), with
t_T the target-only cost per token measured in the same block (ms/token):

    S = C / (D_real/t_T + R_target/t_T + X/t_T)

equals the measured wall-clock speedup tokens/s(spec) / tokens/s(target-only); the
difference is reported as ``identity_residual``. Counterfactuals:
    S_no_residual = C / ((D_real + R_target) / t_T)        (X = 0)
    S_no_draft    = C / ((R_target + X) / t_T)             (D_real = 0: could it ever pay?)
Cost model (per configuration, from micro-benchmarks and acceptance by position;
E[C|K] and alpha_i live in ``decode.costmodel``):
    S_model = t_T * E[C|K] / (K * c_draft + v(K + 1))
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..decode.costmodel import acceptance_by_position, expected_committed
from ..errors import SpecproofError


BLOCK = ["pair", "prompt_id", "rep", "temperature"]


def check_one_host(runs: pd.DataFrame) -> None:
    """A speedup divides a speculative run's tokens/s by its block's target-only tokens/s,
    so every run of a block must be timed on one host. Records without ``host`` (sets
    frozen before it was recorded) come from one whole-study job and pass."""
    if "host" not in runs:
        return
    hosts = runs.groupby(BLOCK)["host"].unique()
    mixed = hosts[hosts.map(len) > 1]
    if len(mixed):
        key, names = mixed.index[0], mixed.iloc[0]
        block = "|".join(str(x) for x in key)
        raise SpecproofError(f"runs.parquet: field host: block {block} was timed on {len(names)} hosts "
                             f"({', '.join(sorted(map(str, names)))}); refusing to compare a speculative "
                             "run with a target-only run from another host")


def baselines(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (pair, prompt, rep, temperature) block: mean target-only tokens/s of the
    bracketing A runs; refused when a block's runs come from more than one host."""
    check_one_host(runs)
    a = runs[runs["path"] == "target"]
    return (a.groupby(["pair", "prompt_id", "rep", "temperature"])["tokens_per_s"].mean()
            .rename("baseline_tokens_per_s").reset_index())


def run_costs(runs: pd.DataFrame, rounds: pd.DataFrame) -> pd.DataFrame:
    spec = runs[runs["path"] == "speculative"].merge(
        baselines(runs), on=["pair", "prompt_id", "rep", "temperature"], how="left")
    agg = rounds.groupby("run_id").agg(
        C=("committed", "sum"), draft_ns=("draft_ns", "sum"), replay_ns=("replay_ns", "sum"),
        verify_ns=("verify_ns", "sum"), residual_ns=("residual_ns", "sum"),
        rounds=("round", "size"), drafted=("k", "sum"), accepted=("accepted", "sum")).reset_index()
    df = spec.merge(agg, on="run_id", how="left")
    t_target_ns = 1e9 / df["baseline_tokens_per_s"]
    d = (df["draft_ns"] + df["replay_ns"]) / t_target_ns
    r = df["verify_ns"] / t_target_ns
    x = df["residual_ns"] / t_target_ns
    out = df[["run_id", "pair", "target", "draft", "workload", "prompt_id", "rep", "config", "k",
              "policy", "verify_mode", "temperature", "C", "rounds", "drafted", "accepted"]].copy()
    out["t_target_ms"] = t_target_ns / 1e6
    out["D_real"], out["R_target"], out["X"] = d, r, x
    out["S_identity"] = df["C"] / (d + r + x)
    out["S_measured"] = df["tokens_per_s"] / df["baseline_tokens_per_s"]
    out["identity_residual"] = out["S_identity"] - out["S_measured"]
    out["S_no_residual"] = df["C"] / (d + r)
    out["S_no_draft"] = df["C"] / (r + x)
    return out


def end_to_end_costs(runs: pd.DataFrame) -> pd.DataFrame:
    """Per speculative run, the speedup with prefill inside the clock (time to the last
    token, for a user who waits for the whole answer):

        S_e2e = e(spec) / mean e(A),  e = new_tokens / (prefill_ns + decode_ns)  (tokens/ns)

    with A the block's target-only runs, and ``prefill_ratio`` = prefill_ns(spec) / mean
    prefill_ns(A) (the speculative prefill includes the draft's). ``S_measured`` holds
    S_e2e so that ``statistics.speedup_stats`` summarizes it as it does the decode-only
    speedup."""
    check_one_host(runs)
    r = runs.assign(e2e=runs["new_tokens"] / (runs["prefill_ns"] + runs["decode_ns"]))
    base = (r[r["path"] == "target"].groupby(BLOCK)
            .agg(base_e2e=("e2e", "mean"), base_prefill_ns=("prefill_ns", "mean")).reset_index())
    spec = r[r["path"] == "speculative"].merge(base, on=BLOCK, how="left")
    out = spec[["run_id", "pair", "target", "draft", "workload", "prompt_id", "rep", "config", "k",
                "policy", "verify_mode", "temperature"]].copy()
    out["S_measured"] = spec["e2e"] / spec["base_e2e"]
    out["prefill_ratio"] = spec["prefill_ns"] / spec["base_prefill_ns"]
    return out


def model_speedup(alpha: np.ndarray, k: int, draft_ms: float, verify_ms: dict[int, float],
                  target_ms: float) -> float:
    """S_model = t_T * E[C|K] / (K c_draft + v(K+1)); NaN if v(K+1) was not measured."""
    v = verify_ms.get(k + 1)
    if v is None:
        return float("nan")
    return target_ms * expected_committed(alpha, k) / (k * draft_ms + v)


def config_costs(costs: pd.DataFrame, rounds: pd.DataFrame, micro: pd.DataFrame) -> pd.DataFrame:
    """Per (pair, config): pooled acceptance, mean cost terms, the measured speedup
    (ratio of total tokens to total time) and the cost model's ideal."""
    rows = []
    for (pair, config), g in costs.groupby(["pair", "config"], sort=False):
        rr = rounds[rounds["run_id"].isin(g["run_id"])]
        k = int(g["k"].iloc[0])
        alpha = acceptance_by_position(rr, k)
        tgt = g["target"].iloc[0]
        vm = micro[(micro["role"] == "target") & (micro["name"] == tgt)]
        verify_ms = dict(zip(vm["B"].astype(int), vm["median_ms"]))
        dm = micro[(micro["role"] == "draft") & (micro["name"] == g["draft"].iloc[0])]
        drafted = rr["k"].sum()
        draft_ms = float(dm["median_ms"].iloc[0]) if len(dm) else \
            float(rr["draft_ns"].sum() / max(drafted, 1) / 1e6)
        target_ms = verify_ms.get(1, float(g["t_target_ms"].median()))
        total_c = g["C"].sum()
        rows.append({"pair": pair, "config": config, "target": tgt, "draft": g["draft"].iloc[0],
                     "k": k, "policy": g["policy"].iloc[0], "temperature": float(g["temperature"].iloc[0]),
                     "runs": len(g), "mean_accepted": float(rr["accepted"].sum() / max((rr["k"] > 0).sum(), 1)),
                     "alpha": alpha.tolist(),
                     "D_real": float(g["D_real"].sum() / total_c), "R_target": float(g["R_target"].sum() / total_c),
                     "X": float(g["X"].sum() / total_c),
                     "S_measured": float(total_c / (g["D_real"] + g["R_target"] + g["X"]).sum()),
                     "S_no_residual": float(total_c / (g["D_real"] + g["R_target"]).sum()),
                     "S_no_draft": float(total_c / (g["R_target"] + g["X"]).sum()),
                     "max_identity_residual": float(g["identity_residual"].abs().max()),
                     "draft_ms": draft_ms, "target_ms": target_ms,
                     "S_model": model_speedup(alpha, k, draft_ms, verify_ms, target_ms)
                     if g["policy"].iloc[0] == "fixed" else float("nan")})
    out = pd.DataFrame(rows)
    out["realized_over_model"] = out["S_measured"] / out["S_model"]
    return out


def micro_medians(micro: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per micro-benchmark row (role, name, B), in B order: the number of timed samples n,
    their median in ms and a distribution-free ``level`` interval for the median (the
    binomial order-statistic interval, ``scipy.stats.quantile_test`` at p = 0.5; NaN where
    n is too small to reach ``level``), and, for a target's B > 1, whether the median fell
    below v(B - 1)'s (``dip``) and whether the two intervals are then disjoint
    (``dip_resolved``: the kernels, not sampling noise)."""
    from scipy.stats import quantile_test
    out = []
    for r in micro.sort_values(["role", "name", "B"], kind="stable").itertuples():
        samples = np.asarray(r.samples_ms, dtype=float)
        med = float(np.median(samples))
        ci = quantile_test(samples, q=med, p=0.5).confidence_interval(level)
        out.append({"role": r.role, "name": r.name, "B": int(r.B), "n": int(samples.size),
                    "median_ms": med, "ci_low": float(ci.low), "ci_high": float(ci.high)})
    df = pd.DataFrame(out)
    prev = df.groupby(["role", "name"])[["median_ms", "ci_low"]].shift(1)
    df["dip"] = (df["role"] == "target") & (df["median_ms"] < prev["median_ms"])
    df["dip_resolved"] = df["dip"] & (df["ci_high"] < prev["ci_low"])
    return df


def target_networks(provenance: dict) -> dict[str, str]:
    """Per target of a record set, the network its file stores: the sha256 its embedded
    source must have (a file derived at another storage precision carries its source's),
    else the file's own sha256. Two targets with one network compute one function."""
    cfg, entries = provenance["study"]["config"], (provenance.get("models") or {}).values()
    out = {}
    for name, spec in cfg["targets"].items():
        for e in entries:
            if (e.get("spec") or {}).get("model") == spec.get("model") and len(e.get("files") or []) == 1:
                out[name] = (e.get("source") or {}).get("expected_sha256") or e["files"][0]["sha256"]
                break
    return out


def cross_target_costs(runs: pd.DataFrame, networks: dict[str, str]) -> pd.DataFrame:
    """Per greedy speculative run and each other target of the same network (another
    storage of it): S_measured = the run's tokens/s over that other target's target-only
    tokens/s on the same prompt (the mean of its greedy target-only runs there), a user's
    choice between speculating on one file and decoding another file alone. It compares
    runs of different blocks, so none where the set's runs were timed on several hosts."""
    cols = ["pair", "config", "k", "policy", "verify_mode", "temperature", "other", "workload", "prompt_id", "rep",
            "S_measured"]
    if "host" in runs and runs["host"].nunique() > 1:
        return pd.DataFrame(columns=cols)
    greedy = runs[runs["temperature"] == 0]
    alone = greedy[greedy["path"] == "target"].groupby(["target", "prompt_id"])["tokens_per_s"].mean()
    spec = greedy[greedy["path"] == "speculative"]
    parts = []
    for other in alone.index.get_level_values("target").unique():
        mine = spec[(spec["target"] != other) & spec["target"].map(networks).eq(networks.get(other))]
        if mine.empty or networks.get(other) is None:
            continue
        base = alone.xs(other, level="target").rename("other_tokens_per_s")
        m = mine.merge(base, left_on="prompt_id", right_index=True, how="inner")
        parts.append(m.assign(other=other, S_measured=m["tokens_per_s"] / m["other_tokens_per_s"]))
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)
