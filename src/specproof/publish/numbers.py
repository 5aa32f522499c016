"""paper/build/numbers.json: every number the paper prints, each
{value, unit, source, manifest_sha256}, computed from a study's raw records.

Keys are '<study>.<group>.<...>'. ``source`` names the record file the number is
computed from; ``manifest_sha256`` is the sha256 of the frozen study's manifest.json
(null for a study read from results/ that is not frozen). Benchmark numbers
('bench.<table>.<...>', see benchtables) carry the sha256 of their JSON instead.
"""
from __future__ import annotations

import math

from ..analysis.analyze import (StudyAnalysis, batch_invariance_summary, qualification_summary,
                       target_only_speed)
from ..records import json_scalar


def study_numbers(a: StudyAnalysis, manifest_sha256: str | None) -> dict:
    s = a.name
    out: dict[str, dict] = {}

    def put(key: str, value, unit: str, source: str) -> None:
        out[f"{s}.{key}"] = {"value": json_scalar(value), "unit": unit, "source": source,
                             "manifest_sha256": manifest_sha256}

    cpu = a.provenance["cpu"]
    put("machine.cpu", cpu.get("model", "?"), "text", "provenance.json")
    put("machine.cores", cpu.get("affinity_cores", cpu.get("logical_cores")), "count", "provenance.json")
    put("machine.ram_gib", cpu.get("ram_gib"), "GiB", "provenance.json")
    for pkg in ("torch", "transformers", "llama-cpp-python"):
        put(f"software.{pkg}", a.provenance["packages"].get(pkg), "version", "provenance.json")
    put("software.llama_cmake_args", (a.provenance.get("llama_cpp", {}).get("build") or {}).get("cmake_args"),
        "text", "provenance.json")
    pairs = a.provenance["study"]["config"]["pairs"]
    put("headline.pair", f"{pairs[0]['target']}+{pairs[0]['draft']}", "text", "provenance.json")
    put("runs.count", len(a.runs), "runs", "runs.parquet")
    put("runs.prompts", a.runs["prompt_id"].nunique(), "prompts", "runs.parquet")
    put("runs.max_new_tokens", a.provenance["study"]["config"]["settings"]["max_new_tokens"], "tokens",
        "provenance.json")
    for r in target_only_speed(a.runs).itertuples():
        put(f"target_only.{r.target}.tokens_per_s", r.tokens_per_s, "tokens/s", "runs.parquet")
    for r in a.speedups:
        base = f"speedup.{r['pair']}.{r['config']}.{r['workload']}"
        put(f"{base}.gmean", r["gmean_speedup"], "x", "runs.parquet")
        put(f"{base}.ci_low", r["ci_low"], "x", "runs.parquet")
        put(f"{base}.ci_high", r["ci_high"], "x", "runs.parquet")
    for pair, g in a.config_costs.groupby("pair", sort=False):
        fixed = g[(g["policy"] == "fixed") & (g["temperature"] == 0)]
        if len(fixed):
            best = fixed.loc[fixed["S_measured"].idxmax()]
            put(f"best.{pair}.k", int(best["k"]), "K", "runs.parquet")
            put(f"best.{pair}.speedup", best["S_measured"], "x", "runs.parquet")
    for r in a.config_costs.itertuples():
        base = f"costs.{r.pair}.{r.config}"
        for term in ("D_real", "R_target", "X"):
            put(f"{base}.{term}", getattr(r, term), "target-token costs per committed token",
                "rounds.parquet")
        for term in ("S_measured", "S_no_residual", "S_no_draft", "S_model", "realized_over_model",
                     "mean_accepted", "max_identity_residual"):
            put(f"{base}.{term}", getattr(r, term), "x" if term.startswith(("S_", "real")) else "",
                "rounds.parquet")
    for r in a.agreement_counts.itertuples():
        base = f"agreement.{r.source}.{r.target}.{r.path}.{r.verify_mode}"
        put(f"{base}.Q_matched", r.Q_matched, "runs", "runs.parquet")
        put(f"{base}.H_matched", r.H_matched, "runs", "runs.parquet")
        put(f"{base}.total", r.total, "runs", "runs.parquet")
    for r in qualification_summary(a.qualification).itertuples():
        base = f"qualification.{r.target}.{r.verify_mode}"
        put(f"{base}.matched", r.matched, "runs", "qualification.parquet")
        put(f"{base}.total", r.total, "runs", "qualification.parquet")
        put(f"{base}.qualifies", bool(r.qualifies), "bool", "qualification.parquet")
    for r in batch_invariance_summary(a.batch_invariance).itertuples():
        base = f"batch_invariance.{r.target}"
        put(f"{base}.max_abs_dlogit", r.max_abs_dlogit, "logit", "batch_invariance.parquet")
        put(f"{base}.max_tv", r.max_tv, "TV", "batch_invariance.parquet")
        put(f"{base}.argmax_flips", r.argmax_flips, "positions", "batch_invariance.parquet")
        put(f"{base}.positions", r.positions, "positions", "batch_invariance.parquet")
    c = a.certificate
    for key in ("n_tokens", "ks_pvalue", "chi2_pvalue", "detectable_tv_80", "detectable_tv_80_id_order"):
        put(f"certificate.{key}", c[key], "", "pit.parquet")
    put("certificate.rank_ks_pvalue", c["rank_order"]["ks_pvalue"], "", "pit.parquet")
    put("certificate.rank_chi2_pvalue", c["rank_order"]["chi2_pvalue"], "", "pit.parquet")
    put("certificate.rejected", c["rejected"], "bool", "pit.parquet")
    put("certificate.control_ks_pvalue", c["control_target_only"]["ks_pvalue"], "", "pit.parquet")
    put("certificate.control_n_tokens", c["control_target_only"]["n_tokens"], "tokens", "pit.parquet")
    for w, res in c["per_workload"].items():
        put(f"certificate.workload.{w}.n_tokens", res["n_tokens"], "tokens", "pit.parquet")
        put(f"certificate.workload.{w}.ks_pvalue", res["ks_pvalue"], "", "pit.parquet")
        put(f"certificate.workload.{w}.rank_ks_pvalue", c["per_workload_rank"][w]["ks_pvalue"], "", "pit.parquet")
    perm = c["two_sample_permutation"]
    put("certificate.permutation.prompts", perm["prompts"], "prompts", "pit.parquet")
    put("certificate.permutation.pvalue", perm["pvalue"], "", "pit.parquet")
    cal = a.calibration
    put("calibration.tokens_per_repetition", cal["tokens_per_repetition"], "tokens", "calibration.json")
    for order, res in cal["orders"].items():
        put(f"calibration.{order}.null_repetitions", res["null_repetitions"], "runs", "calibration.json")
        put(f"calibration.{order}.null_pvalues_ks_pvalue", res["null_pvalues_ks_pvalue"], "", "calibration.json")
        put(f"calibration.{order}.null_rejection_rate", res["null_rejection_rate"], "", "calibration.json")
        for name, v in res["violations"].items():
            put(f"calibration.{order}.{name}.rejection_rate", v["rejection_rate"], "", "calibration.json")
            put(f"calibration.{order}.{name}.repetitions", v["repetitions"], "runs", "calibration.json")
    put("level1.max_exact_error", a.level1["max_exact_error"], "probability", "level1.json")
    put("level1.min_chi2_pvalue", a.level1["min_chi2_pvalue"], "", "level1.json")
    put("level1.draws", a.level1["cases"][0]["draws"], "draws", "level1.json")
    put("level2.n_tokens", a.level2["n_tokens"], "tokens", "level2.json")
    put("level2.ks_pvalue", a.level2["ks_pvalue"], "", "level2.json")
    put("level2.rank_ks_pvalue", a.level2["rank_order"]["ks_pvalue"], "", "level2.json")
    if "ratio_order" in a.level2:
        put("level2.ratio_ks_pvalue", a.level2["ratio_order"]["ks_pvalue"], "", "level2.json")
    p = a.prediction
    put("prediction.P_matched", p["P_matched"], "runs", "prediction.json")
    put("prediction.P_total", p["P_total"], "runs", "prediction.json")
    put("prediction.discovery_holds", p["discovery_holds"], "runs", "prediction.json")
    put("prediction.discovery_total", p["discovery_total"], "runs", "prediction.json")
    if a.advise is not None:
        for r in a.advise.itertuples():
            put(f"advise.{r.pair}.k", r.k, "K", "advise.parquet")
            put(f"advise.{r.pair}.predicted", r.predicted_speedup, "x", "advise.parquet")
            put(f"advise.{r.pair}.realized", r.realized_speedup, "x", "advise.parquet")
            put(f"advise.{r.pair}.enable", bool(r.enable), "bool", "advise.parquet")
    return out


def compare(expected: dict, actual: dict, rel: float = 1e-9) -> str | None:
    """The first key whose value differs (or is missing), or None."""
    for key in sorted(set(expected) | set(actual)):
        if key not in actual:
            return f"{key}: in numbers.json but not recomputed"
        if key not in expected:
            return f"{key}: recomputed but missing from numbers.json"
        e, v = expected[key]["value"], actual[key]["value"]
        if isinstance(e, float) or isinstance(v, float):
            if e is None or v is None:
                if e is not v:
                    return f"{key}: numbers.json has {e}, records give {v}"
            elif not math.isclose(float(e), float(v), rel_tol=rel, abs_tol=1e-12):
                return f"{key}: numbers.json has {e}, records give {v}"
        elif e != v:
            return f"{key}: numbers.json has {e!r}, records give {v!r}"
        if expected[key].get("sha256") != actual[key].get("sha256"):
            return (f"{key}: numbers.json was computed from {expected[key].get('source')} with sha256 "
                    f"{str(expected[key].get('sha256'))[:16]}, which is now {str(actual[key].get('sha256'))[:16]}")
    return None
