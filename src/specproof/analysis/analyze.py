"""Everything derived from a study's raw records, deterministically (seeded bootstrap),
so the audit can recompute it from a frozen manifest without running a model.

Raw records (written by model-running stages): reference.parquet (+ seal), runs.parquet,
rounds.parquet, micro.parquet, pit.parquet, batch_invariance.parquet,
qualification.parquet, margins.parquet, prediction_seal.json, calibration.parquet,
provenance.json, and, in sets frozen since they were written, calibration_power.parquet,
level1.parquet, level2.parquet, prediction_live.parquet and advise_{micro,rounds,runs}.parquet.
The stages' summaries (calibration.json, level1.json, level2.json, prediction.json,
advise.parquet) are recomputed from those (``summaries``); read only where a set lacks them.
Derived: agreement.parquet, costs.parquet, stats.json, certificate.json.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .advisegap import advise_gap
from .agreement import (agreement_counts, agreement_table, change_rate, kept_by_config, recomputed_q,
                        same_function)
from .certificate import certificate
from .costs import config_costs, cross_target_costs, end_to_end_costs, run_costs, target_networks
from .loopcost import loop_costs
from ..records import check_seal, read_json, read_jsonl, read_parquet, write_json, write_parquet
from .statistics import (acceptance_stats, best_k_reserved, category_speedups, cross_target_stats,
                         familywise_intervals, interval_method, speedup_stats)
from .summaries import recompute
from ..study.workloads import split_of


@dataclass
class StudyAnalysis:
    name: str
    provenance: dict
    runs: pd.DataFrame
    agreement: pd.DataFrame
    agreement_counts: pd.DataFrame
    costs: pd.DataFrame
    config_costs: pd.DataFrame
    speedups: list[dict]
    best_reserved: dict[str, dict]
    acceptance: list[dict]
    certificate: dict
    calibration: dict
    level1: dict
    level2: dict
    batch_invariance: pd.DataFrame
    qualification: pd.DataFrame
    prediction: dict
    micro: pd.DataFrame
    advise: pd.DataFrame | None
    sources: dict[str, str]  # summary number group -> the file it is computed from (summaries.Summaries)
    calibration_table: pd.DataFrame | None = None  # calibration.parquet: p-values per repetition
    loop_costs: pd.DataFrame | None = None  # in-loop vs isolated costs per greedy fixed-K config (loopcost)
    advise_gap: pd.DataFrame | None = None  # advise's loop model vs the grid's reserved runs, per term (advisegap)
    end_to_end: list[dict] | None = None  # speedups with prefill inside the clock (costs.end_to_end_costs)
    prefill_ratio: dict | None = None  # (pair, config) -> geometric mean of spec / target-only prefill
    category_speedups: list[dict] | None = None  # per category, where a workload holds several
    interval_method: str = "bca"  # the speedups' interval (statistics.interval_method of the provenance)
    change_rate: pd.DataFrame | None = None  # per qualification path: per-token rate of first changes (agreement)
    familywise: list[dict] | None = None  # per speedups row: its Bonferroni interval ('t' sets only)
    kept: pd.DataFrame | None = None  # per greedy config and workload: prompts whose ids/text kept (agreement)
    same_function: pd.DataFrame | None = None  # per two targets of one tokenizer: equal sealed references (agreement)
    cross_target: list[dict] | None = None  # speculative speed over another storage's target-only (statistics)


def analyze(d: Path) -> StudyAnalysis:
    d = Path(d)
    reference = check_seal(d / "reference.parquet", d / "reference.seal.json")
    prov = read_json(d / "provenance.json")
    seed, method = int(prov["study"]["config"]["settings"]["seed"]), interval_method(prov)
    runs, rounds = read_parquet(d / "runs.parquet"), read_parquet(d / "rounds.parquet")
    micro, qual = read_parquet(d / "micro.parquet"), read_parquet(d / "qualification.parquet")
    qual = qual.assign(ids_equal=recomputed_q(qual, reference))  # Q from the ids, not the stored flag
    margins = read_parquet(d / "margins.parquet") if (d / "margins.parquet").exists() else None
    agree = agreement_table(runs, qual, reference, margins)
    costs = run_costs(runs, rounds)
    alpha = float(prov["study"]["config"].get("certificate", {}).get("alpha", 0.05))
    pit = read_parquet(d / "pit.parquet")
    summ = recompute(d, alpha, int((pit["path"] == "speculative").sum()))
    cal = summ.calibration
    discovery, reserved = prompt_split(d, runs, prov)
    probe = [d / f for f in ("advise_micro.parquet", "advise_rounds.parquet")]
    gap = advise_gap(*(read_parquet(f) for f in probe), runs, rounds, reserved) \
        if all(f.is_file() for f in probe) else None
    return StudyAnalysis(
        name=prov["study"]["name"], provenance=prov, runs=runs, agreement=agree,
        agreement_counts=agreement_counts(agree), costs=costs,
        config_costs=config_costs(costs, rounds, micro),
        speedups=speedup_stats(costs, seed, method=method), familywise=familywise_intervals(costs, method),
        best_reserved=best_k_reserved(costs, discovery, reserved, seed, method),
        acceptance=acceptance_stats(costs, rounds, seed),
        certificate=certificate(pit, cal, seed, alpha),
        calibration=cal, level1=summ.level1, level2=summ.level2,
        batch_invariance=read_parquet(d / "batch_invariance.parquet"), qualification=qual,
        prediction=summ.prediction, micro=micro, advise=summ.advise, sources=summ.sources,
        calibration_table=read_parquet(d / "calibration.parquet"),
        loop_costs=loop_costs(runs, rounds, micro), advise_gap=gap,
        category_speedups=category_speedups(costs, prompt_categories(d), seed, method),
        interval_method=method, change_rate=change_rate(qual, reference), kept=kept_by_config(agree, runs),
        same_function=same_function(reference),
        cross_target=cross_target_stats(cross_target_costs(runs, target_networks(prov)), seed, method),
        **clock_boundary(runs, seed, method))


def prompt_categories(d: Path) -> dict[str, str]:
    """Prompt id -> category, from the set's prompts.jsonl (empty when it has none)."""
    path = d / "prompts.jsonl"
    if not path.is_file():
        return {}
    records = read_jsonl(path)
    return {r["id"]: r["category"] for r in records if r.get("category") is not None}


def clock_boundary(runs: pd.DataFrame, seed: int, method: str = "bca") -> dict:
    """The speedups over all prompts with prefill inside the clock, and per configuration
    the geometric mean over runs of the speculative / target-only prefill ratio."""
    e2e = end_to_end_costs(runs)
    ratio = {(p, c): float(np.exp(np.log(g["prefill_ratio"]).mean()))
             for (p, c), g in e2e.groupby(["pair", "config"], sort=False)}
    stats = [r for r in speedup_stats(e2e, seed, method=method) if r["workload"] == "all"]
    return {"end_to_end": stats, "prefill_ratio": ratio}


def prompt_split(d: Path, runs: pd.DataFrame, prov: dict) -> tuple[list[str], list[str]]:
    """The study's discovery and reserved prompt ids as ``prompts.jsonl`` marks them
    (``split_of``; a set written before the mark, or without prompts.jsonl, is split by
    ``split_discovery`` with its ``prediction.discovery_fraction``, in the order of first
    appearance in the runs when the file is missing)."""
    path = d / "prompts.jsonl"
    if path.is_file():
        records = read_jsonl(path)
    else:
        records = [{"id": r.prompt_id, "workload": r.workload}
                   for r in runs.drop_duplicates("prompt_id").itertuples()]
    fraction = prov["study"]["config"].get("prediction", {}).get("discovery_fraction", 0.5)
    discovery, reserved = split_of(records, fraction)
    return [r["id"] for r in discovery], [r["id"] for r in reserved]


def derived_records(a: StudyAnalysis) -> dict:
    """The derived files by name, as ``write_derived`` writes them (and the audit
    compares a frozen set's copies with)."""
    return {"agreement.parquet": a.agreement, "costs.parquet": a.costs,
            "stats.json": {"speedup": a.speedups, "best_reserved": a.best_reserved, "acceptance": a.acceptance,
                           "config_costs": a.config_costs.to_dict(orient="records")},
            "certificate.json": a.certificate}


def write_derived(a: StudyAnalysis, out: Path) -> None:
    for name, record in derived_records(a).items():
        (write_parquet if name.endswith(".parquet") else write_json)(record, Path(out) / name)


MIN_QUALIFICATION_RUNS = 30  # issue 13: a path qualifies on at least 30 runs


def qualification_summary(qual: pd.DataFrame, bi: pd.DataFrame | None = None,
                          min_runs: int = MIN_QUALIFICATION_RUNS) -> pd.DataFrame:
    """Per target and verify path: matched / total greedy runs equal to the sealed
    reference, over how many distinct prompts (``prompts``) and on how many of them some
    run changed (``changed_prompts``: repeated greedy runs of one prompt repeat one
    outcome, so prompts are the independent units), ``qualifies`` (every run matched), the batch-invariance probe's argmax
    flips for the batched path (the serialized path scores one position per call, as the
    probe's reference does, so it has none; NaN without a probe) and the verdict:

    - 'fails': some run differs from the reference;
    - 'matched, probe flips': every run matched, but the probe saw the batched call
      change an argmax, so matching runs are luck of the prompts, not a property;
    - 'matched, n < <min_runs>': every run matched on too few runs to claim it;
    - 'qualifies': every one of at least ``min_runs`` runs matched and no probe flip."""
    g = qual.groupby(["target", "verify_mode"])
    s = g.agg(matched=("ids_equal", "sum"), total=("ids_equal", "size"), prompts=("prompt_id", "nunique"))
    per_prompt = qual.groupby(["target", "verify_mode", "prompt_id"])["ids_equal"].all()
    s["changed_prompts"] = (~per_prompt).groupby(level=["target", "verify_mode"]).sum()
    s = s.reset_index()
    s["qualifies"] = s["matched"] == s["total"]
    flips = bi.groupby("target")["argmax_flips"].sum() if bi is not None else pd.Series(dtype=float)
    s["probe_flips"] = [float(flips.get(t, np.nan)) if m == "batched" else 0.0
                        for t, m in zip(s["target"], s["verify_mode"])]

    def label(r) -> str:
        if not r.qualifies:
            return "fails"
        if r.probe_flips > 0:
            return "matched, probe flips"
        if r.total < min_runs:
            return f"matched, n < {min_runs}"
        return "qualifies"
    s["verdict"] = [label(r) for r in s.itertuples()]
    return s


def batch_invariance_summary(bi: pd.DataFrame) -> pd.DataFrame:
    return bi.groupby(["target", "backend"], dropna=False).agg(
        n_ubatch=("n_ubatch", "first"), prompts=("prompt_id", "size"),
        max_abs_dlogit=("max_abs_dlogit", "max"), max_tv=("max_tv", "max"),
        argmax_flips=("argmax_flips", "sum"), positions=("positions", "sum")).reset_index()


def target_only_speed(runs: pd.DataFrame) -> pd.DataFrame:
    a = runs[(runs["path"] == "target") & (runs["temperature"] == 0)]
    return a.groupby("target")["tokens_per_s"].median().rename("tokens_per_s").reset_index()


def finite(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def stage_analyze(d: Path) -> None:
    """The ``analyze`` stage (``specproof stage analyze``): one study's derived tables from
    its raw records; loads no model."""
    write_derived(analyze(d), d)
