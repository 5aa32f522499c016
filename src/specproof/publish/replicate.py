"""The replicate comparison (issue 21, section 3): a record set that ran the head set's
greedy blocks again at another time, on prompts the head set also ran (matched by id).

For each pair both sets ran: the run-to-run drift of target-only speed, per shared prompt
r_i = s_rep,i / s_head,i (s the median greedy target-only tokens/s of the prompt's block),
summarized as exp(mean log r_i) with a t interval on the mean log ratio (prompts are the
independent units), and its range over prompts; and for each greedy configuration both
ran, the two sets' speedups and verdicts side by side, a verdict surviving when the
replicate's, judged by its own interval, is the same.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ..analysis.analyze import StudyAnalysis
from ..analysis.statistics import speedup_stats
from ..errors import ConfigError, SpecproofError
from .numbers import Rows, config_attrs, indicative_set, verdict

DRIFT_CI = 0.95


def prompt_speeds(a: StudyAnalysis, pair: str) -> pd.Series:
    """Per prompt id, the median tokens/s of the greedy target-only runs of ``pair``'s block."""
    runs = a.runs
    t = runs[(runs["path"] == "target") & (runs["temperature"] == 0) & (runs["pair"] == pair)]
    return t.groupby("prompt_id")["tokens_per_s"].median()


def speed_drift(head: StudyAnalysis, rep: StudyAnalysis, pair: str) -> dict:
    """Replicate over head target-only speed on the shared prompts: geometric mean ratio,
    its t interval, its range, and each set's median tokens/s over those prompts."""
    h, r = prompt_speeds(head, pair), prompt_speeds(rep, pair)
    shared = h.index.intersection(r.index)
    logs = np.log(r[shared].to_numpy() / h[shared].to_numpy())
    ci = stats.ttest_1samp(logs, 0.0).confidence_interval(DRIFT_CI)
    return {"prompts": len(shared), "head_tokens_per_s": float(h[shared].median()),
            "replicate_tokens_per_s": float(r[shared].median()), "ratio_gmean": float(np.exp(logs.mean())),
            "ratio_ci_low": float(np.exp(ci.low)), "ratio_ci_high": float(np.exp(ci.high)),
            "ratio_min": float(np.exp(logs.min())), "ratio_max": float(np.exp(logs.max()))}


def hours_after(head: StudyAnalysis, rep: StudyAnalysis, pair: str) -> float:
    """Hours from the head set's first timed run of ``pair`` to the replicate's."""
    first = [pd.to_datetime(a.runs.loc[a.runs["pair"] == pair, "started_at"], utc=True).min() for a in (head, rep)]
    return (first[1] - first[0]).total_seconds() / 3600


def greedy_speedups(a: StudyAnalysis, pair: str) -> dict[str, dict]:
    """The pair's greedy speedups over all prompts, by configuration label."""
    return {s["config"]: s for s in a.speedups
            if s["pair"] == pair and s["workload"] == "all" and s["temperature"] == 0}


def shared_speedups(head: StudyAnalysis, rep: StudyAnalysis, pair: str) -> dict[str, dict]:
    """The head set's greedy speedups of ``pair`` over the prompts the replicate also ran
    (same estimator and interval as ``speedup_stats``), by configuration label."""
    shared = sorted(set(head.runs["prompt_id"]) & set(rep.runs["prompt_id"]))
    seed = int(head.provenance["study"]["config"]["settings"]["seed"])
    return {s["config"]: s for s in speedup_stats(head.costs[head.costs["pair"] == pair], seed, prompts=shared,
                                                    method=head.interval_method)
            if s["workload"] == "all" and s["temperature"] == 0}


def verdict_survival(head: StudyAnalysis, rep: StudyAnalysis, pair: str) -> list[dict]:
    """Per greedy configuration both sets ran: each set's speedup, interval and verdict
    (each judged by its own interval and indicative flag), whether the verdict survives,
    and the head set's speedup on the shared prompts alone."""
    h, r = greedy_speedups(head, pair), greedy_speedups(rep, pair)
    same = shared_speedups(head, rep, pair)
    hi, ri = indicative_set(head), indicative_set(rep)
    out = []
    for config in [c for c in h if c in r]:
        a, b = h[config], r[config]
        va, vb = verdict(a["ci_low"], a["ci_high"], hi), verdict(b["ci_low"], b["ci_high"], ri)
        out.append({"config": config, "attrs": config_attrs(a), "head_gmean": a["gmean_speedup"],
                    "replicate_gmean": b["gmean_speedup"], "replicate_ci_low": b["ci_low"],
                    "replicate_ci_high": b["ci_high"], "head_verdict": va, "replicate_verdict": vb,
                    "survives": va == vb, "head_shared_gmean": same[config]["gmean_speedup"],
                    "head_shared_ci_low": same[config]["ci_low"], "head_shared_ci_high": same[config]["ci_high"]})
    return out


def replicates_of(config: dict, studies: list[str], where: str) -> list[tuple[str, str]]:
    """(replicate set, set it replicates) for each entry {set, of} of config ``replicates``
    (a list, so a config merged over another replaces it whole); both must be among
    ``studies`` (their records are audited like every listed set)."""
    out = [(e["set"], e["of"]) for e in config.get("replicates") or []]
    for i, (rep, head) in enumerate(out):
        if rep == head:
            raise ConfigError(f"{where}: field replicates.{i}: {rep!r} cannot replicate itself")
        for s, field in ((rep, "set"), (head, "of")):
            if s not in studies:
                raise ConfigError(f"{where}: field replicates.{i}.{field}: {s!r} is not in studies")
    return out


def config_replicate_numbers(config: dict, studies: list[str], where: str, analyses: dict,
                             shas: dict) -> dict:
    """The replicate.* rows of every replicate ``config`` names (replicates_of), from the
    sets' analyses and manifest sha256s: what the paper prints and the audit recomputes."""
    rows: dict = {}
    for rep, of in replicates_of(config, studies, where):
        rows.update(replicate_numbers(analyses[of], analyses[rep], of, rep, shas[rep]))
    return rows


def replicate_numbers(head: StudyAnalysis, rep: StudyAnalysis, head_set: str, rep_set: str,
                      rep_sha: str | None) -> dict:
    """Rows 'replicate.<rep_set>.<pair>.*' (attribute ``of``: ``head_set``): per pair,
    the target-only drift and, per configuration, both verdicts and their survival."""
    rows = Rows(manifest_sha256=rep_sha)
    pairs = [p for p in dict.fromkeys(rep.runs["pair"]) if p in set(head.runs["pair"])]
    for pair in pairs:
        put = rows.at("replicate", {"of": head_set}, replicate=rep_set, pair=pair)
        put("ratio_ci_level_pct", 100 * DRIFT_CI, "%", "src/specproof/publish/replicate.py")
        for metric, value in speed_drift(head, rep, pair).items():
            put(metric, value, "prompts" if metric == "prompts" else "x" if "ratio" in metric else "tokens/s",
                "runs.parquet")
        hours = hours_after(head, rep, pair)
        if not hours > 0:
            raise SpecproofError(f"replicate {rep_set}: its runs of {pair} start {hours:.2f} h after "
                                 f"those of {head_set}: a replicate runs later (a copy starts with it)")
        put("hours_after", hours, "hours", "runs.parquet")
        survival = verdict_survival(head, rep, pair)
        put("verdicts", len(survival), "configurations", "runs.parquet")
        put("verdicts_surviving", sum(s["survives"] for s in survival), "configurations", "runs.parquet")
        for s in survival:
            put_c = rows.at("replicate", {"of": head_set, **s["attrs"]}, replicate=rep_set, pair=pair,
                            config=s["config"])
            for metric in ("head_gmean", "replicate_gmean", "replicate_ci_low", "replicate_ci_high",
                           "head_shared_gmean", "head_shared_ci_low", "head_shared_ci_high"):
                put_c(metric, s[metric], "x", "runs.parquet")
            for metric in ("head_verdict", "replicate_verdict", "survives"):
                put_c(metric, s[metric], "text", "runs.parquet")
    return rows.out
