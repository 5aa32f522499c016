"""paper/build/numbers.json: every number the paper prints, as rows with named fields.

Each row is ``{set, group, <path fields>, <attributes>, metric, value, unit, source,
manifest_sha256}``: ``set`` the record set ('<study>@<machine>', or a bare '<study>' for
unfrozen results), ``group`` what kind of number it is (speedup, best, costs,
qualification, certificate, ...), the path fields that identify it within its group
(pair, config, workload, target, verify_mode, ...), attributes that describe it without
identifying it (a configuration's k, policy, verify_mode, temperature), and ``metric``.
The paper and the report select rows by these fields; the row's id, the key it is stored
under, is the set, the group, the path values and the metric joined by dots: built once
here, never split. ``source`` names the record file a number is computed from: a raw
record wherever the set holds one, the stage's summary file (calibration.json,
level1.json, level2.json, prediction.json, advise.parquet) only for a set frozen before
its raw record was written (see ``analysis.summaries``), and a code path for a level the
code fixes; ``manifest_sha256`` is the sha256 of the frozen set's manifest.json (null for
unfrozen results). 'machines.<study>.<...>' compare the machines a study was frozen on and
cite every manifest they read. Benchmark rows ('bench.<table>.<name>', see benchtables)
carry the sha256 of their JSON instead.
"""
from __future__ import annotations

import math

from ..analysis.analyze import (MIN_QUALIFICATION_RUNS, StudyAnalysis, batch_invariance_summary,
                                qualification_summary, target_only_speed)
from ..analysis.agreement import no_change_counts
from ..analysis.costs import micro_medians
from ..analysis.statistics import simulated_coverage, tied_with_best
from ..catalog import of_kind
from ..evidence.pit import CHI2_BINS
from ..records import json_scalar
from .manifests import split_set


INDICATIVE_BELOW_PCT = 90  # a set whose intervals cover less than this makes no claims
CONFIG_FIELDS = ("k", "policy", "verify_mode", "temperature")  # a configuration's attributes
ROW_FIELDS = {"set", "group", "metric", "value", "unit", "source", "manifest_sha256", "sha256"}


class Rows:
    """The rows of numbers.json under construction, each stored under its id (its set,
    group, path values and metric joined by dots); an id written twice is an error."""

    def __init__(self, set_id: str | None = None, manifest_sha256=None, **common):
        self.set, self.sha, self.common, self.out = set_id, manifest_sha256, common, {}

    def at(self, group: str, attrs: dict | None = None, **path):
        """A writer ``put(metric, value, unit, source)`` of the rows of ``group`` at
        ``path`` (its fields in id order), each row also carrying ``attrs``."""
        clash = ROW_FIELDS & (set(path) | set(attrs or {}))
        if clash:
            raise ValueError(f"numbers: {sorted(clash)} name a row's own fields, not a path or attribute")
        def put(metric: str, value, unit: str, source: str) -> None:
            parts = [self.set] if self.set else []
            row_id = ".".join(str(p) for p in (*parts, group, *path.values(), metric))
            if row_id in self.out:
                raise ValueError(f"numbers: two rows with the id {row_id}")
            row = {"set": self.set, "group": group, **path, **(attrs or {}), "metric": metric,
                   "value": json_scalar(value), "unit": unit, "source": source,
                   "manifest_sha256": self.sha, **self.common}
            self.out[row_id] = {k: v for k, v in row.items() if k != "set" or v is not None}
        return put


def config_attrs(r) -> dict:
    """A configuration's k, policy, verify mode and temperature from a row that has them."""
    get = r.get if isinstance(r, dict) else lambda k: getattr(r, k, None)
    return {f: json_scalar(get(f)) for f in CONFIG_FIELDS if get(f) is not None}


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
    return 100 * simulated_coverage(n, reps, COVERAGE_SIMULATIONS, method=a.interval_method) < INDICATIVE_BELOW_PCT


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
                     "ci_low": best["ci_low"], "ci_high": best["ci_high"], "config": best["config"]}
    return out


def summary_only(numbers: dict) -> dict[str, int]:
    """Per summary file, how many of ``numbers`` are computed from it (not from a raw
    record): the numbers the audit could only check against a summary."""
    summaries = of_kind("summary")
    out: dict[str, int] = {}
    for rec in numbers.values():
        if rec["source"] in summaries:
            out[rec["source"]] = out.get(rec["source"], 0) + 1
    return out


def study_numbers(a: StudyAnalysis, manifest_sha256: str | None, prefix: str | None = None) -> dict:
    """Every row of one record set (``prefix`` or the study's name as its set), each
    section written by one function below."""
    s = prefix or a.name
    rows = Rows(s, manifest_sha256)
    indicative = indicative_set(a)
    stats = rows.at("stats")
    stats("verdicts_indicative", indicative, "bool", "runs.parquet")
    stats("indicative_below_pct", INDICATIVE_BELOW_PCT, "%", "src/specproof/publish/numbers.py")
    rows.at("machine")("label", split_set(s)[1] or "this machine", "text", "manifest.json")

    def judge(lo, hi) -> str:
        return verdict(lo, hi, indicative)
    setup_numbers(a, rows)
    model_file_numbers(a, rows)
    bandwidth_numbers(a, rows)
    speed_numbers(a, rows, judge)
    cross_target_numbers(a, rows, judge)
    familywise_numbers(a, rows, judge)
    policy_numbers(a, rows)
    best_numbers(a, rows, judge)
    coverage_numbers(a, rows)
    machine_speed_numbers(a, rows)
    micro_numbers(a, rows)
    cost_numbers(a, rows)
    break_even_numbers(a, rows)
    loop_numbers(a, rows)
    advise_gap_numbers(a, rows)
    clock_numbers(a, rows, judge)
    agreement_numbers(a, rows)
    same_function_numbers(a, rows)
    acceptance_numbers(a, rows)
    qualification_numbers(a, rows)
    certificate_numbers(a, rows)
    calibration_numbers(a, rows)
    rule_numbers(a, rows)
    level_numbers(a, rows)
    prediction_numbers(a, rows)
    advise_numbers(a, rows)
    return rows.out


def bandwidth_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """machine.<threads>.bandwidth_gb_s: the memory bandwidth the provenance measured when
    the study started (STREAM Add, GB/s), per thread count; none for sets recorded before."""
    measured = (a.provenance.get("memory_bandwidth") or {}).get("threads") or {}
    for threads, gb_s in sorted(measured.items(), key=lambda t: int(t[0])):
        rows.at("machine", threads=int(threads))("bandwidth_gb_s", float(gb_s), "GB/s", "provenance.json")


def setup_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'machine.*', 'software.*', 'headline.*', 'workloads.*', 'runs.*', 'models.*': what
    ran where (provenance.json) and how much (runs.parquet)."""
    cpu, machine, software = a.provenance["cpu"], rows.at("machine"), rows.at("software")
    machine("cpu", cpu.get("model", "?"), "text", "provenance.json")
    machine("cores", cpu.get("affinity_cores", cpu.get("logical_cores")), "count", "provenance.json")
    machine("ram_gib", cpu.get("ram_gib"), "GiB", "provenance.json")
    machine("simd", " ".join(f for f in ("avx2", "avx512f", "amx_tile") if f in cpu.get("simd_flags", [])),
            "text", "provenance.json")
    for pkg in ("torch", "transformers", "llama-cpp-python"):
        software(pkg, a.provenance["packages"].get(pkg), "version", "provenance.json")
    software("git_commit", str(a.provenance.get("git", {}).get("commit") or "unknown")[:10], "text",
             "provenance.json")
    build = a.provenance.get("llama_cpp", {}).get("build") or {}
    software("llama_flags_chosen_by", build.get("chosen_by") or "fixed flags (before CPU-aware builds)",
             "text", "provenance.json")
    software("llama_cmake_args", build.get("cmake_args"), "text", "provenance.json")
    cfg = a.provenance["study"]["config"]
    headline_models(cfg, rows.at("headline"))
    for workload, n in a.runs.groupby("workload")["prompt_id"].nunique().items():
        rows.at("workloads", workload=workload)("prompts", int(n), "prompts", "runs.parquet")
    runs = rows.at("runs")
    runs("count", len(a.runs), "runs", "runs.parquet")
    # hosts that timed the runs (each block on one host, checked by analysis); 0: not recorded
    runs("hosts", int(a.runs["host"].nunique()) if "host" in a.runs else 0, "hosts", "runs.parquet")
    runs("prompts", a.runs["prompt_id"].nunique(), "prompts", "runs.parquet")
    runs("workloads", a.runs["workload"].nunique(), "workloads", "runs.parquet")
    runs("max_new_tokens", cfg["settings"]["max_new_tokens"], "tokens", "provenance.json")
    if "other_cpu_share" in a.runs:  # sets timed since specproof.load watched each run
        from ..load import BUSY_SHARE
        share = a.runs["other_cpu_share"].dropna()
        runs("watched", len(share), "runs", "runs.parquet")
        runs("busy", int((share > BUSY_SHARE).sum()), "runs", "runs.parquet")
        runs("max_other_cpu_share", float(share.max()) if len(share) else None, "share", "runs.parquet")
        runs("busy_share", BUSY_SHARE, "share", "src/specproof/load.py")
    rows.at("models")("targets", ", ".join(sorted({str(t.get("model")) for t in cfg["targets"].values()})),
                      "text", "provenance.json")


def model_file_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'target_model.<target>.model': each target's model as the config names it, and
    'model_file.<model>.*': the bytes, sha256 and tensors per storage type ('141 F32, 198 F16') of each
    model file the provenance recorded (a model made of one file; the bytes a decode step
    reads once per token, the KV cache aside)."""
    for name, spec in a.provenance["study"]["config"]["targets"].items():
        rows.at("target_model", target=name)("model", str(spec.get("model")), "text", "provenance.json")
    seen = set()
    for entry in (a.provenance.get("models") or {}).values():
        model, files = str((entry.get("spec") or {}).get("model")), entry.get("files") or []
        if len(files) != 1 or model in seen:
            continue
        seen.add(model)
        put = rows.at("model_file", model=model)
        put("bytes", int(files[0]["bytes"]), "bytes", "provenance.json")
        put("sha256", files[0]["sha256"], "text", "provenance.json")
        types = sorted((files[0].get("tensor_types") or {}).items())
        put("tensor_types", ", ".join(f"{n} {t}" for t, n in types), "tensors per type", "provenance.json")


def headline_models(cfg: dict, put) -> None:
    """The headline pair, its model files (as the config names them) and, where the study
    also times the draft's model as a target, that target's name (its speed is the draft's
    own)."""
    head = cfg["pairs"][0]
    target, draft = cfg["targets"][head["target"]], cfg.get("drafts", {}).get(head["draft"], {})
    put("pair", f"{head['target']}+{head['draft']}", "text", "provenance.json")
    put("target", head["target"], "text", "provenance.json")
    put("draft", head["draft"], "text", "provenance.json")
    put("target_model", str(target.get("model")), "text", "provenance.json")
    put("draft_model", str(draft.get("model", draft.get("kind"))), "text", "provenance.json")
    same = draft_as_target(cfg)
    if same:
        put("draft_as_target", same, "text", "provenance.json")


def draft_as_target(cfg: dict) -> str | None:
    """The target that runs the headline draft's model file on the draft's backend (its
    target-only speed is the draft's own), or None when the study times no such target."""
    head = cfg["pairs"][0]
    draft = cfg.get("drafts", {}).get(head["draft"], {})
    same = [name for name, t in cfg["targets"].items() if draft.get("model") and t.get("model") == draft["model"]
            and t.get("backend") == draft.get("backend")]
    return same[0] if same else None


def speed_numbers(a: StudyAnalysis, rows: Rows, judge) -> None:
    """'target_only.*', 'speedup.<pair>.<config>.<workload>.*' (geometric mean over prompts,
    its CI and verdict), the same per category where a workload holds several
    ('speedup_category.*'), the greedy fixed-K grid ('greedy.*') and its verdict counts."""
    for r in target_only_speed(a.runs).itertuples():
        rows.at("target_only", target=r.target)("tokens_per_s", r.tokens_per_s, "tokens/s", "runs.parquet")
    for r in a.speedups:
        put = rows.at("speedup", config_attrs(r), pair=r["pair"], config=r["config"], workload=r["workload"])
        put("gmean", r["gmean_speedup"], "x", "runs.parquet")
        put("ci_low", r["ci_low"], "x", "runs.parquet")
        put("ci_high", r["ci_high"], "x", "runs.parquet")
        put("verdict", judge(r["ci_low"], r["ci_high"]), "text", "runs.parquet")
    kept_numbers(a, rows)
    tied_numbers(a, rows)
    for r in a.category_speedups or []:
        put = rows.at("speedup_category", config_attrs(r), pair=r["pair"], config=r["config"],
                      workload=r["workload"], category=r["category"])
        put("gmean", r["gmean_speedup"], "x", "runs.parquet")
        put("ci_low", r["ci_low"], "x", "runs.parquet")
        put("ci_high", r["ci_high"], "x", "runs.parquet")
        put("prompts", r["prompts"], "prompts", "prompts.jsonl")
        put("verdict", judge(r["ci_low"], r["ci_high"]), "text", "runs.parquet")
    greedy_fixed = [r for r in a.speedups if r["workload"] == "all" and r["policy"] == "fixed"
                    and r["temperature"] == 0]
    for r in greedy_fixed:  # the grid, one row per K (the paper lists it)
        rows.at("greedy", config_attrs(r), pair=r["pair"], config=r["config"])("k", r["k"], "K", "runs.parquet")
    for pair in dict.fromkeys(r["pair"] for r in greedy_fixed):
        rows.at("greedy", pair=pair)("count", sum(r["pair"] == pair for r in greedy_fixed), "configurations",
                                     "runs.parquet")
    verdicts = [judge(r["ci_low"], r["ci_high"]) for r in greedy_fixed]
    put = rows.at("summary", configs="greedy_fixed")
    put("count", len(greedy_fixed), "configurations", "runs.parquet")
    for v in ("faster", "slower", "unresolved", "indicative (faster)", "indicative (slower)"):
        put(v.replace("indicative (", "indicative_").rstrip(")"), verdicts.count(v), "configurations",
            "runs.parquet")


def cross_target_numbers(a: StudyAnalysis, rows: Rows, judge) -> None:
    """'cross_target.<pair>.<config>.<other>.*': a greedy speculative configuration's speed
    over the target-only speed of another storage of its target's network (``other``),
    geometric mean over prompts with its interval and verdict
    (``statistics.cross_target_stats``): speculating on one file against decoding the
    other alone."""
    for r in a.cross_target or []:
        put = rows.at("cross_target", config_attrs(r), pair=r["pair"], config=r["config"], other=r["other"])
        put("gmean", r["gmean_speedup"], "x", "runs.parquet")
        put("ci_low", r["ci_low"], "x", "runs.parquet")
        put("ci_high", r["ci_high"], "x", "runs.parquet")
        put("prompts", r["prompts"], "prompts", "runs.parquet")
        put("verdict", judge(r["ci_low"], r["ci_high"]), "text", "runs.parquet")


def tied_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'best_set.<pair>.<config>.*': each greedy configuration (fixed K and policies)
    against its pair's best fixed K, paired over prompts (``statistics.tied_with_best``:
    ratio, interval, tied), and 'best_set.<pair>.ks', the fixed K whose paired interval
    covers 1: "the best K" as a set."""
    tied = tied_with_best(a.costs)
    for r in tied:
        put = rows.at("best_set", {"k": r["k"], "policy": r["policy"]}, pair=r["pair"], config=r["config"])
        put("ratio", r["ratio"], "x", "runs.parquet")
        put("ci_low", r["ci_low"], "x", "runs.parquet")
        put("ci_high", r["ci_high"], "x", "runs.parquet")
        put("tied", r["tied"], "bool", "runs.parquet")
    for pair in dict.fromkeys(r["pair"] for r in tied):
        rows.at("best_set", pair=pair)("ks", sorted(r["k"] for r in tied if r["pair"] == pair and r["tied"] and r["policy"] == "fixed"),
                                       "list", "runs.parquet")


def kept_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'speedup.<pair>.<config>.<workload>.{Q_prompts,H_prompts,kept_of}' for every greedy
    speculative configuration: the prompts on which all its runs' ids (Q) and texts (H)
    equal the sealed reference, of how many it ran (``agreement.kept_by_config``), so every
    speed stands beside whether that configuration kept the output."""
    if a.kept is None:
        return
    attrs = {(r["pair"], r["config"]): config_attrs(r) for r in a.speedups}
    for r in a.kept.itertuples():
        put = rows.at("speedup", attrs.get((r.pair, r.config), {}), pair=r.pair, config=r.config, workload=r.workload)
        put("Q_prompts", int(r.Q_prompts), "prompts", "runs.parquet")
        put("H_prompts", int(r.H_prompts), "prompts", "runs.parquet")
        put("kept_of", int(r.prompts), "prompts", "runs.parquet")


def familywise_numbers(a: StudyAnalysis, rows: Rows, judge) -> None:
    """'speedup.<pair>.<config>.<workload>.fw_*' (each interval of the speedup table at the
    Bonferroni level over all of them, ``statistics.familywise_intervals``) and
    'familywise.*': the family's size and level, and per scope ('all': the rows over all
    prompts; 'kinds': the per-workload rows) how many verdicts are decided (faster or
    slower) at 95% and at the family-wise level. Nothing for a set without them."""
    if not a.familywise:
        return
    nominal = {"all": 0, "kinds": 0}
    held = dict(nominal)
    for r, fw in zip(a.speedups, a.familywise):
        put = rows.at("speedup", config_attrs(r), pair=r["pair"], config=r["config"], workload=r["workload"])
        put("fw_ci_low", fw["fw_ci_low"], "x", "runs.parquet")
        put("fw_ci_high", fw["fw_ci_high"], "x", "runs.parquet")
        fw_verdict = judge(fw["fw_ci_low"], fw["fw_ci_high"])
        put("fw_verdict", fw_verdict, "text", "runs.parquet")
        scope = "all" if r["workload"] == "all" else "kinds"
        nominal[scope] += judge(r["ci_low"], r["ci_high"]) in ("faster", "slower")
        held[scope] += fw_verdict in ("faster", "slower")
    put = rows.at("familywise")
    put("intervals", len(a.familywise), "intervals", "runs.parquet")
    put("level_pct", 100 * a.familywise[0]["fw_level"], "%", "src/specproof/analysis/statistics.py")
    for scope in nominal:
        put(f"{scope}_decided", nominal[scope], "intervals", "runs.parquet")
        put(f"{scope}_decided_fw", held[scope], "intervals", "runs.parquet")


def policy_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'policy.<pair>.<policy>.*': each greedy policy's speedup and CI, its K_max, and the
    mean K it drafted per round (sum of drafted / sum of rounds over its runs)."""
    drafted = a.costs.groupby(["pair", "config"])[["drafted", "rounds"]].sum()
    for r in a.speedups:
        if r["workload"] == "all" and r["policy"] != "fixed" and r["temperature"] == 0:
            put = rows.at("policy", {"config": r["config"], **config_attrs(r)}, pair=r["pair"], policy=r["policy"])
            put("k_max", r["k"], "K", "runs.parquet")
            put("gmean", r["gmean_speedup"], "x", "runs.parquet")
            put("ci_low", r["ci_low"], "x", "runs.parquet")
            put("ci_high", r["ci_high"], "x", "runs.parquet")
            if (r["pair"], r["config"]) in drafted.index:
                d = drafted.loc[(r["pair"], r["config"])]
                put("mean_k", float(d["drafted"] / d["rounds"]) if d["rounds"] else None,
                    "drafts per round", "rounds.parquet")


def pair_roles(cfg: dict) -> dict[str, dict]:
    """Per pair of the study's config ('<target>+<draft>'): its target, its draft and its
    role in the study, so the paper names a pair by what it is for, never by its id:
    'headline' (the first pair), 'draft_as_target' (the headline draft's model timed as a
    target), 'free_draft' (a draft that runs no model) or 'model_draft' (another model)."""
    own = draft_as_target(cfg)
    out = {}
    for i, p in enumerate(cfg["pairs"]):
        draft = cfg.get("drafts", {}).get(p["draft"], {})
        role = ("headline" if i == 0 else "draft_as_target" if p["target"] == own
                else "free_draft" if draft.get("kind") == "ngram" else "model_draft")
        out[f"{p['target']}+{p['draft']}"] = {"role": role, "target": p["target"], "draft": p["draft"]}
    return out


def best_numbers(a: StudyAnalysis, rows: Rows, judge) -> None:
    """'best.<pair>.*' (the best greedy fixed K over all prompts; each row also carries its
    pair's target, draft and role, pair_roles) and 'best_reserved.<pair>.*' (K chosen on
    discovery prompts, reported on the reserved ones)."""
    roles = pair_roles(a.provenance["study"]["config"])
    for pair, b in best_fixed(a).items():
        put = rows.at("best", {"config": b["config"], **roles.get(pair, {})}, pair=pair)
        put("k", b["k"], "K", "runs.parquet")
        put("speedup", b["speedup"], "x", "runs.parquet")
        put("ci_low", b["ci_low"], "x", "runs.parquet")
        put("ci_high", b["ci_high"], "x", "runs.parquet")
        put("verdict", judge(b["ci_low"], b["ci_high"]), "text", "runs.parquet")
    for pair, b in a.best_reserved.items():
        put = rows.at("best_reserved", pair=pair)
        put("k", b["k"], "K", "runs.parquet")
        put("gmean", b["gmean_speedup"], "x", "runs.parquet")
        put("ci_low", b["ci_low"], "x", "runs.parquet")
        put("ci_high", b["ci_high"], "x", "runs.parquet")
        put("verdict", judge(b["ci_low"], b["ci_high"]), "text", "runs.parquet")
        put("discovery_gmean", b["discovery_gmean"], "x", "runs.parquet")
        put("discovery_prompts", b["discovery_prompts"], "prompts", "prompts.jsonl")
        put("prompts", b["prompts"], "prompts", "prompts.jsonl")


def coverage_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'stats.coverage.<stratum>.*': the intervals' simulated coverage at the set's size;
    the CI level and the calibration's power target as the code applies them."""
    for stratum, (n, reps) in coverage_sizes(a).items():
        put = rows.at("stats.coverage", stratum=stratum)
        put("prompts", n, "prompts", "runs.parquet")
        put("repetitions", reps, "runs", "runs.parquet")
        put("actual_pct", 100 * simulated_coverage(n, reps, COVERAGE_SIMULATIONS, method=a.interval_method), "%",
            "runs.parquet")
    rows.at("stats.coverage")("simulations", COVERAGE_SIMULATIONS, "studies", "runs.parquet")
    selection_coverage_numbers(a, rows)
    rows.at("stats")("ci_level_pct", round(100 * _default("two_stage_ci", "level")), "%",
                     "src/specproof/analysis/statistics.py")
    rows.at("stats")("interval_method", a.interval_method, "text", "provenance.json")
    rows.at("calibration")("power_pct", round(100 * _default("detectable_tv", "target_power")), "%",
                           "src/specproof/evidence/calibration.py")


SELECTION_SEEDS = (13, 14, 15, 16, 17)  # the selection's coverage is pooled over these


def selection_coverage_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'stats.coverage.selection.*': the simulated coverage of the 'best K' procedure at the
    headline pair's size (K chosen on its discovery prompts, reported on its reserved ones,
    over its greedy K grid; ``simulated_selection_coverage``) with the set's interval,
    pooled over ``SELECTION_SEEDS`` with its 95% Clopper-Pearson Monte Carlo interval, and
    the lowest and highest seed's; 'stats.coverage.selection_t.*' the same for the t
    interval when the set's is another."""
    head = a.provenance["study"]["config"]["pairs"][0]
    b = a.best_reserved.get(f"{head['target']}+{head['draft']}")
    grid = [r for r in a.speedups if r["pair"] == f"{head['target']}+{head['draft']}" and r["workload"] == "all"
            and r["policy"] == "fixed" and r["temperature"] == 0]
    if not b or len(grid) < 2:
        return
    from ..analysis.statistics import SELECTION_THETAS
    size = (int(b["discovery_prompts"]), int(b["prompts"]), min(len(grid), len(SELECTION_THETAS)))
    put = rows.at("stats.coverage", stratum="selection")
    for name, value in zip(("discovery_prompts", "reserved_prompts", "configurations"), size):
        put(name, value, "count", "runs.parquet")
    put("seeds", len(SELECTION_SEEDS), "seeds", "src/specproof/publish/numbers.py")
    put("simulations", _default("simulated_selection_coverage", "simulations"), "studies per seed",
        "src/specproof/analysis/statistics.py")
    put("studies", len(SELECTION_SEEDS) * _default("simulated_selection_coverage", "simulations"), "studies",
        "src/specproof/analysis/statistics.py")
    _selection_coverage(size, a.interval_method, put)
    if a.interval_method != "t":
        _selection_coverage(size, "t", rows.at("stats.coverage", stratum="selection_t"))


def _selection_coverage(size: tuple[int, int, int], method: str, put) -> None:
    """``actual_pct`` pooled over SELECTION_SEEDS, ``mc_low_pct``/``mc_high_pct`` its
    Clopper-Pearson 95% interval (scipy.stats.binomtest), ``actual_pct_min``/``_max`` over
    the seeds, for ``method``'s interval."""
    from scipy import stats as st

    from ..analysis.statistics import simulated_selection_coverage
    n = int(_default("simulated_selection_coverage", "simulations"))
    hits = [round(n * simulated_selection_coverage(*size, seed=seed, method=method)) for seed in SELECTION_SEEDS]
    ci = st.binomtest(sum(hits), n * len(hits)).proportion_ci(0.95, method="exact")
    put("method", method, "text", "src/specproof/analysis/statistics.py")
    put("actual_pct", 100 * sum(hits) / (n * len(hits)), "%", "runs.parquet")
    put("mc_low_pct", 100 * ci.low, "%", "runs.parquet")
    put("mc_high_pct", 100 * ci.high, "%", "runs.parquet")
    put("actual_pct_min", 100 * min(hits) / n, "%", "runs.parquet")
    put("actual_pct_max", 100 * max(hits) / n, "%", "runs.parquet")


def machine_speed_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'headline.*' in tokens/s, 'verify.*': v(1) in ms, v(B)/v(1) at B = VERIFY_B, and v(1)
    over the same target's median per-token time in the timed runs (micro.parquet beside
    runs.parquet: far from 1, the micro-benchmark did not measure what the runs saw)."""
    speed = target_only_speed(a.runs).set_index("target")["tokens_per_s"]
    cfg = a.provenance["study"]["config"]
    head, best = cfg["pairs"][0], best_fixed(a)
    head_pair, headline = f"{head['target']}+{head['draft']}", rows.at("headline")
    if len(speed) and head_pair in best and head["target"] in speed:
        # the headline speedup in absolute terms, beside the fastest target-only backend
        headline("best_tokens_per_s", best[head_pair]["speedup"] * speed[head["target"]], "tokens/s", "runs.parquet")
        headline("fastest_target_only", str(speed.idxmax()), "text", "runs.parquet")
        headline("fastest_target_only_tokens_per_s", float(speed.max()), "tokens/s", "runs.parquet")
    same = draft_as_target(cfg)
    if same in speed and head["target"] in speed:  # the draft's model decoding alone, over the target alone
        headline("draft_speed_ratio", float(speed[same] / speed[head["target"]]), "x", "runs.parquet")
    rows.at("verify")("b", VERIFY_B, "positions", "micro.parquet")
    for r in verify_ratios(a.micro).itertuples():
        put = rows.at("verify", target=r.name)
        put("ratio", r.ratio, "x", "micro.parquet")
        put("v1_ms", r.v1_ms, "ms", "micro.parquet")
        if r.name in speed:
            put("v1_over_run_step", r.v1_ms * speed[r.name] / 1000, "x", "micro.parquet, runs.parquet")


def micro_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'micro.<role>.<name>.*' from ``costs.micro_medians``: the fewest timed samples of
    any call size; for a target the call sizes whose median fell below the next smaller
    size's (``dips``), those whose intervals are disjoint there (``dips_resolved``: the
    kernels, not noise) and the widest interval's half-width over its median (null when
    too few samples give an interval); for a draft its step's median and interval, ms."""
    level = _default("two_stage_ci", "level")
    for (role, name), g in micro_medians(a.micro, level).groupby(["role", "name"], sort=False):
        put = rows.at("micro", role=role, name=name)
        put("samples", int(g["n"].min()), "samples", "micro.parquet")
        if role == "target":
            put("dips", int(g["dip"].sum()), "call sizes", "micro.parquet")
            put("dips_resolved", int(g["dip_resolved"].sum()), "call sizes", "micro.parquet")
            put("ci_halfwidth_max", float(((g["ci_high"] - g["ci_low"]) / 2 / g["median_ms"]).max(skipna=False)),
                "of the median", "micro.parquet")
        else:
            step = g.iloc[0]
            for metric in ("median_ms", "ci_low", "ci_high"):
                put(metric, float(step[metric]), "ms", "micro.parquet")


def cost_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'costs.<pair>.<config>.*': the complete-cost decomposition per committed token, in
    target-token costs, and the speedups it implies (analysis.costs)."""
    for r in a.config_costs.itertuples():
        put = rows.at("costs", config_attrs(r), pair=r.pair, config=r.config)
        for term in ("D_real", "R_target", "X"):
            put(term, getattr(r, term), "target-token costs per committed token", "rounds.parquet")
        for term in ("S_measured", "S_no_residual", "S_no_draft", "S_model", "realized_over_model",
                     "mean_accepted", "max_identity_residual"):
            put(term, getattr(r, term), "x" if term.startswith(("S_", "real")) else "", "rounds.parquet")


def break_even_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'breakeven.<pair>.<config>.*' per greedy fixed-K configuration
    (``breakeven.map_points``; ``draft_timed``: the draft step from the micro-benchmark or,
    for a drafter without a model, from the runs' rounds): the verify slope s_K and draft
    ratio r (target steps), their sum (the marginal cost per drafted position), the
    break-even cost b_K, the model speedup and realized / model (realized: geometric mean
    over prompts)."""
    from ..analysis.breakeven import map_points
    for r in map_points(a.config_costs, a.micro, a.speedups).to_dict(orient="records"):
        attrs = {"k": r["k"], "target": r["target"], "draft": r["draft"], "draft_timed": r["draft_timed"]}
        put = rows.at("breakeven", attrs, pair=r["pair"], config=r["config"])
        draft_from = "micro.parquet" if r["draft_timed"] == "isolated" else "rounds.parquet"
        for term, source in (("verify_slope", "micro.parquet"), ("draft_ratio", draft_from),
                             ("marginal_cost", draft_from), ("break_even_cost", "rounds.parquet")):
            put(term, r[term], "target steps", source)
        put("S_model", r["S_model"], "x", "rounds.parquet")
        put("realized_over_model", r["realized_over_model"], "x", "runs.parquet")


def agreement_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'agreement.<source>.<target>.<path>.<verify_mode>.*': H and Q counts per path."""
    for r in a.agreement_counts.itertuples():
        put = rows.at("agreement", runs_of=r.source, target=r.target, path=r.path, verify_mode=r.verify_mode)
        put("Q_matched", r.Q_matched, "runs", "runs.parquet")
        put("H_matched", r.H_matched, "runs", "runs.parquet")
        put("total", r.total, "runs", "runs.parquet")


def same_function_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'same_function.<target_a>.<target_b>.*': for two targets of one tokenizer, the
    shared prompts and on how many their sealed greedy ids and texts are equal
    (``agreement.same_function``)."""
    if a.same_function is None:
        return
    for r in a.same_function.itertuples():
        put = rows.at("same_function", target_a=r.target_a, target_b=r.target_b)
        put("prompts", int(r.prompts), "prompts", "reference.parquet")
        put("ids_equal", int(r.ids_equal), "prompts", "reference.parquet")
        put("text_equal", int(r.text_equal), "prompts", "reference.parquet")


def acceptance_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'acceptance.<pair>.<config>.<position>.*' for every greedy fixed-K configuration:
    the acceptance at each drafted position (mean over prompts of each prompt's pooled
    alpha_i) and its bootstrap interval (``statistics.acceptance_stats``)."""
    attrs = {(r["pair"], r["config"]): config_attrs(r) for r in a.speedups if r["workload"] == "all"}
    for r in a.acceptance:
        at = attrs.get((r["pair"], r["config"]), {})
        if at.get("policy") != "fixed" or at.get("temperature") != 0:
            continue
        put = rows.at("acceptance", at, pair=r["pair"], config=r["config"], position=int(r["position"]))
        for metric in ("alpha", "ci_low", "ci_high"):
            put(metric, r[metric], "", "rounds.parquet")


QUALIFICATION_CI = 0.95  # exact (Clopper-Pearson) interval on the share of changed outputs


def qualification_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'qualification.<target>.<mode>.*' (Q over the reserved runs: matched, changed = total
    - matched with its exact interval as a share of runs; over distinct prompts: prompts and
    changed_prompts, those with some changed run; the verdict; the
    per-token rate of first changes, ``analysis.agreement.change_rate``),
    'batch_invariance.<target>.*' (the logit probe)."""
    from scipy.stats import binomtest
    cfg = a.provenance["study"]["config"]
    min_runs = int(cfg.get("qualification", {}).get("min_runs", MIN_QUALIFICATION_RUNS))
    rows.at("qualification")("min_runs", min_runs, "runs", "provenance.json")
    if cfg.get("qualification", {}).get("k") is not None:  # the K of the qualification's speculative paths
        rows.at("qualification")("k", int(cfg["qualification"]["k"]), "K", "provenance.json")
    for r in qualification_summary(a.qualification, a.batch_invariance, min_runs).itertuples():
        put = rows.at("qualification", target=r.target, verify_mode=r.verify_mode)
        put("matched", r.matched, "runs", "qualification.parquet")
        put("changed", r.total - r.matched, "runs", "qualification.parquet")
        if r.total:
            changed = binomtest(int(r.total - r.matched), int(r.total)).proportion_ci(QUALIFICATION_CI, "exact")
            put("changed_ci_low", changed.low, "share", "qualification.parquet")
            put("changed_ci_high", changed.high, "share", "qualification.parquet")
        put("total", r.total, "runs", "qualification.parquet")
        put("prompts", int(r.prompts), "prompts", "qualification.parquet")
        put("changed_prompts", int(r.changed_prompts), "prompts", "qualification.parquet")
        put("qualifies", bool(r.qualifies), "bool", "qualification.parquet")
        put("probe_flips", int(r.probe_flips), "positions", "batch_invariance.parquet")
        put("verdict", r.verdict, "text", "qualification.parquet")
    for r in a.change_rate.itertuples() if a.change_rate is not None else ():
        put = rows.at("qualification", target=r.target, verify_mode=r.verify_mode)
        put("tokens_compared", int(r.tokens), "tokens", "qualification.parquet")
        for metric, value in (("change_rate", r.rate), ("change_rate_ci_low", r.ci_low),
                              ("change_rate_ci_high", r.ci_high)):
            put(metric, float(value), "first changes per token", "qualification.parquet")
    for r in batch_invariance_summary(a.batch_invariance).itertuples():
        put = rows.at("batch_invariance", target=r.target)
        put("max_abs_dlogit", r.max_abs_dlogit, "logit", "batch_invariance.parquet")
        put("max_tv", r.max_tv, "TV", "batch_invariance.parquet")
        put("argmax_flips", r.argmax_flips, "positions", "batch_invariance.parquet")
        put("positions", r.positions, "positions", "batch_invariance.parquet")


def certificate_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'certificate.*': the PIT certificate over all sampled tokens, per pair, per workload,
    its target-only control and the two-sample permutation test (pit.parquet)."""
    c, src, put = a.certificate, a.sources, rows.at("certificate")
    for key in ("n_tokens", "ks_pvalue", "chi2_pvalue"):
        put(key, c[key], "", "pit.parquet")
    for key in ("detectable_tv_80", "detectable_tv_80_id_order"):  # from the calibration's power curve
        put(key, c[key], "", src["power"])
    put("rank_ks_pvalue", c["rank_order"]["ks_pvalue"], "", "pit.parquet")
    put("rank_chi2_pvalue", c["rank_order"]["chi2_pvalue"], "", "pit.parquet")
    put("rejected", c["rejected"], "bool", "pit.parquet")
    put("alpha", c["alpha"], "", "provenance.json")
    put("chi2_bins", CHI2_BINS, "bins", "pit.parquet")
    put("ratio_recorded", c.get("ratio_recorded", False), "bool", "pit.parquet")
    ratio = c.get("ratio_order") or {}
    put("ratio_ks_pvalue", ratio.get("ks_pvalue"), "", "pit.parquet")
    put("ratio_chi2_pvalue", ratio.get("chi2_pvalue"), "", "pit.parquet")
    for key in ("tests", "level", "min_pvalue"):
        put(key, c[key], "tests" if key == "tests" else "", "pit.parquet")
    put("min_pvalue_test", c["min_pvalue_test"], "text", "pit.parquet")
    for pair, res in c.get("per_pair", {}).items():
        pp = rows.at("certificate.pair", pair=pair)
        pp("n_tokens", res["n_tokens"], "tokens", "pit.parquet")
        for key, value in res["pvalues"].items():
            pp(key, value, "", "pit.parquet")
        for key in ("tests", "level", "min_pvalue", "min_pvalue_test", "rejected"):
            pp(key, res[key], {"tests": "tests", "min_pvalue_test": "text", "rejected": "bool"}.get(key, ""),
               "pit.parquet")
    put("control_ks_pvalue", c["control_target_only"]["ks_pvalue"], "", "pit.parquet")
    put("control_n_tokens", c["control_target_only"]["n_tokens"], "tokens", "pit.parquet")
    for w, res in c["per_workload"].items():
        pw = rows.at("certificate.workload", workload=w)
        pw("n_tokens", res["n_tokens"], "tokens", "pit.parquet")
        pw("ks_pvalue", res["ks_pvalue"], "", "pit.parquet")
        pw("rank_ks_pvalue", c["per_workload_rank"][w]["ks_pvalue"], "", "pit.parquet")
    perm = c["two_sample_permutation"]
    rows.at("certificate.permutation")("prompts", perm["prompts"], "prompts", "pit.parquet")
    rows.at("certificate.permutation")("pvalue", perm["pvalue"], "", "pit.parquet")


def calibration_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'calibration.<order>.*': the certificate's per-order calibration on the mock model
    (null rejection rate and each planted violation's); the temperature factor of the
    temperature violation as the calibration code plants it."""
    from ..evidence.calibration import TEMPERATURE_VIOLATION
    cal, cs = a.calibration, a.sources["calibration"]
    rows.at("calibration")("tokens_per_repetition", cal["tokens_per_repetition"], "tokens", cs)
    rows.at("calibration")("temperature_violation", TEMPERATURE_VIOLATION, "x T",
                           "src/specproof/evidence/calibration.py")
    for order, res in cal["orders"].items():
        put = rows.at("calibration", order=order)
        put("null_repetitions", res["null_repetitions"], "runs", cs)
        put("null_pvalues_ks_pvalue", res["null_pvalues_ks_pvalue"], "", cs)
        put("null_rejection_rate", res["null_rejection_rate"], "", cs)
        for name, v in res["violations"].items():
            pv = rows.at("calibration", order=order, violation=name)
            pv("rejection_rate", v["rejection_rate"], "", cs)
            pv("repetitions", v["repetitions"], "runs", cs)


def level_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'level1.*' (the rejection sampler against exact distributions) and 'level2.*' (the
    certificate on the mock model)."""
    src, l1, l2 = a.sources, rows.at("level1"), rows.at("level2")
    l1("max_exact_error", a.level1["max_exact_error"], "probability", src["level1"])
    l1("min_chi2_pvalue", a.level1["min_chi2_pvalue"], "", src["level1"])
    l1("draws", a.level1["cases"][0]["draws"], "draws", src["level1"])
    l2("n_tokens", a.level2["n_tokens"], "tokens", src["level2"])
    l2("ks_pvalue", a.level2["ks_pvalue"], "", src["level2"])
    l2("rank_ks_pvalue", a.level2["rank_order"]["ks_pvalue"], "", src["level2"])
    if "ratio_order" in a.level2:
        l2("ratio_ks_pvalue", a.level2["ratio_order"]["ks_pvalue"], "", src["level2"])


def prediction_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'prediction.*': P, reserved live runs equal to the prediction sealed before them,
    per verify path with the predictor chosen on discovery beside the trivial prediction
    "the path changes nothing" scored on the same runs (``no_change_matched``), and
    whether the seal preceded every reserved run (evidence.prediction)."""
    p, src, put = a.prediction, a.sources, rows.at("prediction")
    put("P_matched", p["P_matched"], "runs", src["prediction.P"])
    put("P_total", p["P_total"], "runs", src["prediction.P"])
    put("discovery_holds", p["discovery_holds"], "runs", src["prediction.discovery"])
    put("discovery_total", p["discovery_total"], "runs", src["prediction.discovery"])
    per_path = p.get("per_path", {})
    no_change = no_change_counts(a.agreement, p.get("live", []))
    for path in p.get("paths", []):
        at = rows.at("prediction", target=path["target"], verify_mode=path["verify_mode"])
        counts = per_path.get(f"{path['target']}|{path['verify_mode']}")  # the key prediction.json writes
        if counts:
            at("matched", counts["matched"], "runs", src["prediction.P"])
            at("total", counts["total"], "runs", src["prediction.P"])
        trivial = no_change.get((path["target"], path["verify_mode"]))
        if trivial:
            at("no_change_matched", trivial["matched"], "runs", "qualification.parquet")
        at("predictor", path["predictor"], "", src["prediction.discovery"])
    if p.get("first_reserved_run_at"):
        put("sealed_before_reserved_runs", int(p["sealed_at"] < p["first_reserved_run_at"]),
            "", src["prediction.P"])


def advise_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'advise.*': per pair, advise's K, predicted speedup (with the loop model's interval
    and the micro model beside it), the realized speedup and the advice; 'advise.summary'
    counts advice the realized point estimate contradicts, and realized speedups outside
    the predicted interval."""
    if a.advise is None:
        return
    src, summary = a.sources, rows.at("advise.summary")
    enable = a.advise["enable"].astype(bool)
    wrong = (enable & (a.advise["realized_speedup"] < 1)) | (~enable & (a.advise["realized_speedup"] > 1))
    summary("pairs", len(a.advise), "pairs", src["advise.realized"])
    summary("wrong", int(wrong.sum()), "pairs", src["advise.realized"])
    summary("right", len(a.advise) - int(wrong.sum()), "pairs", src["advise.realized"])
    outside = 0
    for r in a.advise.itertuples():
        put = rows.at("advise", pair=r.pair)
        put("k", r.k, "K", src["advise.predicted"])
        put("predicted", r.predicted_speedup, "x", src["advise.predicted"])
        put("realized", r.realized_speedup, "x", src["advise.realized"])
        put("enable", bool(r.enable), "bool", src["advise.predicted"])
        if getattr(r, "model", None) in ("loop", "confirmed"):  # its interval, the micro model beside it
            put("predicted_low", r.predicted_low, "x", src["advise.predicted"])
            put("predicted_high", r.predicted_high, "x", src["advise.predicted"])
            put("micro_predicted", r.micro_predicted_speedup, "x", src["advise.predicted"])
            outside += int(not r.predicted_low <= r.realized_speedup <= r.predicted_high)
        if getattr(r, "model", None) == "confirmed":  # measured at K on the probe's prompts; the loop model's
            put("loop_predicted", r.loop_predicted_speedup, "x", src["advise.predicted"])
            put("confirm_prompts", r.confirm_prompts, "prompts", src["advise.realized"])
    summary("outside_interval", outside, "pairs", src["advise.realized"])


LOOP_CONFIG_TERMS = ("draft_ratio", "verify_ratio", "residual_ms", "realized_over_model", "gap_target",
                     "gap_draft", "gap_verify", "gap_residual", "gap_committed", "explains")
LOOP_PAIR_TERMS = ("target_ratio", "draft_ratio", "verify_ratio", "residual_ms", "realized_over_model_min",
                   "realized_over_model_max", "gap_target", "gap_draft", "gap_verify", "gap_residual",
                   "gap_committed", "explains", "draft_round_overhead_ms", "draft_token_ms")


ADVISE_GAP_TERMS = ("predicted", "realized", "prompts", "probe_prompts", "target_factor", "acceptance_factor",
                    "round_factor", "explains")


def advise_gap_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'advise_gap.<pair>.<config>.*': advise's loop-model prediction at each greedy fixed K
    of the grid, the grid's realized speedup on the reserved prompts, and the miss split
    into target-step, acceptance and round-cost factors (``analysis.advisegap``)."""
    g = a.advise_gap
    if g is None or g.empty:
        return
    for r in g.to_dict(orient="records"):
        put = rows.at("advise_gap", {"k": r["k"]}, pair=r["pair"], config=r["config"])
        for term in ADVISE_GAP_TERMS:
            unit = "prompts" if term.endswith("prompts") else "text" if term == "explains" else "x"
            put(term, r[term], unit, "advise_rounds.parquet, rounds.parquet")


def clock_numbers(a: StudyAnalysis, rows: Rows, judge) -> None:
    """The clock boundary: per greedy fixed-K configuration, the speculative / target-only
    prefill ratio and the speedup with prefill inside the clock, with its interval."""
    for r in a.end_to_end or []:
        if r["policy"] != "fixed" or r["temperature"] != 0:
            continue
        put = rows.at("end_to_end", config_attrs(r), pair=r["pair"], config=r["config"])
        put("prefill_ratio", a.prefill_ratio[(r["pair"], r["config"])], "x", "runs.parquet")
        put("gmean", r["gmean_speedup"], "x", "runs.parquet")
        put("ci_low", r["ci_low"], "x", "runs.parquet")
        put("ci_high", r["ci_high"], "x", "runs.parquet")
        put("verdict", judge(r["ci_low"], r["ci_high"]), "text", "runs.parquet")


def loop_numbers(a: StudyAnalysis, rows: Rows) -> None:
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
        put = rows.at("loop", pair=r["pair"])
        for term in LOOP_PAIR_TERMS:
            put(term, r[term], unit(term), "rounds.parquet")
    for r in lc.to_dict(orient="records"):
        put = rows.at("loop", {"k": r["k"]}, pair=r["pair"], config=r["config"])
        for term in LOOP_CONFIG_TERMS:
            put(term, r[term], unit(term), "rounds.parquet")


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


def rule_numbers(a: StudyAnalysis, rows: Rows) -> None:
    """'calibration.rule.*': the certificate's whole rule (each of the six tests at
    alpha/6) recomputed from calibration.parquet's p-values per repetition, with exact
    Clopper-Pearson intervals on each rejection rate ('calibration.rule_without_ratio.*':
    the four-test rule at alpha/4 that a certificate without the ratio order applies); its
    detectable TV at 80% power from the rule's power curve in calibration.json, 'not
    recorded' (null) for a set calibrated before the rule had one."""
    from ..evidence.calibration import detectable_tv, rule_calibration
    from ..evidence.pit import RULE_TESTS
    alpha, rule = float(a.calibration["alpha"]), rows.at("calibration.rule")
    rule("tests", len(RULE_TESTS), "tests", "calibration.parquet")
    rule("level", alpha / len(RULE_TESTS), "", "calibration.parquet")
    rule("ci_level_pct", round(100 * _default("rule_calibration", "level")), "%", "calibration.parquet")
    rows.at("calibration.rule_without_ratio")("tests", len(RULE_TESTS) - 2, "tests", "calibration.parquet")
    for group, ratio in (("calibration.rule", True), ("calibration.rule_without_ratio", False)):
        for name, r in rule_calibration(a.calibration_table, alpha, ratio).items():
            put = rows.at(group, violation=name)
            for key in ("repetitions", "tokens_per_repetition", "rejection_rate", "ci_low", "ci_high"):
                put(key, r[key], {"repetitions": "runs", "tokens_per_repetition": "tokens"}.get(key, ""),
                    "calibration.parquet")
    curve = a.calibration.get("power_curve", {}).get("rule")
    rule("detectable_tv_80", detectable_tv(curve) if curve else None, "TV",
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
    """'machines.<study>.*': for a study frozen on two or more machines, the sets compared
    and which findings changed between them, each decided by the sets' own numbers: a
    pair's best-K verdict (by CI), whether its best-K CIs are disjoint, a target's batched
    qualification, and advise's verdict; and 'namesake.*' for two listed sets whose
    machines share a CPU model name but not a fingerprint (``namesake_rows``). Each row
    cites the manifests of every set it compares."""
    from .manifests import split_set
    by_study: dict[str, list[str]] = {}
    for set_id in analyses:
        study, machine = split_set(set_id)
        if machine:
            by_study.setdefault(study, []).append(set_id)
    out: dict[str, dict] = {}
    for study, sets in by_study.items():
        if len(sets) >= 2:
            rows = Rows(manifest_sha256=[shas[x] for x in sets])
            machine_rows(rows, study, {x: analyses[x] for x in sets})
            out.update(rows.out)
    for a, b in namesake_pairs(analyses):
        rows = Rows(manifest_sha256=[shas[a], shas[b]])
        namesake_rows(rows, a, b, analyses[a], analyses[b])
        out.update(rows.out)
    return out


def namesake_pairs(analyses: dict[str, StudyAnalysis]) -> list[tuple[str, str]]:
    """(head, other) for every listed set whose CPU model name equals the head set's (the
    first listed) but whose machine fingerprint differs (``evidence.fingerprint``) and
    whose study timed the same pairs: one CPU name, two machines, that a reader must not
    take for one."""
    from ..evidence.fingerprint import fingerprint_of, identity_differences
    sets = list(analyses)
    if not sets:
        return []
    head, fps = sets[0], {x: fingerprint_of(analyses[x].provenance) for x in sets}
    return [(head, b) for b in sets[1:]
            if fps[head].get("model_name") == fps[b].get("model_name") and identity_differences(fps[head], fps[b])
            and _pairs(analyses[head]) == _pairs(analyses[b])]


def _pairs(a: StudyAnalysis) -> list:
    return a.provenance["study"]["config"].get("pairs", [])


def namesake_rows(rows: Rows, a: str, b: str, one: StudyAnalysis, two: StudyAnalysis) -> None:
    """'namesake.<a>.<b>.*': two sets on machines of one CPU model name: the SIMD flags
    only one of them has, each set's new tokens per run and target-only speed per shared
    target, and per shared pair each set's best fixed-K speedup, its interval and verdict,
    and whether the verdict differs (by interval)."""
    put = rows.at("namesake", set_a=a, set_b=b)
    flags = [set(x.provenance.get("cpu", {}).get("simd_flags") or []) for x in (one, two)]
    put("flags_only_a", sorted(flags[0] - flags[1]), "list", "provenance.json")
    put("flags_only_b", sorted(flags[1] - flags[0]), "list", "provenance.json")
    put("model_name", one.provenance.get("cpu", {}).get("model"), "text", "provenance.json")
    for side, an in (("a", one), ("b", two)):
        put(f"max_new_tokens_{side}", int(an.provenance["study"]["config"]["settings"]["max_new_tokens"]), "tokens",
            "provenance.json")
    speeds = [target_only_speed(x.runs).set_index("target")["tokens_per_s"] for x in (one, two)]
    for target in [t for t in speeds[0].index if t in speeds[1].index]:
        at = rows.at("namesake", set_a=a, set_b=b, target=target)
        at("tokens_per_s_a", float(speeds[0][target]), "tokens/s", "runs.parquet")
        at("tokens_per_s_b", float(speeds[1][target]), "tokens/s", "runs.parquet")
    best = [best_fixed(x) for x in (one, two)]
    for pair in [p for p in best[0] if p in best[1]]:
        at = rows.at("namesake", set_a=a, set_b=b, pair=pair)
        for side, r in (("a", best[0][pair]), ("b", best[1][pair])):
            at(f"k_{side}", r["k"], "K", "runs.parquet")
            at(f"speedup_{side}", r["speedup"], "x", "runs.parquet")
            at(f"ci_low_{side}", r["ci_low"], "x", "runs.parquet")
            at(f"ci_high_{side}", r["ci_high"], "x", "runs.parquet")
            at(f"verdict_{side}", verdict(r["ci_low"], r["ci_high"]), "text", "runs.parquet")
        at("verdict_changed", verdict(best[0][pair]["ci_low"], best[0][pair]["ci_high"])
           != verdict(best[1][pair]["ci_low"], best[1][pair]["ci_high"]), "bool", "runs.parquet")


def machine_rows(rows: Rows, study: str, analyses: dict[str, StudyAnalysis]) -> None:
    """The rows of one study frozen on the machines of ``analyses`` (see machine_numbers)."""
    sets = list(analyses)
    rows.at("machines", study=study)("sets", sets, "list", "manifest.json")
    rows.at("machines", study=study)("count", len(sets), "sets", "manifest.json")
    best = {x: best_fixed(analyses[x]) for x in sets}
    for pair in [p for p in best[sets[0]] if all(p in best[x] for x in sets)]:
        picked = [best[x][pair] for x in sets]
        put = rows.at("machines", study=study, pair=pair)
        put("verdict_changed", len({verdict(r["ci_low"], r["ci_high"]) for r in picked}) > 1, "bool",
            "runs.parquet")
        disjoint = max(r["ci_low"] for r in picked) > min(r["ci_high"] for r in picked)
        put("best_ci_disjoint", bool(disjoint), "bool", "runs.parquet")
    quals = {x: qualification_summary(analyses[x].qualification) for x in sets}
    for r in quals[sets[0]].itertuples():
        same = [q[(q["target"] == r.target) & (q["verify_mode"] == r.verify_mode)] for q in quals.values()]
        if all(len(q) for q in same):
            rows.at("machines", study=study, finding="qualification", target=r.target, verify_mode=r.verify_mode)(
                "changed", len({bool(q["qualifies"].iloc[0]) for q in same}) > 1, "bool", "qualification.parquet")
    adv = {x: analyses[x].advise for x in sets}
    if all(v is not None for v in adv.values()):
        for pair in adv[sets[0]]["pair"]:
            enables = {bool(v[v["pair"] == pair]["enable"].iloc[0]) for v in adv.values() if (v["pair"] == pair).any()}
            rows.at("machines", study=study, finding="advise", pair=pair)(
                "changed", len(enables) > 1, "bool", analyses[sets[0]].sources["advise.predicted"])


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
        fields = (set(expected[key]) | set(actual[key])) - {"value", "source", "sha256", "manifest_sha256"}
        for field in sorted(fields):  # the named fields the paper selects rows by
            if expected[key].get(field) != actual[key].get(field):
                return (f"{key}: numbers.json files it under {field} = {expected[key].get(field)!r}, "
                        f"{given} gives {actual[key].get(field)!r}")
        for field in ("sha256", "manifest_sha256"):
            if expected[key].get(field) != actual[key].get(field):
                return (f"{key}: numbers.json was computed from {expected[key].get('source')} with "
                        f"{field} {str(expected[key].get(field))[:24]}, which is now "
                        f"{str(actual[key].get(field))[:24]}")
    return None
