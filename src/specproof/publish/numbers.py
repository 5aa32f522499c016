"""paper/build/numbers.json: every number the paper prints, each
{value, unit, source, manifest_sha256}, computed from a study's raw records.

Keys are '<set>.<group>.<...>' with <set> a record set, '<study>@<machine>' (or a bare
'<study>' for unfrozen results). ``source`` names the record file the number is computed
from: a raw record wherever the set holds one, the stage's summary file (calibration.json,
level1.json, level2.json, prediction.json, advise.parquet) only for a set frozen before
its raw record was written (see ``analysis.summaries``), and a code path for a level the
code fixes; ``manifest_sha256`` is the sha256 of the frozen set's manifest.json (null for
unfrozen results). 'machines.<study>.<...>' compare the machines a study was frozen on and
cite every manifest they read. Benchmark numbers ('bench.<table>.<...>', see benchtables)
carry the sha256 of their JSON instead.
"""
from __future__ import annotations

import math

from ..analysis.analyze import (MIN_QUALIFICATION_RUNS, StudyAnalysis, batch_invariance_summary,
                                qualification_summary, target_only_speed)
from ..analysis.statistics import simulated_coverage
from ..evidence.pit import CHI2_BINS
from ..records import json_scalar


INDICATIVE_BELOW_PCT = 90  # a set whose intervals cover less than this makes no claims


def verdict(ci_low: float, ci_high: float, indicative: bool = False) -> str:
    """A claim by interval: 'faster' only when the whole CI is above 1, 'slower' only when
    it is below 1, else 'unresolved'. In a set whose intervals cover below
    ``INDICATIVE_BELOW_PCT`` (``indicative``), 'faster' and 'slower' become
    'indicative (faster)' and 'indicative (slower)': shown, never counted as claims."""
    v = "unresolved"
    if ci_low is not None and ci_low > 1:
        v = "faster"
    elif ci_high is not None and ci_high < 1:
        v = "slower"
    return f"indicative ({v})" if indicative and v != "unresolved" else v


def indicative_set(a: StudyAnalysis) -> bool:
    """Whether the set's intervals, simulated at its size over all prompts, cover below
    ``INDICATIVE_BELOW_PCT`` percent."""
    sizes = coverage_sizes(a)
    if "all" not in sizes:
        return False
    n, reps = sizes["all"]
    return 100 * simulated_coverage(n, reps, COVERAGE_SIMULATIONS) < INDICATIVE_BELOW_PCT


def best_fixed(a: StudyAnalysis) -> dict[str, dict]:
    """Per pair, the greedy fixed-K configuration with the highest geometric-mean speedup
    over prompts (all workloads) and that estimate's CI: one estimator for the point and
    its interval (the pooled cost-identity S of ``costs`` is a different one)."""
    rows = [r for r in a.speedups if r["workload"] == "all" and r["policy"] == "fixed"
            and r["temperature"] == 0]
    out = {}
    for pair in dict.fromkeys(r["pair"] for r in rows):
        best = max((r for r in rows if r["pair"] == pair), key=lambda r: r["gmean_speedup"])
        out[pair] = {"k": int(best["k"]), "speedup": float(best["gmean_speedup"]),
                     "ci_low": best["ci_low"], "ci_high": best["ci_high"]}
    return out


def summary_only(numbers: dict) -> dict[str, int]:
    """Per summary file, how many of ``numbers`` are computed from it (not from a raw
    record): the numbers the audit could only check against a summary."""
    from ..analysis.summaries import SUMMARY_FILES
    out: dict[str, int] = {}
    for rec in numbers.values():
        if rec["source"] in SUMMARY_FILES:
            out[rec["source"]] = out.get(rec["source"], 0) + 1
    return out


def study_numbers(a: StudyAnalysis, manifest_sha256: str | None, prefix: str | None = None) -> dict:
    """Every number of one record set, keyed '<set>.<group>.<...>' (``prefix`` or the
    study's name as <set>), each section written by one function below."""
    s = prefix or a.name
    out: dict[str, dict] = {}

    def put(key: str, value, unit: str, source: str) -> None:
        out[f"{s}.{key}"] = {"value": json_scalar(value), "unit": unit, "source": source,
                             "manifest_sha256": manifest_sha256}

    indicative = indicative_set(a)
    put("stats.verdicts_indicative", indicative, "bool", "runs.parquet")
    put("stats.indicative_below_pct", INDICATIVE_BELOW_PCT, "%", "src/specproof/publish/numbers.py")
    put("machine.label", s.partition("@")[2] or "this machine", "text", "manifest.json")

    def judge(lo, hi) -> str:
        return verdict(lo, hi, indicative)
    setup_numbers(a, put)
    speed_numbers(a, put, judge)
    policy_numbers(a, put)
    best_numbers(a, put, judge)
    machine_speed_numbers(a, put)
    cost_numbers(a, put)
    loop_numbers(a, put)
    advise_gap_numbers(a, put)
    clock_numbers(a, put)
    agreement_numbers(a, put)
    certificate_numbers(a, put)
    calibration_numbers(a, put)
    rule_numbers(a, put)
    level_numbers(a, put)
    prediction_numbers(a, put)
    advise_numbers(a, put)
    return out


def setup_numbers(a: StudyAnalysis, put) -> None:
    """'machine.*', 'software.*', 'headline.*', 'workloads.*', 'runs.*', 'models.*': what
    ran where (provenance.json) and how much (runs.parquet)."""
    cpu = a.provenance["cpu"]
    put("machine.cpu", cpu.get("model", "?"), "text", "provenance.json")
    put("machine.cores", cpu.get("affinity_cores", cpu.get("logical_cores")), "count", "provenance.json")
    put("machine.ram_gib", cpu.get("ram_gib"), "GiB", "provenance.json")
    put("machine.simd", " ".join(f for f in ("avx2", "avx512f", "amx_tile") if f in cpu.get("simd_flags", [])),
        "text", "provenance.json")
    for pkg in ("torch", "transformers", "llama-cpp-python"):
        put(f"software.{pkg}", a.provenance["packages"].get(pkg), "version", "provenance.json")
    put("software.git_commit", str(a.provenance.get("git", {}).get("commit") or "unknown")[:10], "text",
        "provenance.json")
    build = a.provenance.get("llama_cpp", {}).get("build") or {}
    put("software.llama_flags_chosen_by", build.get("chosen_by") or "fixed flags (before CPU-aware builds)",
        "text", "provenance.json")
    put("software.llama_cmake_args", build.get("cmake_args"), "text", "provenance.json")
    cfg = a.provenance["study"]["config"]
    put("headline.pair", f"{cfg['pairs'][0]['target']}+{cfg['pairs'][0]['draft']}", "text", "provenance.json")
    headline_models(cfg, put)
    for workload, n in a.runs.groupby("workload")["prompt_id"].nunique().items():
        put(f"workloads.{workload}.prompts", int(n), "prompts", "runs.parquet")
    put("runs.count", len(a.runs), "runs", "runs.parquet")
    # hosts that timed the runs (each block on one host, checked by analysis); 0: not recorded
    put("runs.hosts", int(a.runs["host"].nunique()) if "host" in a.runs else 0, "hosts", "runs.parquet")
    put("runs.prompts", a.runs["prompt_id"].nunique(), "prompts", "runs.parquet")
    put("runs.max_new_tokens", cfg["settings"]["max_new_tokens"], "tokens", "provenance.json")
    put("models.targets", ", ".join(sorted({str(t.get("model")) for t in cfg["targets"].values()})), "text",
        "provenance.json")


def speed_numbers(a: StudyAnalysis, put, judge) -> None:
    """'target_only.*', 'speedup.<pair>.<config>.<workload>.*' (geometric mean over prompts,
    its CI and verdict), the greedy fixed-K grid ('greedy.*') and its verdict counts."""
    for r in target_only_speed(a.runs).itertuples():
        put(f"target_only.{r.target}.tokens_per_s", r.tokens_per_s, "tokens/s", "runs.parquet")
    for r in a.speedups:
        base = f"speedup.{r['pair']}.{r['config']}.{r['workload']}"
        put(f"{base}.gmean", r["gmean_speedup"], "x", "runs.parquet")
        put(f"{base}.ci_low", r["ci_low"], "x", "runs.parquet")
        put(f"{base}.ci_high", r["ci_high"], "x", "runs.parquet")
        put(f"{base}.verdict", judge(r["ci_low"], r["ci_high"]), "text", "runs.parquet")
    greedy_fixed = [r for r in a.speedups if r["workload"] == "all" and r["policy"] == "fixed"
                    and r["temperature"] == 0]
    for r in greedy_fixed:  # the grid, one row per K (the paper lists it)
        put(f"greedy.{r['pair']}.{r['config']}.k", r["k"], "K", "runs.parquet")
    verdicts = [judge(r["ci_low"], r["ci_high"]) for r in greedy_fixed]
    put("summary.greedy_fixed.count", len(greedy_fixed), "configurations", "runs.parquet")
    for v in ("faster", "slower", "unresolved", "indicative (faster)", "indicative (slower)"):
        key = v.replace("indicative (", "indicative_").rstrip(")")
        put(f"summary.greedy_fixed.{key}", verdicts.count(v), "configurations", "runs.parquet")


def policy_numbers(a: StudyAnalysis, put) -> None:
    """'policy.<pair>.<policy>.*': each greedy policy's speedup and CI, its K_max, and the
    mean K it drafted per round (sum of drafted / sum of rounds over its runs)."""
    drafted = a.costs.groupby(["pair", "config"])[["drafted", "rounds"]].sum()
    for r in a.speedups:
        if r["workload"] == "all" and r["policy"] != "fixed" and r["temperature"] == 0:
            base = f"policy.{r['pair']}.{r['policy']}"
            put(f"{base}.k_max", r["k"], "K", "runs.parquet")
            put(f"{base}.gmean", r["gmean_speedup"], "x", "runs.parquet")
            put(f"{base}.ci_low", r["ci_low"], "x", "runs.parquet")
            put(f"{base}.ci_high", r["ci_high"], "x", "runs.parquet")
            if (r["pair"], r["config"]) in drafted.index:
                d = drafted.loc[(r["pair"], r["config"])]
                put(f"{base}.mean_k", float(d["drafted"] / d["rounds"]) if d["rounds"] else None,
                    "drafts per round", "rounds.parquet")


def best_numbers(a: StudyAnalysis, put, judge) -> None:
    """'best.<pair>.*' (the best greedy fixed K over all prompts) and 'best_reserved.<pair>.*'
    (K chosen on discovery prompts, reported on the reserved ones)."""
    for pair, b in best_fixed(a).items():
        put(f"best.{pair}.k", b["k"], "K", "runs.parquet")
        put(f"best.{pair}.speedup", b["speedup"], "x", "runs.parquet")
        put(f"best.{pair}.ci_low", b["ci_low"], "x", "runs.parquet")
        put(f"best.{pair}.ci_high", b["ci_high"], "x", "runs.parquet")
        put(f"best.{pair}.verdict", judge(b["ci_low"], b["ci_high"]), "text", "runs.parquet")
    for pair, b in a.best_reserved.items():
        put(f"best_reserved.{pair}.k", b["k"], "K", "runs.parquet")
        put(f"best_reserved.{pair}.gmean", b["gmean_speedup"], "x", "runs.parquet")
        put(f"best_reserved.{pair}.ci_low", b["ci_low"], "x", "runs.parquet")
        put(f"best_reserved.{pair}.ci_high", b["ci_high"], "x", "runs.parquet")
        put(f"best_reserved.{pair}.verdict", judge(b["ci_low"], b["ci_high"]), "text", "runs.parquet")
        put(f"best_reserved.{pair}.discovery_gmean", b["discovery_gmean"], "x", "runs.parquet")
        put(f"best_reserved.{pair}.discovery_prompts", b["discovery_prompts"], "prompts", "prompts.jsonl")
        put(f"best_reserved.{pair}.prompts", b["prompts"], "prompts", "prompts.jsonl")
    for stratum, (n, reps) in coverage_sizes(a).items():
        base = f"stats.coverage.{stratum}"
        put(f"{base}.prompts", n, "prompts", "runs.parquet")
        put(f"{base}.repetitions", reps, "runs", "runs.parquet")
        put(f"{base}.actual_pct", 100 * simulated_coverage(n, reps, COVERAGE_SIMULATIONS), "%", "runs.parquet")
    put("stats.coverage.simulations", COVERAGE_SIMULATIONS, "studies", "runs.parquet")
    put("stats.ci_level_pct", round(100 * _default("two_stage_ci", "level")), "%",
        "src/specproof/analysis/statistics.py")
    put("calibration.power_pct", round(100 * _default("detectable_tv", "target_power")), "%",
        "src/specproof/evidence/calibration.py")


def machine_speed_numbers(a: StudyAnalysis, put) -> None:
    """'headline.*' in tokens/s, 'verify.*': v(1) in ms, v(B)/v(1) at B = VERIFY_B, and v(1)
    over the same target's median per-token time in the timed runs (micro.parquet beside
    runs.parquet: far from 1, the micro-benchmark did not measure what the runs saw)."""
    speed = target_only_speed(a.runs).set_index("target")["tokens_per_s"]
    pairs = a.provenance["study"]["config"]["pairs"]
    head_target, head_pair = pairs[0]["target"], f"{pairs[0]['target']}+{pairs[0]['draft']}"
    if len(speed) and head_pair in best_fixed(a) and head_target in speed:
        # the headline speedup in absolute terms, beside the fastest target-only backend
        put("headline.best_tokens_per_s", best_fixed(a)[head_pair]["speedup"] * speed[head_target],
            "tokens/s", "runs.parquet")
        put("headline.fastest_target_only", str(speed.idxmax()), "text", "runs.parquet")
        put("headline.fastest_target_only_tokens_per_s", float(speed.max()), "tokens/s", "runs.parquet")
    put("verify.b", VERIFY_B, "positions", "micro.parquet")
    for r in verify_ratios(a.micro).itertuples():
        put(f"verify.{r.name}.ratio", r.ratio, "x", "micro.parquet")
        put(f"verify.{r.name}.v1_ms", r.v1_ms, "ms", "micro.parquet")
        if r.name in speed:
            put(f"verify.{r.name}.v1_over_run_step", r.v1_ms * speed[r.name] / 1000, "x",
                "micro.parquet, runs.parquet")


def cost_numbers(a: StudyAnalysis, put) -> None:
    """'costs.<pair>.<config>.*': the complete-cost decomposition per committed token, in
    target-token costs, and the speedups it implies (analysis.costs)."""
    for r in a.config_costs.itertuples():
        base = f"costs.{r.pair}.{r.config}"
        for term in ("D_real", "R_target", "X"):
            put(f"{base}.{term}", getattr(r, term), "target-token costs per committed token",
                "rounds.parquet")
        for term in ("S_measured", "S_no_residual", "S_no_draft", "S_model", "realized_over_model",
                     "mean_accepted", "max_identity_residual"):
            put(f"{base}.{term}", getattr(r, term), "x" if term.startswith(("S_", "real")) else "",
                "rounds.parquet")


def agreement_numbers(a: StudyAnalysis, put) -> None:
    """'agreement.*' (H and Q counts per path), 'qualification.<target>.<mode>.*' (Q over
    distinct reserved prompts, the verdict), 'batch_invariance.<target>.*' (the probe)."""
    for r in a.agreement_counts.itertuples():
        base = f"agreement.{r.source}.{r.target}.{r.path}.{r.verify_mode}"
        put(f"{base}.Q_matched", r.Q_matched, "runs", "runs.parquet")
        put(f"{base}.H_matched", r.H_matched, "runs", "runs.parquet")
        put(f"{base}.total", r.total, "runs", "runs.parquet")
    cfg = a.provenance["study"]["config"]
    min_runs = int(cfg.get("qualification", {}).get("min_runs", MIN_QUALIFICATION_RUNS))
    put("qualification.min_runs", min_runs, "runs", "provenance.json")
    for r in qualification_summary(a.qualification, a.batch_invariance, min_runs).itertuples():
        base = f"qualification.{r.target}.{r.verify_mode}"
        put(f"{base}.matched", r.matched, "runs", "qualification.parquet")
        put(f"{base}.total", r.total, "runs", "qualification.parquet")
        put(f"{base}.qualifies", bool(r.qualifies), "bool", "qualification.parquet")
        put(f"{base}.probe_flips", int(r.probe_flips), "positions", "batch_invariance.parquet")
        put(f"{base}.verdict", r.verdict, "text", "qualification.parquet")
    for r in batch_invariance_summary(a.batch_invariance).itertuples():
        base = f"batch_invariance.{r.target}"
        put(f"{base}.max_abs_dlogit", r.max_abs_dlogit, "logit", "batch_invariance.parquet")
        put(f"{base}.max_tv", r.max_tv, "TV", "batch_invariance.parquet")
        put(f"{base}.argmax_flips", r.argmax_flips, "positions", "batch_invariance.parquet")
        put(f"{base}.positions", r.positions, "positions", "batch_invariance.parquet")


def certificate_numbers(a: StudyAnalysis, put) -> None:
    """'certificate.*': the PIT certificate over all sampled tokens, per pair, per workload,
    its target-only control and the two-sample permutation test (pit.parquet)."""
    c, src = a.certificate, a.sources
    for key in ("n_tokens", "ks_pvalue", "chi2_pvalue"):
        put(f"certificate.{key}", c[key], "", "pit.parquet")
    for key in ("detectable_tv_80", "detectable_tv_80_id_order"):  # from the calibration's power curve
        put(f"certificate.{key}", c[key], "", src["power"])
    put("certificate.rank_ks_pvalue", c["rank_order"]["ks_pvalue"], "", "pit.parquet")
    put("certificate.rank_chi2_pvalue", c["rank_order"]["chi2_pvalue"], "", "pit.parquet")
    put("certificate.rejected", c["rejected"], "bool", "pit.parquet")
    put("certificate.alpha", c["alpha"], "", "provenance.json")
    put("certificate.chi2_bins", CHI2_BINS, "bins", "pit.parquet")
    put("certificate.ratio_recorded", c.get("ratio_recorded", False), "bool", "pit.parquet")
    ratio = c.get("ratio_order") or {}
    put("certificate.ratio_ks_pvalue", ratio.get("ks_pvalue"), "", "pit.parquet")
    put("certificate.ratio_chi2_pvalue", ratio.get("chi2_pvalue"), "", "pit.parquet")
    for key in ("tests", "level", "min_pvalue"):
        put(f"certificate.{key}", c[key], "tests" if key == "tests" else "", "pit.parquet")
    put("certificate.min_pvalue_test", c["min_pvalue_test"], "text", "pit.parquet")
    for pair, res in c.get("per_pair", {}).items():
        base = f"certificate.pair.{pair}"
        put(f"{base}.n_tokens", res["n_tokens"], "tokens", "pit.parquet")
        for key, value in res["pvalues"].items():
            put(f"{base}.{key}", value, "", "pit.parquet")
        put(f"{base}.tests", res["tests"], "tests", "pit.parquet")
        put(f"{base}.level", res["level"], "", "pit.parquet")
        put(f"{base}.min_pvalue", res["min_pvalue"], "", "pit.parquet")
        put(f"{base}.min_pvalue_test", res["min_pvalue_test"], "text", "pit.parquet")
        put(f"{base}.rejected", res["rejected"], "bool", "pit.parquet")
    put("certificate.control_ks_pvalue", c["control_target_only"]["ks_pvalue"], "", "pit.parquet")
    put("certificate.control_n_tokens", c["control_target_only"]["n_tokens"], "tokens", "pit.parquet")
    for w, res in c["per_workload"].items():
        put(f"certificate.workload.{w}.n_tokens", res["n_tokens"], "tokens", "pit.parquet")
        put(f"certificate.workload.{w}.ks_pvalue", res["ks_pvalue"], "", "pit.parquet")
        put(f"certificate.workload.{w}.rank_ks_pvalue", c["per_workload_rank"][w]["ks_pvalue"], "", "pit.parquet")
    perm = c["two_sample_permutation"]
    put("certificate.permutation.prompts", perm["prompts"], "prompts", "pit.parquet")
    put("certificate.permutation.pvalue", perm["pvalue"], "", "pit.parquet")


def calibration_numbers(a: StudyAnalysis, put) -> None:
    """'calibration.<order>.*': the certificate's per-order calibration on the mock model
    (null rejection rate and each planted violation's)."""
    cal, cs = a.calibration, a.sources["calibration"]
    put("calibration.tokens_per_repetition", cal["tokens_per_repetition"], "tokens", cs)
    for order, res in cal["orders"].items():
        put(f"calibration.{order}.null_repetitions", res["null_repetitions"], "runs", cs)
        put(f"calibration.{order}.null_pvalues_ks_pvalue", res["null_pvalues_ks_pvalue"], "", cs)
        put(f"calibration.{order}.null_rejection_rate", res["null_rejection_rate"], "", cs)
        for name, v in res["violations"].items():
            if name.startswith("temperature_"):
                put("calibration.temperature_violation", float(name.split("_", 1)[1]), "x T", cs)
            put(f"calibration.{order}.{name}.rejection_rate", v["rejection_rate"], "", cs)
            put(f"calibration.{order}.{name}.repetitions", v["repetitions"], "runs", cs)


def level_numbers(a: StudyAnalysis, put) -> None:
    """'level1.*' (the rejection sampler against exact distributions) and 'level2.*' (the
    certificate on the mock model)."""
    src = a.sources
    put("level1.max_exact_error", a.level1["max_exact_error"], "probability", src["level1"])
    put("level1.min_chi2_pvalue", a.level1["min_chi2_pvalue"], "", src["level1"])
    put("level1.draws", a.level1["cases"][0]["draws"], "draws", src["level1"])
    put("level2.n_tokens", a.level2["n_tokens"], "tokens", src["level2"])
    put("level2.ks_pvalue", a.level2["ks_pvalue"], "", src["level2"])
    put("level2.rank_ks_pvalue", a.level2["rank_order"]["ks_pvalue"], "", src["level2"])
    if "ratio_order" in a.level2:
        put("level2.ratio_ks_pvalue", a.level2["ratio_order"]["ks_pvalue"], "", src["level2"])


def prediction_numbers(a: StudyAnalysis, put) -> None:
    """'prediction.*': P, reserved live runs equal to the prediction sealed before them,
    per verify path with the predictor chosen on discovery, and whether the seal preceded
    every reserved run (evidence.prediction)."""
    p, src = a.prediction, a.sources
    put("prediction.P_matched", p["P_matched"], "runs", src["prediction.P"])
    put("prediction.P_total", p["P_total"], "runs", src["prediction.P"])
    put("prediction.discovery_holds", p["discovery_holds"], "runs", src["prediction.discovery"])
    put("prediction.discovery_total", p["discovery_total"], "runs", src["prediction.discovery"])
    for path, c in p.get("per_path", {}).items():
        put(f"prediction.{path.replace('|', '.')}.matched", c["matched"], "runs", src["prediction.P"])
        put(f"prediction.{path.replace('|', '.')}.total", c["total"], "runs", src["prediction.P"])
    for path in p.get("paths", []):
        put(f"prediction.{path['target']}.{path['verify_mode']}.predictor", path["predictor"], "",
            src["prediction.discovery"])
    if p.get("first_reserved_run_at"):
        put("prediction.sealed_before_reserved_runs", int(p["sealed_at"] < p["first_reserved_run_at"]),
            "", src["prediction.P"])


def advise_numbers(a: StudyAnalysis, put) -> None:
    """'advise.*': per pair, advise's K, predicted speedup (with the loop model's interval
    and the micro model beside it), the realized speedup and the advice; 'advise.summary.wrong'
    counts advice the realized point estimate contradicts."""
    if a.advise is None:
        return
    src = a.sources
    enable = a.advise["enable"].astype(bool)
    wrong = (enable & (a.advise["realized_speedup"] < 1)) | (~enable & (a.advise["realized_speedup"] > 1))
    put("advise.summary.pairs", len(a.advise), "pairs", src["advise.realized"])
    put("advise.summary.wrong", int(wrong.sum()), "pairs", src["advise.realized"])
    for r in a.advise.itertuples():
        put(f"advise.{r.pair}.k", r.k, "K", src["advise.predicted"])
        put(f"advise.{r.pair}.predicted", r.predicted_speedup, "x", src["advise.predicted"])
        put(f"advise.{r.pair}.realized", r.realized_speedup, "x", src["advise.realized"])
        put(f"advise.{r.pair}.enable", bool(r.enable), "bool", src["advise.predicted"])
        if getattr(r, "model", None) == "loop":  # the loop model's interval, the micro model beside it
            put(f"advise.{r.pair}.predicted_low", r.predicted_low, "x", src["advise.predicted"])
            put(f"advise.{r.pair}.predicted_high", r.predicted_high, "x", src["advise.predicted"])
            put(f"advise.{r.pair}.micro_predicted", r.micro_predicted_speedup, "x", src["advise.predicted"])


LOOP_CONFIG_TERMS = ("draft_ratio", "verify_ratio", "residual_ms", "realized_over_model", "gap_target",
                     "gap_draft", "gap_verify", "gap_residual", "gap_committed", "explains")
LOOP_PAIR_TERMS = ("target_ratio", "draft_ratio", "verify_ratio", "residual_ms", "realized_over_model_min",
                   "realized_over_model_max", "gap_target", "gap_draft", "gap_verify", "gap_residual",
                   "gap_committed", "explains", "draft_round_overhead_ms", "draft_token_ms")


ADVISE_GAP_TERMS = ("predicted", "realized", "prompts", "probe_prompts", "target_factor", "acceptance_factor",
                    "round_factor", "explains")


def advise_gap_numbers(a: StudyAnalysis, put) -> None:
    """'advise_gap.<pair>.<config>.*': advise's loop-model prediction at each greedy fixed K
    of the grid, the grid's realized speedup on the reserved prompts, and the miss split
    into target-step, acceptance and round-cost factors (``analysis.advisegap``)."""
    g = a.advise_gap
    if g is None or g.empty:
        return
    for r in g.to_dict(orient="records"):
        for term in ADVISE_GAP_TERMS:
            unit = "prompts" if term.endswith("prompts") else "text" if term == "explains" else "x"
            put(f"advise_gap.{r['pair']}.{r['config']}.{term}", r[term], unit,
                "advise_rounds.parquet, rounds.parquet")


def headline_models(cfg: dict, put) -> None:
    """The headline pair's model files (as the config names them) and, where the study also
    times the draft's model as a target, that target's name (its speed is the draft's own)."""
    head = cfg["pairs"][0]
    target, draft = cfg["targets"][head["target"]], cfg.get("drafts", {}).get(head["draft"], {})
    put("headline.target", head["target"], "text", "provenance.json")
    put("headline.draft", head["draft"], "text", "provenance.json")
    put("headline.target_model", str(target.get("model")), "text", "provenance.json")
    put("headline.draft_model", str(draft.get("model", draft.get("kind"))), "text", "provenance.json")
    same = [name for name, t in cfg["targets"].items() if draft.get("model") and t.get("model") == draft["model"]
            and t.get("backend") == draft.get("backend")]
    if same:
        put("headline.draft_as_target", same[0], "text", "provenance.json")


def clock_numbers(a: StudyAnalysis, put) -> None:
    """The clock boundary: per greedy fixed-K configuration, the speculative / target-only
    prefill ratio and the speedup with prefill inside the clock, with its interval."""
    for r in a.end_to_end or []:
        if r["policy"] != "fixed" or r["temperature"] != 0:
            continue
        base = f"end_to_end.{r['pair']}.{r['config']}"
        put(f"{base}.prefill_ratio", a.prefill_ratio[(r["pair"], r["config"])], "x", "runs.parquet")
        put(f"{base}.gmean", r["gmean_speedup"], "x", "runs.parquet")
        put(f"{base}.ci_low", r["ci_low"], "x", "runs.parquet")
        put(f"{base}.ci_high", r["ci_high"], "x", "runs.parquet")
        put(f"{base}.verdict", verdict(r["ci_low"], r["ci_high"], indicative_set(a)), "text", "runs.parquet")


def loop_numbers(a: StudyAnalysis, put) -> None:
    """'loop.<pair>.*' and 'loop.<pair>.<config>.*': each in-loop cost over its isolated
    measurement (target step, draft step, verify call), the residual the micro model
    omits, realized / micro model and its split into one factor per term (see
    ``analysis.loopcost``), from rounds.parquet with runs.parquet and micro.parquet."""
    from ..analysis.loopcost import pair_summary
    lc = a.loop_costs
    if lc is None or lc.empty:
        return

    def unit(term: str) -> str:
        return {"explains": "text", "residual_ms": "ms", "draft_round_overhead_ms": "ms",
                "draft_token_ms": "ms"}.get(term, "x")
    for r in pair_summary(lc).to_dict(orient="records"):
        for term in LOOP_PAIR_TERMS:
            put(f"loop.{r['pair']}.{term}", r[term], unit(term), "rounds.parquet")
    for r in lc.to_dict(orient="records"):
        for term in LOOP_CONFIG_TERMS:
            put(f"loop.{r['pair']}.{r['config']}.{term}", r[term], unit(term), "rounds.parquet")


COVERAGE_SIMULATIONS = 1000  # Monte Carlo SE of a coverage near 0.95: about 0.7 points


def coverage_sizes(a: StudyAnalysis) -> dict[str, tuple[int, int]]:
    """The study sizes at which the paper states the intervals' simulated coverage:
    'all' (every prompt of a configuration) and 'workload' (the smallest workload), each
    as (prompts, repetitions per prompt and configuration)."""
    spec = a.runs[a.runs["path"] == "speculative"]
    if spec.empty:
        return {}
    reps = int(spec.groupby(["pair", "config", "prompt_id"]).size().max())
    per_workload = spec.groupby("workload")["prompt_id"].nunique()
    return {"all": (int(spec["prompt_id"].nunique()), reps), "workload": (int(per_workload.min()), reps)}


def rule_numbers(a: StudyAnalysis, put) -> None:
    """'calibration.rule.*': the certificate's whole rule (each of the six tests at
    alpha/6) recomputed from calibration.parquet's p-values per repetition, with exact
    Clopper-Pearson intervals on each rejection rate ('calibration.rule_without_ratio.*': the
    four-test rule at alpha/4 that a certificate without the ratio order applies); its detectable TV at 80% power from the rule's
    power curve in calibration.json, 'not recorded' (null) for a set calibrated before
    the rule had one."""
    from ..evidence.calibration import detectable_tv, rule_calibration
    from ..evidence.pit import RULE_TESTS
    alpha = float(a.calibration["alpha"])
    put("calibration.rule.tests", len(RULE_TESTS), "tests", "calibration.parquet")
    put("calibration.rule.level", alpha / len(RULE_TESTS), "", "calibration.parquet")
    put("calibration.rule.ci_level_pct", round(100 * _default("rule_calibration", "level")), "%",
        "calibration.parquet")
    put("calibration.rule_without_ratio.tests", len(RULE_TESTS) - 2, "tests", "calibration.parquet")
    for group, ratio in (("rule", True), ("rule_without_ratio", False)):
        for name, r in rule_calibration(a.calibration_table, alpha, ratio).items():
            for key in ("repetitions", "tokens_per_repetition", "rejection_rate", "ci_low", "ci_high"):
                unit = {"repetitions": "runs", "tokens_per_repetition": "tokens"}.get(key, "")
                put(f"calibration.{group}.{name}.{key}", r[key], unit, "calibration.parquet")
    curve = a.calibration.get("power_curve", {}).get("rule")
    put("calibration.rule.detectable_tv_80", detectable_tv(curve) if curve else None, "TV",
        a.sources.get("power", "calibration.json"))


def _default(function: str, parameter: str) -> float:
    """A level the analysis uses by default (the CI level, the power target), read from
    the function that applies it, so the paper prints the value the code used."""
    import inspect

    from ..analysis import statistics
    from ..evidence import calibration
    fn = getattr(statistics, function, None) or getattr(calibration, function)
    return inspect.signature(fn).parameters[parameter].default


VERIFY_B = 8  # the verify-cost ratio v(B)/v(1) the machines section compares (K = 7 drafts)


def verify_ratios(micro) -> "pd.DataFrame":
    """Per target: v(1) in ms and v(B)/v(1) at B = VERIFY_B (median of the micro repeats)."""
    t = micro[micro["role"] == "target"]
    v1 = t[t["B"] == 1].set_index("name")["median_ms"]
    vb = t[t["B"] == VERIFY_B].set_index("name")["median_ms"]
    names = [n for n in dict.fromkeys(t["name"]) if n in v1.index and n in vb.index]
    import pandas as pd
    return pd.DataFrame({"name": names, "v1_ms": [float(v1[n]) for n in names],
                         "ratio": [float(vb[n] / v1[n]) for n in names]})


def machine_numbers(analyses: dict[str, StudyAnalysis], shas: dict[str, str | None]) -> dict:
    """'machines.<study>.*': for a study frozen on two or more machines, which findings
    changed between them, each decided by the sets' own numbers: a pair's best-K verdict
    (by CI), whether its best-K CIs are disjoint, a target's batched qualification, and
    advise's verdict. Each number cites the manifests of every set it compares."""
    from .manifests import split_set
    by_study: dict[str, list[str]] = {}
    for set_id in analyses:
        study, machine = split_set(set_id)
        if machine:
            by_study.setdefault(study, []).append(set_id)
    out: dict[str, dict] = {}
    for study, sets in by_study.items():
        if len(sets) < 2:
            continue
        cite = [shas[x] for x in sets]

        def put(key, value, unit, source):
            out[f"machines.{study}.{key}"] = {"value": json_scalar(value), "unit": unit,
                                              "source": source, "manifest_sha256": cite}
        put("sets", ",".join(sets), "text", "manifest.json")
        best = {x: best_fixed(analyses[x]) for x in sets}
        for pair in [p for p in best[sets[0]] if all(p in best[x] for x in sets)]:
            rows = [best[x][pair] for x in sets]
            verdicts = {verdict(r["ci_low"], r["ci_high"]) for r in rows}
            put(f"{pair}.verdict_changed", len(verdicts) > 1, "bool", "runs.parquet")
            disjoint = max(r["ci_low"] for r in rows) > min(r["ci_high"] for r in rows)
            put(f"{pair}.best_ci_disjoint", bool(disjoint), "bool", "runs.parquet")
        quals = {x: qualification_summary(analyses[x].qualification) for x in sets}
        for r in quals[sets[0]].itertuples():
            same = [q[(q["target"] == r.target) & (q["verify_mode"] == r.verify_mode)] for q in quals.values()]
            if all(len(q) for q in same):
                put(f"qualification.{r.target}.{r.verify_mode}.changed",
                    len({bool(q["qualifies"].iloc[0]) for q in same}) > 1, "bool", "qualification.parquet")
        adv = {x: analyses[x].advise for x in sets}
        if all(v is not None for v in adv.values()):
            for pair in adv[sets[0]]["pair"]:
                enables = {bool(v[v["pair"] == pair]["enable"].iloc[0]) for v in adv.values() if (v["pair"] == pair).any()}
                put(f"advise.{pair}.changed", len(enables) > 1, "bool",
                    analyses[sets[0]].sources["advise.predicted"])
    return out


def compare(expected: dict, actual: dict, rel: float = 1e-9, check_source: bool = True) -> str | None:
    """The first key whose value, source or hash differs (or is missing), or None; the
    line names the key and the file its value is recomputed from."""
    for key in sorted(set(expected) | set(actual)):
        if key not in actual:
            return f"{key}: in numbers.json but not recomputed"
        if key not in expected:
            return f"{key}: recomputed but missing from numbers.json"
        e, v = expected[key]["value"], actual[key]["value"]
        given = actual[key].get("source") or "the records"
        if isinstance(e, float) or isinstance(v, float):
            if e is None or v is None:
                if e is not v:
                    return f"{key}: numbers.json has {e}, {given} gives {v}"
            elif not math.isclose(float(e), float(v), rel_tol=rel, abs_tol=1e-12):
                return f"{key}: numbers.json has {e}, {given} gives {v}"
        elif e != v:
            return f"{key}: numbers.json has {e!r}, {given} gives {v!r}"
        if check_source and expected[key].get("source") != actual[key].get("source"):
            return (f"{key}: numbers.json says it comes from {expected[key].get('source')}, "
                    f"it is computed from {actual[key].get('source')}")
        for field in ("sha256", "manifest_sha256"):
            if expected[key].get(field) != actual[key].get(field):
                return (f"{key}: numbers.json was computed from {expected[key].get('source')} with "
                        f"{field} {str(expected[key].get(field))[:24]}, which is now "
                        f"{str(actual[key].get(field))[:24]}")
    return None
