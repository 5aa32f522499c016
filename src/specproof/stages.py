"""Pipeline stages that run models, by name: each reads and writes files under one
study's results directory by fixed names (the Snakemake rules declare the same names).
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from . import models as M
from .errors import ConfigError
from .loader import ModelPool
from .provenance import capture
from .records import read_json, read_parquet, seed_from, write_json, write_parquet
from .reference import check_seal
from .study import Study, load_study
from .workloads import build_prompt_set, prompt_ids
from . import prompts as P

FILES = {
    "models": ["models.json"], "prompts": ["prompts.jsonl"], "provenance": ["provenance.json"],
    "reference": ["reference.parquet", "reference.seal.json"],
    "runs": ["runs.parquet", "rounds.parquet"], "micro": ["micro.parquet"], "pit": ["pit.parquet"],
    "batch_invariance": ["batch_invariance.parquet"], "qualification": ["qualification.parquet"],
    "predict": ["prediction_seal.json"], "predicted": ["prediction.json"],
    "margins": ["margins.parquet"], "advise": ["advise.parquet"], "analyze": ["agreement.parquet", "costs.parquet", "stats.json",
                                                "certificate.json"],
    "level1": ["level1.json"], "level2": ["level2.json"],
    "calibration": ["calibration.parquet", "calibration.json"],
}


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
    prov["prompts_sha256"] = P.sha256(d / "prompts.jsonl")
    prov["models"] = read_json(d / "models.json")
    write_json(prov, d / "provenance.json")


def stage_reference(study: Study, d: Path) -> None:
    from .reference import run_reference
    run_reference(study, load_prompt_set(d), d / "provenance.json", d / "reference.parquet",
                  d / "reference.seal.json")


def _sealed(d: Path) -> pd.DataFrame:
    return check_seal(d / "reference.parquet", d / "reference.seal.json")


def stage_runs(study: Study, d: Path) -> None:
    from .experiment import run_grid
    _sealed(d)
    run_grid(study, load_prompt_set(d), d / "runs.parquet", d / "rounds.parquet")


def stage_micro(study: Study, d: Path) -> None:
    from .micro import run_micro
    run_micro(study, load_prompt_set(d), d / "micro.parquet")


def stage_pit(study: Study, d: Path) -> None:
    """Level 3: PIT of every token of every sampled speculative run, and of the first
    target-only run of each sampled block as a control, scored on the target-only path."""
    from .pit import score_sequence
    _sealed(d)
    runs = read_parquet(d / "runs.parquet")
    sampled = runs[runs["temperature"] > 0]
    blocks = ["pair", "prompt_id", "rep", "temperature"]
    first_control = sampled[sampled["path"] == "target"].groupby(blocks)["order"].idxmin()
    sampled = sampled[(sampled["path"] == "speculative") | sampled.index.isin(first_control)]
    prompts = {r["id"]: r for r in load_prompt_set(d)}
    pool, rows = ModelPool(study), []
    for tname in study.target_names:
        sub = sampled[sampled["target"] == tname]
        if sub.empty:
            continue
        target = pool.target(tname)
        for r in tqdm(list(sub.itertuples()), desc=f"pit {tname}", unit="run"):
            ids = prompt_ids(target, prompts[r.prompt_id])
            scored = score_sequence(target, ids, [int(x) for x in r.ids], r.temperature,
                                    seed=seed_from(r.run_id))
            for t, (u, u_rank, px, below) in enumerate(scored):
                rows.append({"run_id": r.run_id, "pair": r.pair, "target": tname, "path": r.path,
                             "config": r.config, "workload": r.workload, "prompt_id": r.prompt_id,
                             "t": t, "token": int(r.ids[t]), "p_token": px, "cdf_below": below, "u": u,
                             "u_rank": u_rank})
        pool.release_target(tname)
    write_parquet(pd.DataFrame(rows), d / "pit.parquet")


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
    from .certificate import level1
    write_json(level1(seed=study.settings["seed"]), d / "level1.json")


def stage_level2(study: Study, d: Path) -> None:
    from .certificate import level2
    write_json(level2(seed=study.settings["seed"]), d / "level2.json")


def stage_calibration(study: Study, d: Path) -> None:
    from .certificate import calibrate
    pit = read_parquet(d / "pit.parquet")
    n_tokens = int((pit["path"] == "speculative").sum())
    cfg = study.section("certificate", calibration_repetitions=200, alpha=0.05)
    table, summary = calibrate(n_tokens, cfg["calibration_repetitions"], cfg["alpha"],
                               seed=study.settings["seed"])
    write_parquet(table, d / "calibration.parquet")
    write_json(summary, d / "calibration.json")


def stage_margins(study: Study, d: Path) -> None:
    """Top-2 logit margin of the target at each first divergence from the reference,
    scored along the reference sequence (the prefix fed in one prefill call)."""
    import numpy as np
    from .agreement import agreement_table, mismatches
    reference = _sealed(d)
    table = agreement_table(read_parquet(d / "runs.parquet"), read_parquet(d / "qualification.parquet"),
                            reference)
    todo = mismatches(table)
    prompts = {r["id"]: r for r in load_prompt_set(d)}
    ref = {(r.target, r.prompt_id): [int(x) for x in r.ids] for r in reference.itertuples()}
    pool, rows = ModelPool(study), []
    for tname, g in todo.groupby("target"):
        target = pool.target(tname)
        for r in g.itertuples():
            ids = prompt_ids(target, prompts[r.prompt_id])
            seq = ids + ref[(tname, r.prompt_id)][: int(r.index)]
            target.reset()
            logits = target.forward(seq, last_only=True)[0]
            top2 = np.sort(logits)[-2:]
            rows.append({"target": tname, "prompt_id": r.prompt_id, "index": int(r.index),
                         "top2_margin": float(top2[1] - top2[0])})
        pool.release_target(tname)
    write_parquet(pd.DataFrame(rows, columns=["target", "prompt_id", "index", "top2_margin"]),
                  d / "margins.parquet")


def stage_advise(study: Study, d: Path) -> None:
    """Per pair: the advised K and predicted speedup (probe on the discovery prompts),
    and the realized speedup at that K on the reserved prompts (greedy)."""
    from .advise import advise, realized_speedup
    from .workloads import split_discovery
    discovery, reserved = split_discovery(load_prompt_set(d), 0.5)
    pool, rows = ModelPool(study), []
    for pair in tqdm(study.pairs, desc="advise", unit="pair"):
        target = pool.target(pair["target"])
        drafter = pool.drafter(pair["draft"], target, 0.0, study.settings["seed"])
        probe = [prompt_ids(target, r) for r in discovery[:2]]
        res = advise(target, drafter, probe, k_max=8, probe_tokens=study.settings["max_new_tokens"])
        real = realized_speedup(target, drafter, [prompt_ids(target, r) for r in reserved], res["k"],
                                max_new_tokens=study.settings["max_new_tokens"])
        rows.append({"pair": pair["name"], "target": pair["target"], "draft": pair["draft"],
                     "k": res["k"], "predicted_speedup": res["predicted_speedup"],
                     "realized_speedup": real, "enable": res["enable"],
                     "draft_to_target_ratio": res["draft_to_target_ratio"],
                     "advise_seconds": res["seconds"]})
    write_parquet(pd.DataFrame(rows), d / "advise.parquet")


def stage_analyze(study: Study, d: Path) -> None:
    from .analysis import analyze, write_derived
    write_derived(analyze(d), d)


STAGES = {name: globals()[f"stage_{name}"] for name in FILES}


def run_stage(name: str, study_name: str, results: Path) -> None:
    if name not in STAGES:
        raise ConfigError(f"unknown stage {name!r}: choose one of {', '.join(STAGES)}")
    study = load_study(study_name)
    results = Path(results)
    results.mkdir(parents=True, exist_ok=True)
    if study.threads:
        import os
        os.environ.setdefault("OMP_NUM_THREADS", str(study.threads))
    STAGES[name](study, results)
