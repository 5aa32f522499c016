"""Pipeline stages that run models, by name: each is a thin adapter that reads and writes
files under one study's results directory by fixed names (the Snakemake rules declare
the same names as their inputs and outputs; ``publish.manifests`` lists which are raw
and which derived). The study config reaches a stage as a path argument (the rule's
input), never through the environment. The work is in the module that owns it.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from ..errors import ConfigError
from ..load import HEARTBEAT_S, heartbeat
from ..models import files as M
from ..records import (check_seal, models_by_role, read_json, read_jsonl, read_parquet, sha256_file, write_json,
                       write_parquet)
from ..study import prompts as P
from ..study.config import ROOT, Study, load_study
from ..study.workloads import build_prompt_set, check_context_fits, split_of
from .advise import advise_study
from .calibration import calibrate, level1, level2
from .grid import run_grid
from .micro import run_micro
from .pit import score_runs
from .prediction import require_seal, score_predictions, seal_predictions
from .provenance import capture
from .qualification import probe_batch_invariance, run_qualification
from .reference import divergences, reference_rows, score_margins, seal_reference

Stage = Callable[[Study, Path], None]


def _model_specs(study: Study) -> list[tuple[str, str, dict]]:
    out = [("target", n, study.target_spec(n)) for n in study.data["targets"]]
    out += [("draft", n, study.draft_spec(n)) for n in study.data.get("drafts", {})]
    return out


def stage_models(study: Study, d: Path) -> None:
    """models.json: per model of the study, its role, its name in the config
    (``config_name``) and spec, and its files (name, size, sha256) and where an embedded
    one comes from; keyed ``<role>:<name>`` as sets written before the role fields were
    (``records.models_by_role`` reads both)."""
    recs = {}
    for role, name, spec in tqdm(_model_specs(study), desc="models", unit="model"):
        rec = {"role": role, "config_name": name, "spec": spec, "files": []}
        if spec.get("kind") != "ngram" and spec.get("backend") != "mock":
            rec.update(M.file_record(M.resolve(str(spec["model"]), model_dir=study.model_dir), project=ROOT))
            if str(spec["model"]).startswith("embedded:"):
                rec["source"] = M.embedded_source(str(spec["model"]).split(":", 1)[1])
        recs[f"{role}:{name}"] = rec
    write_json(recs, d / "models.json")


def check_model_files(study: Study, d: Path) -> None:
    """Refuse, before any model loads, a model file of ``study``'s pairs that changed since
    the models stage recorded it in ``d``/models.json (truncated, replaced): one line
    naming the file and the sha256 it must have (``files.check_recorded``). Nothing is
    checked before models.json is written. Returns None."""
    if not (d / "models.json").is_file():
        return
    recorded = models_by_role(read_json(d / "models.json"))
    used = {("target", p["target"]) for p in study.pairs} | {("draft", p["draft"]) for p in study.pairs}
    for role, name, spec in _model_specs(study):
        rec = recorded.get((role, name)) or {}
        if (role, name) in used and rec.get("files") and spec.get("model"):
            M.check_recorded(str(spec["model"]), rec, f"{d / 'models.json'} ({role} {name})", study.model_dir)


def stage_prompts(study: Study, d: Path) -> None:
    """prompts.jsonl: the study's prompt set, each prompt checked to fit every model with
    ``max_new_tokens`` before any model loads (``check_context_fits``)."""
    records = build_prompt_set(study, study.manifests)
    check_context_fits(study, records)
    P.write(records, d / "prompts.jsonl")


def load_prompt_set(d: Path) -> list[dict]:
    return read_jsonl(d / "prompts.jsonl")


# The prompts each model-running stage reads. No stage runs a live path on a reserved
# prompt before the predictions are sealed (issue 13, section 3): a stage that reads them
# checks the seal first (``prediction.require_seal``) and its rule takes
# prediction_seal.json as an input (tests/test_workflow.py reads the DAG to prove it).
# The exceptions: the reference, the sealed target-only comparator of every prompt
# (written first, as in seed 002), and predict, which runs live paths on the discovery
# prompts only and gives the reserved ones to the draft-free predictor it seals.
PROMPTS_READ = {"reference": "all", "predict": "discovery", "micro": "discovery",
                "batch_invariance": "discovery", "runs": "all", "pit": "all",
                "qualification": "reserved", "margins": "all", "advise": "all"}
SEAL_EXEMPT = ("reference", "predict")


def prompts_for(study: Study, d: Path, stage: str) -> list[dict]:
    """The prompts ``stage`` reads (``PROMPTS_READ``), after checking the seal where needed."""
    part = PROMPTS_READ[stage]
    if part != "discovery" and stage not in SEAL_EXEMPT:
        require_seal(d, stage)
    records = load_prompt_set(d)
    if part == "all":
        return records
    discovery, reserved = split_of(records, study.prediction["discovery_fraction"])
    return discovery if part == "discovery" else reserved


def stage_provenance(study: Study, d: Path) -> None:
    prov = capture(bandwidth=True)
    prov["statistics"] = {"interval": study.interval}  # the speedups' interval (statistics.interval_method)
    prov["study"] = {"name": study.name, "config_sha256": study.sha256(), "config": study.data}
    prov["prompts_sha256"] = sha256_file(d / "prompts.jsonl")
    prov["models"] = read_json(d / "models.json")
    write_json(prov, d / "provenance.json")


def stage_reference(study: Study, d: Path, out: Path | None = None) -> None:
    """Greedy references; with ``out`` (a job of one target) the rows only, unsealed:
    the gather seals the whole table."""
    rows = reference_rows(study, prompts_for(study, d, "reference"))
    if out is not None:
        write_parquet(rows, out / "reference.parquet")
        return
    seal_reference(study, rows, d / "provenance.json", d / "reference.parquet", d / "reference.seal.json")


def _sealed(d: Path) -> pd.DataFrame:
    return check_seal(d / "reference.parquet", d / "reference.seal.json")


def stage_runs(study: Study, d: Path, out: Path | None = None) -> None:
    out = d if out is None else out
    _sealed(d)
    run_grid(study, prompts_for(study, d, "runs"), out / "runs.parquet", out / "rounds.parquet")


def stage_micro(study: Study, d: Path, out: Path | None = None) -> None:
    run_micro(study, prompts_for(study, d, "micro"), (d if out is None else out) / "micro.parquet")


def stage_pit(study: Study, d: Path) -> None:
    _sealed(d)
    score_runs(study, prompts_for(study, d, "pit"), read_parquet(d / "runs.parquet"), d / "pit.parquet",
               rounds=read_parquet(d / "rounds.parquet"))


def stage_batch_invariance(study: Study, d: Path) -> None:
    probe_batch_invariance(study, prompts_for(study, d, "batch_invariance"), _sealed(d), d / "batch_invariance.parquet")


def stage_qualification(study: Study, d: Path, out: Path | None = None) -> None:
    run_qualification(study, prompts_for(study, d, "qualification"), _sealed(d),
                      (d if out is None else out) / "qualification.parquet")


def stage_predict(study: Study, d: Path) -> None:
    _sealed(d)
    # the one stage that reads the reserved prompts before the seal: it writes the seal
    discovery, reserved = split_of(load_prompt_set(d), study.prediction["discovery_fraction"])
    seal_predictions(study, discovery, reserved, d / "predictions.json", d / "prediction_seal.json")


def stage_predicted(study: Study, d: Path) -> None:
    """P from the sealed predictions and the reserved live runs; runs no model."""
    score_predictions(d / "predictions.json", d / "prediction_seal.json", d / "qualification.parquet",
                      d / "runs.parquet", d / "prediction.json", d / "prediction_live.parquet")


def stage_level1(seed: int, d: Path) -> None:
    draws: list[dict] = []
    summary = level1(seed=seed, records=draws)
    write_parquet(pd.DataFrame(draws), d / "level1.parquet")
    write_json(summary, d / "level1.json")


def stage_level2(seed: int, d: Path) -> None:
    pit: list[dict] = []
    summary = level2(seed=seed, records=pit)
    write_parquet(pd.DataFrame(pit), d / "level2.parquet")
    write_json(summary, d / "level2.json")


def stage_calibration(study: Study, d: Path) -> None:
    pit = read_parquet(d / "pit.parquet")
    # a greedy-only grid scores no token: pit.parquet is empty (older ones have no columns)
    n_tokens = int((pit["path"] == "speculative").sum()) if "path" in pit else 0
    cfg = study.section("certificate", calibration_repetitions=200, null_repetitions=500,
                        violation_repetitions=30, null_tokens=None, alpha=0.05)
    # the whole rule's size needs >= 500 null repetitions; a larger explicit count wins
    null_reps = max(cfg["calibration_repetitions"], cfg["null_repetitions"])
    power: list[dict] = []
    table, summary = calibrate(n_tokens, null_reps, cfg["alpha"], seed=study.settings["seed"],
                               violation_reps=cfg["violation_repetitions"], null_tokens=cfg["null_tokens"],
                               power_records=power)
    write_parquet(table, d / "calibration.parquet")
    write_parquet(pd.DataFrame(power), d / "calibration_power.parquet")
    write_json(summary, d / "calibration.json")


def stage_margins(study: Study, d: Path) -> None:
    reference = _sealed(d)
    todo = divergences(read_parquet(d / "runs.parquet"), read_parquet(d / "qualification.parquet"),
                       reference)
    score_margins(study, prompts_for(study, d, "margins"), reference, todo, d / "margins.parquet")


def stage_advise(study: Study, d: Path) -> None:
    advise_study(study, prompts_for(study, d, "advise"), d / "advise.parquet", d / "advise_micro.parquet",
                 d / "advise_rounds.parquet", d / "advise_runs.parquet")


STAGES: dict[str, Stage] = {
    "models": stage_models, "prompts": stage_prompts, "provenance": stage_provenance,
    "reference": stage_reference, "runs": stage_runs, "micro": stage_micro, "pit": stage_pit,
    "batch_invariance": stage_batch_invariance, "qualification": stage_qualification,
    "predict": stage_predict, "predicted": stage_predicted, "margins": stage_margins,
    "advise": stage_advise, "calibration": stage_calibration,
}
# stages that read no study config, only its seed (passed by the rule): editing a K
# leaves their records valid, and Snakemake plans no rerun of them
SEEDED: dict[str, Callable[[int, Path], None]] = {"level1": stage_level1, "level2": stage_level2}

# Model-running stages split into resumable jobs, one per pair or per target; each job
# writes the stage's files under jobs/<stage>/<part>/ and ``gather`` joins them into the
# files the analysis reads (same names, same rows, same order as one whole-study job).
JOBS: dict[str, str] = {"reference": "target", "runs": "pair", "micro": "target",
                        "qualification": "target"}
# stages that run on the study's qualified targets only (``Study.qualified_targets``)
QUALIFIED_STAGES = ("batch_invariance", "predict", "qualification")


def job_dir(d: Path, stage: str, part: str) -> Path:
    """Where one job of a split stage writes: ``<results>/jobs/<stage>/<part>/``."""
    return Path(d) / "jobs" / stage / part


def job_parts(study: Study, stage: str) -> list[str]:
    """The jobs of a split stage, in the order the whole-study stage would run them: one
    per pair, or per target (per qualified target for ``QUALIFIED_STAGES``)."""
    if JOBS[stage] == "pair":
        return [p["name"] for p in study.pairs]
    return study.qualified_targets if stage in QUALIFIED_STAGES else study.target_names


def _concat(study: Study, d: Path, stage: str, name: str) -> pd.DataFrame:
    return pd.concat([read_parquet(job_dir(d, stage, part) / name) for part in job_parts(study, stage)],
                     ignore_index=True)


def gather(stage: str, study: Study, d: Path) -> None:
    """Join the jobs of a split stage. runs: ``order`` is renumbered 0..n-1 over the pairs
    in study order (the whole-study order); micro: a draft shared by several targets is
    timed in each target's job and kept once, from the first; reference: sealed here."""
    if stage == "reference":
        seal_reference(study, _concat(study, d, stage, "reference.parquet"), d / "provenance.json",
                       d / "reference.parquet", d / "reference.seal.json")
    elif stage == "runs":
        runs = _concat(study, d, stage, "runs.parquet")
        runs["order"] = range(len(runs))
        write_parquet(runs, d / "runs.parquet")
        write_parquet(_concat(study, d, stage, "rounds.parquet"), d / "rounds.parquet")
    elif stage == "micro":
        micro = _concat(study, d, stage, "micro.parquet")
        drafts = micro["role"] == "draft"
        keep = ~drafts | ~micro[["role", "name"]].duplicated()
        write_parquet(micro[keep].reset_index(drop=True), d / "micro.parquet")
    else:
        write_parquet(_concat(study, d, stage, f"{stage}.parquet"), d / f"{stage}.parquet")


def run_stage(name: str, results: Path, config: Path | None = None, seed: int | None = None,
              part: str | None = None, gather_jobs: bool = False,
              stages: dict[str, Stage] | None = None, model_dir: Path | None = None,
              heartbeat_s: float = HEARTBEAT_S, manifests: Path | None = None) -> None:
    """Run one stage into ``results``. ``config`` is the study config file (every stage
    but the seeded ones reads it); ``seed`` is the study seed for the seeded ones.
    ``part`` runs one job of a split stage (a pair or a target, see ``JOBS``) into
    ``job_dir``; ``gather_jobs`` joins a split stage's jobs instead of running it.
    ``model_dir`` is where derived model files go (``Study.model_dir``), ``manifests``
    where frozen record sets lie (``Study.manifests``, the prompts stage's blind check); the study's
    ``settings.threads`` reach the backends in their specs (``Study.target_spec``). A
    line every ``heartbeat_s`` seconds says the stage is still running."""
    with heartbeat(f"stage {name}" + (f" ({part})" if part else ""), heartbeat_s):
        _run_stage(name, results, config, seed, part, gather_jobs, STAGES if stages is None else stages, model_dir,
                   manifests)


def _run_stage(name: str, results: Path, config: Path | None, seed: int | None, part: str | None,
               gather_jobs: bool, stages: dict[str, Stage], model_dir: Path | None,
               manifests: Path | None = None) -> None:
    if name not in stages and name not in SEEDED:
        raise ConfigError(f"unknown stage {name!r}: choose one of {', '.join([*stages, *SEEDED])}")
    if (part is not None or gather_jobs) and name not in JOBS:
        raise ConfigError(f"stage {name} is not split into jobs (split: {', '.join(JOBS)})")
    results = Path(results)
    if name in SEEDED:
        if seed is None:
            raise ConfigError(f"stage {name}: needs --seed (the study's settings.seed)")
        results.mkdir(parents=True, exist_ok=True)
        SEEDED[name](seed, results)
        return
    if config is None:
        raise ConfigError(f"stage {name}: needs --config (the study config file)")
    study = load_study(Path(config))
    study.model_dir, study.manifests = model_dir, manifests
    results.mkdir(parents=True, exist_ok=True)
    if gather_jobs:
        gather(name, study, results)
        return
    if part is not None:
        study = study.restricted(**{JOBS[name]: part})
    if name in PROMPTS_READ:  # the stages that run models
        check_model_files(study, results)
    if part is not None:
        out = job_dir(results, name, part)
        out.mkdir(parents=True, exist_ok=True)
        stages[name](study, results, out)
    else:
        stages[name](study, results)
