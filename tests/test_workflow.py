"""The Snakemake workflow on mock-only studies (seconds, no real model): the study config
is an input of the stages that read it and editing a K replans exactly those; each
stage runs from its declared inputs alone; an interrupted study reruns only unfinished
jobs; a greedy-only study runs to a report; a bad study stops planning in one line."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STUDIES = ROOT / "tests" / "data" / "studies"
# Snakemake merges this over config/config.yaml key by key, so every list that names the
# committed record sets is replaced too
TINY_MOCK_CONFIG = {"studies": ["tiny-mock"], "study": "tiny-mock", "replicates": [], "break_even": []}


def snakemake_command(base: Path, *args, results: Path | None = None, config=(),
                      cores: str = "2") -> tuple[list[str], dict]:
    """The snakemake command line on ``base`` (config.yaml, studies/) and its environment;
    ``args``: options, then targets (after "--" when an option takes a value)."""
    if "--" in args:
        opts, targets = args[:args.index("--")], args[args.index("--") + 1:]
    else:
        opts, targets = [a for a in args if a.startswith("-")], [a for a in args if not a.startswith("-")]
    cmd = [str(BIN / "snakemake"), "--cores", cores, *opts, "--resources", "timed=1",
           "--configfile", str(base / "config.yaml"),
           "--config", f"results_dir={results or base / 'results'}", f"manifests_dir={base}/manifests",
           f"figures_dir={base}/figures", f"paper_dir={base}/paper", f"studies_dir={base}/studies",
           *config, "--", *targets]
    return cmd, dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")


def snakemake(base: Path, *args, results: Path | None = None, config=(), check=True):
    """Run snakemake on ``base`` (config.yaml, studies/); ``args``: options, then targets
    (after "--" when an option takes a value)."""
    cmd, env = snakemake_command(base, *args, results=results, config=config)
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=900)
    if check and res.returncode != 0:
        raise AssertionError(res.stdout[-4000:] + res.stderr[-4000:])
    return res


def planned(res) -> dict[str, int]:
    """Rule -> job count from a dry run's 'Job stats' table."""
    text = res.stdout + res.stderr
    if "Nothing to be done" in text:
        return {}
    table = text[text.index("Job stats:"):].split("\n\n")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m[1] != "total"}


def job_blocks(res) -> list[dict]:
    """The jobs a dry run lists: rule name, input and output files."""
    out = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", res.stdout + res.stderr):
        m = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not m:
            continue
        fields = dict(re.findall(r"^\s+(input|output): (.*)$", block, re.M))
        out.append({"rule": m[1], **{k: v.split(", ") for k, v in fields.items()}})
    return out


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """tiny-mock run once to its report, in a temporary tree with its own studies dir; the
    tree's path holds a space, so every path in every shell line must stay one argument."""
    base = tmp_path_factory.mktemp("wf space")
    shutil.copytree(STUDIES, base / "studies")
    (base / "config.yaml").write_text(yaml.safe_dump(
        {**TINY_MOCK_CONFIG, "paper": {"title": "workflow test"}}))
    snakemake(base, "study")
    return base


def test_study_runs_split_jobs_and_gathers(study):
    d = study / "results" / "tiny-mock"
    assert (d / "report.pdf").stat().st_size > 10_000
    runs = pd.read_parquet(d / "runs.parquet")
    # one job per pair, gathered in pair order with one global order
    assert sorted(p.name for p in (d / "jobs" / "runs").iterdir()) == ["mock-a+mock-d", "mock-b+ngram"]
    assert list(runs["pair"].drop_duplicates()) == ["mock-a+mock-d", "mock-b+ngram"]
    assert list(runs["order"]) == list(range(len(runs)))
    assert runs["host"].nunique() == 1
    assert sorted(p.name for p in (d / "jobs" / "micro").iterdir()) == ["mock-a", "mock-b"]
    micro = pd.read_parquet(d / "micro.parquet")
    assert set(micro.loc[micro["role"] == "target", "name"]) == {"mock-a", "mock-b"}
    assert not micro[["role", "name", "B"]].duplicated().any()
    assert set(pd.read_parquet(d / "reference.parquet")["target"]) == {"mock-a", "mock-b"}
    assert "Nothing to be done" in (r := snakemake(study, "-n", "study")).stdout + r.stderr


def test_paths_with_a_space_stay_one_argument(study):
    """Unquoted, ``tee {log}`` would split the log's path at the space and write a stray
    file beside the tree; quoted, each stage's log lands in the results directory."""
    assert " " in study.name
    assert not list(study.parent.glob(study.name.split(" ")[0]))
    logs = study / "results" / "tiny-mock" / "logs"
    assert (logs / "prompts.log").is_file() and (logs / "runs" / "mock-a+mock-d.log").is_file()


def test_editing_one_k_replans_the_stages_that_read_the_config(study):
    cfg = study / "studies" / "tiny-mock.yaml"
    text, stat = cfg.read_text(), cfg.stat()
    try:
        cfg.write_text(text.replace("k: [2, 3]", "k: [2, 4]"))
        plan = planned(snakemake(study, "-n", "study"))
    finally:
        cfg.write_text(text)
        os.utime(cfg, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    # provenance records the whole config and the reference seals the provenance, so
    # every stage that reads the config reruns, and everything after it
    for rule in ("provenance", "reference_job", "runs_job", "runs", "micro_job", "pit", "calibration",
                 "qualification_job", "predict", "advise", "analyze", "study_report"):
        assert rule in plan, (rule, plan)
    assert plan["runs_job"] == 2 and plan["micro_job"] == 2
    # the level-1/2 checks take only the seed (a rule param): a K changes nothing there
    assert "level1" not in plan and "level2" not in plan
    assert "Nothing to be done" in (r := snakemake(study, "-n", "study")).stdout + r.stderr


@pytest.mark.parametrize("rule", ["pit", "calibration", "margins", "predicted", "level1", "analyze",
                                  "runs", "reference", "batch_invariance", "qualification_job"])
def test_each_stage_runs_from_its_declared_inputs_alone(study, rule):
    results = study / "results"
    target = {"runs": "runs.parquet", "reference": "reference.parquet", "analyze": "stats.json",
              "calibration": "calibration.json", "predicted": "prediction.json",
              "qualification_job": "jobs/qualification/mock-b/qualification.parquet"}.get(
        rule, f"{rule}.parquet" if rule not in ("level1",) else "level1.json")
    dry = snakemake(study, "-n", "--forcerun", rule, "--", str(results / "tiny-mock" / target))
    (job,) = [j for j in job_blocks(dry) if j["rule"] == rule]
    alone = study / f"alone-{rule}"
    for f in job.get("input", []):
        f = Path(f)
        if results in f.parents:  # the study config lives in studies/, which stays in place
            dest = alone / f.relative_to(results)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest)
    snakemake(study, "--allowed-rules", rule, "--", str(alone / "tiny-mock" / target), results=alone)
    for f in job["output"]:
        assert (alone / Path(f).relative_to(results)).is_file(), f


def test_an_interrupted_study_reruns_only_unfinished_jobs(study):
    d = study / "results" / "tiny-mock"
    before = pd.read_parquet(d / "runs.parquet")
    # Ctrl-C during the runs: this pair's job never finished (the other pair's had), so the
    # gather that writes runs.parquet and every stage after it never ran either
    shutil.rmtree(d / "jobs" / "runs" / "mock-b+ngram")
    after_runs = ["runs.parquet", "rounds.parquet", "pit.parquet", "calibration.json", "calibration.parquet",
                  "calibration_power.parquet", "margins.parquet", "prediction.json", "prediction_live.parquet",
                  "advise.parquet", "advise_micro.parquet", "advise_rounds.parquet", "advise_runs.parquet",
                  "agreement.parquet", "costs.parquet", "stats.json", "certificate.json", "report.pdf",
                  "drift.md"]
    for name in after_runs:
        (d / name).unlink(missing_ok=True)
    plan = planned(snakemake(study, "-n", "study"))
    assert plan["runs_job"] == 1 and "micro_job" not in plan and "reference_job" not in plan
    res = snakemake(study, "study")
    assert len(re.findall(r"rule runs_job:", res.stdout + res.stderr)) == 1
    assert "wildcards: study=tiny-mock, part=mock-b+ngram" in res.stdout + res.stderr
    after = pd.read_parquet(d / "runs.parquet")
    cols = ["run_id", "pair", "order", "seed", "ids"]
    assert before[cols].astype(str).equals(after[cols].astype(str))  # same runs, same ids


def test_a_greedy_only_study_runs_to_a_report(study):
    snakemake(study, "study", config=["study=greedy"])
    d = study / "results" / "greedy"
    assert (d / "report.pdf").stat().st_size > 10_000
    assert (pd.read_parquet(d / "runs.parquet")["temperature"] == 0).all()
    assert len(pd.read_parquet(d / "pit.parquet")) == 0
    cert = yaml.safe_load((d / "certificate.json").read_text())
    assert cert["n_tokens"] == 0 and cert["rejected"] is False
    rows = yaml.safe_load((d / "report" / "numbers.json").read_text()).values()
    cats = {(r["workload"], r["category"]) for r in rows if r["group"] == "speedup_category"}
    assert cats == {("spec", "writing"), ("spec", "math")}  # per category where a workload holds several


@pytest.mark.parametrize("case,expect", [
    ("nosuch", "unknown study 'nosuch': no {base}/studies/nosuch.yaml"),
    ("bad", "{base}/studies/bad.yaml: field grid.0.k.0: must be an integer from 1 to 64 (got 0)"),
    ("badpair", "{base}/studies/badpair.yaml: field pairs.0.draft: unknown draft 'nope'"),
])
def test_a_bad_study_stops_planning_in_one_line(tmp_path, case, expect):
    shutil.copytree(STUDIES, tmp_path / "studies")
    good = (STUDIES / "tiny-mock.yaml").read_text()
    (tmp_path / "studies" / "bad.yaml").write_text(
        good.replace("name: tiny-mock", "name: bad").replace("k: [2, 3]", "k: [0, 3]"))
    (tmp_path / "studies" / "badpair.yaml").write_text(
        good.replace("name: tiny-mock", "name: badpair").replace("draft: mock-d}", "draft: nope}"))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(TINY_MOCK_CONFIG))
    res = snakemake(tmp_path, "-n", "study", config=[f"study={case}"], check=False)
    lines = [x for x in res.stderr.splitlines() if "error" in x.lower() or "Traceback" in x]
    assert res.returncode == 2, res.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(f"snakemake: error: {expect.format(base=tmp_path)}"), \
        res.stderr[-2000:]
    assert "Job stats" not in res.stdout + res.stderr  # stopped before planning any job


def test_no_rule_touches_a_reserved_prompt_before_the_predictions_are_sealed(tmp_path):
    """Read the planned DAG (--rulegraph): every rule whose stage reads reserved prompts
    (evidence.stages.PROMPTS_READ; the sealed reference and predict itself excepted) has
    predict, the rule that writes the seal, upstream of it, and predict has none of them
    upstream; each of them also declares the seal as an input of its own."""
    from specproof.evidence.stages import PROMPTS_READ, SEAL_EXEMPT
    shutil.copytree(STUDIES, tmp_path / "studies")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(TINY_MOCK_CONFIG))
    dot = snakemake(tmp_path, "--rulegraph", "--", "study").stdout
    names = dict(re.findall(r'^\s*(\d+)\[label = "(\w+)"', dot, re.M))
    up: dict[str, set[str]] = {n: set() for n in names.values()}
    for a, b in re.findall(r"^\s*(\d+) -> (\d+)", dot, re.M):
        up[names[b]].add(names[a])

    def ancestors(rule: str) -> set[str]:
        seen, todo = set(), [rule]
        while todo:
            for r in up[todo.pop()] - seen:
                seen.add(r)
                todo.append(r)
        return seen

    stage = lambda rule: rule.removesuffix("_job")  # noqa: E731
    touching = {r for r in up if PROMPTS_READ.get(stage(r), "discovery") != "discovery"
                and stage(r) not in SEAL_EXEMPT and f"{r}_job" not in up}  # not a gather
    assert {"runs_job", "qualification_job", "pit", "margins", "advise"} <= touching
    assert "reference_job" in ancestors("predict")
    for rule in touching:
        assert "predict" in ancestors(rule), rule
    assert not ancestors("predict") & touching
    plan = job_blocks(snakemake(tmp_path, "-n", "-p", "--forceall", "--", "study"))
    for job in (j for j in plan if j["rule"] in touching):
        assert any(f.endswith("/prediction_seal.json") for f in job["input"]), job["rule"]


def test_verify_paths_run_on_the_qualified_targets_only(study):
    """tiny-mock names mock-b in qualification.targets: the batch-invariance probe, the
    sealed predictions and the qualification hold mock-b's rows and no mock-a row, and
    the study still runs to its report."""
    d = study / "results" / "tiny-mock"
    assert sorted(p.name for p in (d / "jobs" / "qualification").iterdir()) == ["mock-b"]
    assert set(pd.read_parquet(d / "qualification.parquet")["target"]) == {"mock-b"}
    assert set(pd.read_parquet(d / "batch_invariance.parquet")["target"]) == {"mock-b"}
    predictions = json.loads((d / "predictions.json").read_text())
    assert {p["target"] for p in predictions["paths"]} == {"mock-b"}
    assert (d / "report.pdf").is_file()
