"""The audit recomputes the stage summaries from their raw records: on a record set made by
the real stages on a mock pair, editing a summary file and numbers.json together,
consistently, with the manifest re-hashed, fails the audit with one line naming the number
and the raw file it is recomputed from; a set frozen before the raw records existed is
audited against its summaries, and the audit says how many numbers that concerns."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from specproof.analysis.analyze import analyze, stage_analyze
from specproof.analysis.summaries import recompute
from specproof.catalog import MANIFEST_FORMAT, format_records, newer_records
from specproof.errors import SpecproofError
from specproof.evidence.stages import SEEDED, STAGES
from specproof.publish.audit.provenance import LEGACY_SETS
from specproof.publish.manifests import audit, freeze, manifest_sha256, set_dir
from specproof.publish.numbers import study_numbers
from specproof.records import (canonical_json, read_json, read_parquet, sha256_file, sha256_text, strict_json,
                               write_json, write_parquet)
from specproof.study.config import load_study

SET = "mockstudy@m"
ORDER = ["models", "prompts", "provenance", "reference", "micro", "batch_invariance", "predict", "runs",
         "pit", "qualification", "predicted", "margins", "advise", "level1", "level2", "calibration"]
STUDY = {
    "name": "mockstudy", "settings": {"max_new_tokens": 12, "seed": 3},
    "workloads": {"chat": {"source": "builtin", "n": 4}},
    "targets": {"mt": {"backend": "mock", "vocab_size": 48, "seed": 4, "scale": 3.0}},
    "drafts": {"md": {"backend": "mock", "vocab_size": 48, "seed": 4, "scale": 3.0, "noise": 1.0}},
    "pairs": [{"target": "mt", "draft": "md"}],
    "grid": [{"k": [2], "policy": ["fixed"], "verify_mode": ["batched"], "temperature": [0.0, 1.0]}],
    "micro": {"max_b": 3, "repeats": 2},
    "qualification": {"repetitions": 1, "k": 2},
    "certificate": {"calibration_repetitions": 20, "null_repetitions": 20, "alpha": 0.05},
}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Every stage of a mock study, run into results/, frozen as mockstudy@m, with its
    numbers.json."""
    tmp = tmp_path_factory.mktemp("audit")
    (tmp / "mockstudy.yaml").write_text(yaml.safe_dump(STUDY))
    study = load_study(tmp / "mockstudy.yaml")
    results = tmp / "results" / "mockstudy"
    results.mkdir(parents=True)
    for name in ORDER:
        if name in SEEDED:
            SEEDED[name](study.settings["seed"], results)
        else:
            STAGES[name](study, results)
    stage_analyze(results)
    freeze("mockstudy", results, tmp / "manifests", machine="m")
    write_numbers(tmp / "manifests", tmp / "numbers.json")
    return tmp


def write_numbers(manifests: Path, out: Path) -> dict:
    numbers = study_numbers(analyze(set_dir(manifests, SET)), manifest_sha256(manifests, SET), prefix=SET)
    write_json(numbers, out)
    return numbers


@pytest.fixture
def copy(made, tmp_path):
    shutil.copytree(made / "manifests", tmp_path / "manifests")
    shutil.copy2(made / "numbers.json", tmp_path / "numbers.json")
    return tmp_path


def rehash(tmp: Path, edits: dict) -> None:
    """What a careful tamperer does: re-hash the manifest, and set the edited numbers and
    every number's manifest_sha256 to match."""
    d = set_dir(tmp / "manifests", SET)
    manifest = read_json(d / "manifest.json")
    for name in manifest["files"]:
        manifest["files"][name] = {"sha256": sha256_file(d / name), "bytes": (d / name).stat().st_size}
    write_json(manifest, d / "manifest.json")
    numbers = read_json(tmp / "numbers.json")
    for key, value in edits.items():
        numbers[f"{SET}.{key}"]["value"] = value
    for rec in numbers.values():
        rec["manifest_sha256"] = manifest_sha256(tmp / "manifests", SET)
    write_json(numbers, tmp / "numbers.json")


def edit_json(path: Path, change) -> None:
    data = read_json(path)
    change(data)
    write_json(data, path)


def run_audit(tmp: Path) -> list[str]:
    return audit([SET], tmp / "manifests", tmp / "numbers.json")


def test_the_made_set_passes_and_every_summary_number_comes_from_a_raw_record(made):
    report = run_audit(made)
    assert f"{SET}: 0 of them checked only against a summary, the set holding no raw record for them" in report
    numbers = read_json(made / "numbers.json")
    sources = {k.removeprefix(SET + "."): v["source"] for k, v in numbers.items()}
    assert sources["calibration.id.null_rejection_rate"] == "calibration.parquet"
    assert sources["certificate.detectable_tv_80"] == "calibration_power.parquet"
    assert sources["level1.max_exact_error"] == "level1.parquet"
    assert sources["level2.ks_pvalue"] == "level2.parquet"
    assert sources["prediction.P_matched"] == "prediction_live.parquet"
    assert sources["prediction.discovery_holds"] == "predictions.json"
    assert sources["advise.mt+md.predicted"] == "advise_rounds.parquet"
    assert sources["advise.mt+md.realized"] == "advise_runs.parquet"
    assert set(read_json(set_dir(made / "manifests", SET) / "manifest.json")["files"]) >= set(newer_records())


def test_the_raw_records_give_back_the_stages_summaries(made):
    """What the stages wrote as summaries is what the audit recomputes from their rows."""
    d = made / "results" / "mockstudy"
    pit = read_parquet(d / "pit.parquet")
    s = recompute(d, 0.05, int((pit["path"] == "speculative").sum()))
    cal = read_json(d / "calibration.json")
    # the stages write non-finite floats as null (strict JSON): compare as written
    same = lambda a, b: strict_json(a, sort_keys=True) == strict_json(b, sort_keys=True)  # noqa: E731
    assert same(s.calibration["orders"], cal["orders"])
    assert same(s.calibration["power_curve"], cal["power_curve"])
    assert s.level1 == read_json(d / "level1.json")
    level2 = read_json(d / "level2.json")
    assert {k: s.level2[k] for k in ("n_tokens", "ks_pvalue", "rank_order", "ratio_order")} == \
        {k: level2[k] for k in ("n_tokens", "ks_pvalue", "rank_order", "ratio_order")}
    pred = read_json(d / "prediction.json")
    assert (s.prediction["P_matched"], s.prediction["P_total"]) == (pred["P_matched"], pred["P_total"])
    assert pred["P_total"] == 4  # one target, two verify paths, the two reserved prompts
    cols = ["pair", "k", "predicted_speedup", "realized_speedup", "enable", "draft_to_target_ratio", "model",
            "predicted_low", "predicted_high", "micro_predicted_speedup"]
    pd.testing.assert_frame_equal(s.advise[cols], read_parquet(d / "advise.parquet")[cols])


def test_every_json_the_stages_analysis_and_numbers_write_is_strict(made):
    """No bare NaN or Infinity in any record (stats.json, certificate.json, calibration.json,
    provenance, predictions, numbers.json, ...): a strict parser reads them all."""
    def refuse(name):
        raise AssertionError(f"bare {name}")
    written = sorted(made.rglob("*.json"))
    assert {"stats.json", "certificate.json", "calibration.json", "provenance.json",
            "predictions.json", "numbers.json"} <= {p.name for p in written}
    for path in written:
        json.loads(path.read_text(), parse_constant=refuse)


def _calibration(d):
    edit_json(d / "calibration.json", lambda c: c["orders"]["id"].update(null_rejection_rate=0.9))
    return {"calibration.id.null_rejection_rate": 0.9}, "calibration.parquet", \
        "calibration.json: field orders.id.null_rejection_rate"


def _detectable_tv(d):
    edit_json(d / "calibration.json", lambda c: c.update(detectable_tv_80=0.001))
    return {"certificate.detectable_tv_80": 0.001}, "calibration_power.parquet", \
        "calibration.json: field detectable_tv_80"


def _advise(d):
    adv = read_parquet(d / "advise.parquet")
    adv["predicted_speedup"] *= 2
    write_parquet(adv, d / "advise.parquet")
    return {"advise.mt+md.predicted": float(adv["predicted_speedup"].iloc[0])}, "advise_rounds.parquet", \
        "advise.parquet: row 0, field predicted_speedup"


def _level1(d):
    edit_json(d / "level1.json", lambda c: c.update(max_exact_error=0.25))
    return {"level1.max_exact_error": 0.25}, "level1.parquet", "level1.json: field max_exact_error"


def _level2(d):
    edit_json(d / "level2.json", lambda c: c.update(ks_pvalue=0.5))
    return {"level2.ks_pvalue": 0.5}, "level2.parquet", "level2.json: field ks_pvalue"


def _p_count(d):
    def drop_one(p):
        p["P_matched"] -= 1
        p["live"][0]["match"] = False
    edit_json(d / "prediction.json", drop_one)
    return {"prediction.P_matched": read_json(d / "prediction.json")["P_matched"]}, "qualification.parquet", \
        "prediction.json: field live[0].match"


@pytest.mark.parametrize("tamper", [_calibration, _detectable_tv, _advise, _level1, _level2, _p_count],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_consistent_edit_of_a_summary_and_numbers_json_fails_the_audit(copy, tamper):
    """The summary is compared with its recomputation before any number is: the line
    names the summary's field and the raw file it is recomputed from."""
    _, raw, field = tamper(set_dir(copy / "manifests", SET))
    rehash(copy, {})
    with pytest.raises(SpecproofError) as err:
        run_audit(copy)
    line = str(err.value)
    assert "\n" not in line and field in line and raw in line


@pytest.mark.parametrize("tamper", [_calibration, _detectable_tv, _advise, _level1, _level2, _p_count],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_number_edited_in_numbers_json_alone_fails_the_audit(copy, tamper):
    """numbers.json claims the tampered value while every record is intact: the line names
    the number and the raw file it is recomputed from."""
    scratch = copy / "scratch"  # the tampered value, made on a copy the audit does not read
    shutil.copytree(set_dir(copy / "manifests", SET), scratch)
    edits, raw, _ = tamper(scratch)
    rehash(copy, edits)
    key = f"{SET}.{next(iter(edits))}"
    with pytest.raises(SpecproofError) as err:
        run_audit(copy)
    line = str(err.value)
    source = "prediction_live.parquet" if raw == "qualification.parquet" else raw  # P's label
    assert "\n" not in line and key in line and f"{source} gives" in line and str(copy / "numbers.json") in line


def test_the_cli_prints_the_one_line_and_exits_2(copy):
    _calibration(set_dir(copy / "manifests", SET))
    rehash(copy, {})
    res = subprocess.run([str(Path(sys.executable).parent / "specproof"), "audit", "--studies", SET,
                          "--manifests", str(copy / "manifests"), "--numbers", str(copy / "numbers.json")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "orders.id.null_rejection_rate" in res.stderr and "calibration.parquet" in res.stderr


def test_a_set_frozen_before_the_raw_records_is_audited_against_its_summaries(copy, monkeypatch):
    """Such a set (format 1, as the cpu-smollm2 sets in manifests/ are: its manifest records
    no format and lists none of the newer raw records), when it is one of the legacy sets the
    audit lists by manifest sha256, still analyzes and audits; the audit names it, and says
    how many numbers it could only check against a summary, per file. Unlisted, it fails."""
    d = set_dir(copy / "manifests", SET)
    # the earlier form of the seal held the sealed predictions inside prediction_seal.json
    doc, seal = read_json(d / "predictions.json"), read_json(d / "prediction_seal.json")
    write_json({**doc, "predictions_sha256": sha256_text(canonical_json(doc["predictions"])),
                "sealed_at": seal["sealed_at"]}, d / "prediction_seal.json")
    for name in newer_records():
        (d / name).unlink()
    manifest = read_json(d / "manifest.json")
    manifest.pop("format")
    manifest["files"] = {k: v for k, v in manifest["files"].items() if k not in newer_records()}
    manifest["files"]["prediction_seal.json"]["sha256"] = sha256_file(d / "prediction_seal.json")
    write_json(manifest, d / "manifest.json")
    numbers = write_numbers(copy / "manifests", copy / "numbers.json")
    with pytest.raises(SpecproofError, match=r"manifest\.json: field files lacks calibration_power\.parquet "
                                             r"\(manifest format 1\).*not one of the legacy sets"):
        run_audit(copy)
    monkeypatch.setitem(LEGACY_SETS, manifest_sha256(copy / "manifests", SET), SET)
    report = run_audit(copy)
    line = next(x for x in report if "checked only against a summary" in x)
    # 3 detectable TVs (id, rank, whole rule); level1: 3; level2: 4; P_matched, P_total and
    # matched, total per verify path (2); advise: 9 per pair (k, predicted, its interval's two
    # ends, the micro model, the loop model, the confirmation's prompts, realized, enable) and
    # its 4 summary counts
    assert line == (f"{SET}: 29 of them checked only against a summary, the set holding no raw record "
                    "for them: 13 from advise.parquet, 3 from calibration.json, 3 from level1.json, "
                    "4 from level2.json, 6 from prediction.json")
    assert f"{SET}: manifest format 1 (inferred), frozen before {', '.join(newer_records())} were written; the " \
        "numbers computed from them come from the stage summaries" in report
    assert numbers[f"{SET}.calibration.id.null_rejection_rate"]["source"] == "calibration.parquet"
    assert numbers[f"{SET}.prediction.discovery_holds"]["source"] == "prediction_seal.json"


def test_freeze_records_the_manifest_format(made):
    manifest = read_json(set_dir(made / "manifests", SET) / "manifest.json")
    assert manifest["format"] == MANIFEST_FORMAT and set(manifest["files"]) == set(format_records(MANIFEST_FORMAT))


def test_a_format_2_set_missing_a_raw_record_fails_the_audit(copy):
    """Deleting a raw record with its manifest entry is named, not a silent fall-back."""
    d = set_dir(copy / "manifests", SET)
    (d / "level1.parquet").unlink()
    edit_json(d / "manifest.json", lambda m: m["files"].pop("level1.parquet"))
    write_numbers(copy / "manifests", copy / "numbers.json")
    with pytest.raises(SpecproofError, match=r"level1\.parquet: missing from a set of manifest format 2 "
                                             r"\(recorded\).*level1\.\*"):
        run_audit(copy)
