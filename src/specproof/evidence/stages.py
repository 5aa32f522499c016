"""Pipeline stages that run models, by name: each is a thin adapter that reads and writes
files under one study's results directory by fixed names (the Snakemake rules declare
the same names; ``publish.manifests`` lists which are raw and which derived). The work
is in the module that owns it.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from ..errors import ConfigError
from ..models import files as M
from ..records import check_seal, read_json, read_parquet, sha256_file, write_json, write_parquet
from ..study import prompts as P
from ..study.config import Study, load_study
from ..study.workloads import build_prompt_set
from .provenance import capture

Stage = Callable[[Study, Path], None]


def _model_specs(study: Study) -> list[tuple[str, str, dict]]:
    out = [("target", n, study.target_spec(n)) for n in study.data["targets"]]
    out += [("draft", n, study.draft_spec(n)) for n in study.data.get("drafts", {})]
    return out


def stage_models(study: Study, d: Path) -> None:
    recs = {}
    for role, name, spec in tqdm(_model_specs(study), desc="models", unit="model"):
        if spec.get("kind") == "ngram" or spec.get("backend") == "mock":
            recs[f"{role}:{name}"] = {"spec": spec, "files": []}
            continue
        path = M.resolve(str(spec["model"]))
        recs[f"{role}:{name}"] = {"spec": spec, **M.file_record(path)}
    write_json(recs, d / "models.json")


def stage_prompts(study: Study, d: Path) -> None:
    P.write(build_prompt_set(study), d / "prompts.jsonl")


def load_prompt_set(d: Path) -> list[dict]:
    return [json.loads(x) for x in (d / "prompts.jsonl").read_text().splitlines() if x.strip()]


def stage_provenance(study: Study, d: Path) -> None:
    prov = capture()
    prov["study"] = {"name": study.name, "config_sha256": study.sha256(), "config": study.data}
    prov["prompts_sha256"] = sha256_file(d / "prompts.jsonl")
    prov["models"] = read_json(d / "models.json")
    write_json(prov, d / "provenance.json")


def stage_reference(study: Study, d: Path) -> None:
    from .reference import run_reference
    run_reference(study, load_prompt_set(d), d / "provenance.json", d / "reference.parquet",
                  d / "reference.seal.json")


def _sealed(d: Path) -> pd.DataFrame:
    return check_seal(d / "reference.parquet", d / "reference.seal.json")


def stage_runs(study: Study, d: Path) -> None:
    from .grid import run_grid
    _sealed(d)
    run_grid(study, load_prompt_set(d), d / "runs.parquet", d / "rounds.parquet")


def stage_micro(study: Study, d: Path) -> None:
    from .micro import run_micro
    run_micro(study, load_prompt_set(d), d / "micro.parquet")


def stage_pit(study: Study, d: Path) -> None:
    from .pit import score_runs
    _sealed(d)
    score_runs(study, load_prompt_set(d), read_parquet(d / "runs.parquet"), d / "pit.parquet",
               rounds=read_parquet(d / "rounds.parquet"))


def stage_batch_invariance(study: Study, d: Path) -> None:
    from .qualification import probe_batch_invariance
    probe_batch_invariance(study, load_prompt_set(d), _sealed(d), d / "batch_invariance.parquet")


def stage_qualification(study: Study, d: Path) -> None:
    from .qualification import run_qualification
    run_qualification(study, load_prompt_set(d), _sealed(d), d / "qualification.parquet")


def stage_predict(study: Study, d: Path) -> None:
    from .qualification import seal_predictions
    _sealed(d)
    seal_predictions(study, load_prompt_set(d), d / "prediction_seal.json")


def stage_predicted(study: Study, d: Path) -> None:
    from .qualification import run_predicted
    run_predicted(study, load_prompt_set(d), d / "prediction_seal.json", d / "prediction.json")


def stage_level1(study: Study, d: Path) -> None:
    from .calibration import level1
    write_json(level1(seed=study.settings["seed"]), d / "level1.json")


def stage_level2(study: Study, d: Path) -> None:
    from .calibration import level2
    write_json(level2(seed=study.settings["seed"]), d / "level2.json")


def stage_calibration(study: Study, d: Path) -> None:
    from .calibration import calibrate
    pit = read_parquet(d / "pit.parquet")
    n_tokens = int((pit["path"] == "speculative").sum())
    cfg = study.section("certificate", calibration_repetitions=200, null_repetitions=500,
                        violation_repetitions=30, null_tokens=None, alpha=0.05)
    # the whole rule's size needs >= 500 null repetitions; a larger explicit count wins
    null_reps = max(cfg["calibration_repetitions"], cfg["null_repetitions"])
    table, summary = calibrate(n_tokens, null_reps, cfg["alpha"], seed=study.settings["seed"],
                               violation_reps=cfg["violation_repetitions"], null_tokens=cfg["null_tokens"])
    write_parquet(table, d / "calibration.parquet")
    write_json(summary, d / "calibration.json")


def stage_margins(study: Study, d: Path) -> None:
    from .reference import divergences, score_margins
    reference = _sealed(d)
    todo = divergences(read_parquet(d / "runs.parquet"), read_parquet(d / "qualification.parquet"),
                       reference)
    score_margins(study, load_prompt_set(d), reference, todo, d / "margins.parquet")


def stage_advise(study: Study, d: Path) -> None:
    from .advise import advise_study
    advise_study(study, load_prompt_set(d), d / "advise.parquet")


STAGES: dict[str, Stage] = {
    "models": stage_models, "prompts": stage_prompts, "provenance": stage_provenance,
    "reference": stage_reference, "runs": stage_runs, "micro": stage_micro, "pit": stage_pit,
    "batch_invariance": stage_batch_invariance, "qualification": stage_qualification,
    "predict": stage_predict, "predicted": stage_predicted, "margins": stage_margins,
    "advise": stage_advise, "level1": stage_level1, "level2": stage_level2,
    "calibration": stage_calibration,
}


def run_stage(name: str, study_name: str, results: Path, stages: dict[str, Stage] | None = None) -> None:
    """Run one stage for a study. ``stages`` defaults to the model-running ones; the
    command line adds the analysis stage (a room above this one)."""
    stages = STAGES if stages is None else stages
    if name not in stages:
        raise ConfigError(f"unknown stage {name!r}: choose one of {', '.join(stages)}")
    study = load_study(study_name)
    results = Path(results)
    results.mkdir(parents=True, exist_ok=True)
    if study.threads:
        os.environ.setdefault("OMP_NUM_THREADS", str(study.threads))
    stages[name](study, results)
