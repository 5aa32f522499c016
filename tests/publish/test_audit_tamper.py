"""The audit reads raw records only: each attack below, made on a copy of the frozen
record set paper-smollm2@epyc-avx512 by a careful tamperer (the manifest re-hashed, the
paper's numbers set to what the tampered record claims, every manifest_sha256 updated), makes
`specproof audit` exit 2 with one line naming the field or number and the file.

Raw records are never changed by the attacks on derived files and summaries, so those tests
reuse one analysis of the untouched set (``analysis``) instead of recomputing it each time;
one test runs the whole audit unaided."""
import shutil
from pathlib import Path

import pytest

from specproof.cli import main
from specproof.publish.manifests import manifest_sha256, set_dir
from specproof.records import read_json, read_parquet, sha256_file, write_json, write_parquet

ROOT = Path(__file__).resolve().parents[2]
SET = "paper-smollm2@epyc-avx512"


@pytest.fixture(scope="module")
def analysis():
    from specproof.analysis.analyze import analyze
    return analyze(set_dir(ROOT / "manifests", SET))


@pytest.fixture
def copy(tmp_path, analysis):
    """The frozen set and its numbers (the set's, computed here, whether or not the
    committed paper reports it, and the benchmarks') in tmp_path."""
    from specproof.publish.numbers import study_numbers
    shutil.copytree(set_dir(ROOT / "manifests", SET), set_dir(tmp_path / "manifests", SET))
    numbers = read_json(ROOT / "paper" / "build" / "numbers.json")
    bench = {k: v for k, v in numbers.items() if k.startswith("bench.")}
    own = study_numbers(analysis, manifest_sha256(ROOT / "manifests", SET), prefix=SET)
    write_json({**own, **bench}, tmp_path / "numbers.json")
    return tmp_path


@pytest.fixture
def cached(monkeypatch, analysis):
    """The audit's analysis of a copy whose raw records are untouched: the one computed."""
    monkeypatch.setattr("specproof.analysis.analyze.analyze", lambda d: analysis)


def rehash(tmp: Path, edits: dict | None = None, drop: str | None = None) -> None:
    """What a careful tamperer does: drop a record from the manifest (if asked), re-hash
    every listed file and the provenance, and set the edited numbers and every number's
    manifest_sha256 to match."""
    d = set_dir(tmp / "manifests", SET)
    manifest = read_json(d / "manifest.json")
    if drop:
        (d / drop).unlink()
        del manifest["files"][drop]
    for name in manifest["files"]:
        manifest["files"][name] = {"sha256": sha256_file(d / name), "bytes": (d / name).stat().st_size}
    manifest["provenance_sha256"] = manifest["files"]["provenance.json"]["sha256"]
    write_json(manifest, d / "manifest.json")
    numbers = read_json(tmp / "numbers.json")
    for key, value in (edits or {}).items():
        numbers[f"{SET}.{key}"]["value"] = value
    for key, rec in numbers.items():
        if key.startswith(f"{SET}."):
            rec["manifest_sha256"] = manifest_sha256(tmp / "manifests", SET)
    write_json(numbers, tmp / "numbers.json")


def audit_line(tmp: Path, capsys) -> str:
    """Run `specproof audit` on the copy; it must exit 2 with one line on stderr."""
    rc = main(["audit", "--studies", SET, "--manifests", str(tmp / "manifests"),
               "--numbers", str(tmp / "numbers.json"), "--benchmarks", str(ROOT / "benchmarks" / "results")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    return err


def edit_json(path: Path, change) -> None:
    data = read_json(path)
    change(data)
    write_json(data, path)


# ---------------------------------------------------------------- raw-record attacks

def _q_flags(d):
    """Set ids_equal True on the failing runs of the first path that has any."""
    q = read_parquet(d / "qualification.parquet")
    failing = q[~q["ids_equal"].astype(bool)]
    target, mode = failing["target"].iloc[0], failing["verify_mode"].iloc[0]
    path = (q["target"] == target) & (q["verify_mode"] == mode)
    q.loc[path, "ids_equal"] = True
    write_parquet(q, d / "qualification.parquet")
    base = f"qualification.{target}.{mode}"
    return {f"{base}.matched": int(path.sum()), f"{base}.qualifies": True}, \
        ["qualification.parquet", "field ids_equal", "reference.parquet"]


def _p_live(d):
    """Give the missed reserved runs their predicted ids in prediction_live.parquet."""
    doc = read_json(d / "predictions.json")
    live = read_parquet(d / "prediction_live.parquet")
    live["ids"] = [doc["predictions"][f"{r.target}|{r.verify_mode}|{r.prompt_id}"] for r in live.itertuples()]
    write_parquet(live, d / "prediction_live.parquet")
    return {"prediction.P_matched": len(live)}, ["prediction_live.parquet", "field ids", "qualification.parquet"]


def _git_dirty(d):
    edit_json(d / "provenance.json", lambda p: p["git"].update(dirty=not p["git"]["dirty"]))
    return {}, ["provenance.json", "field git.dirty", "manifest"]


def _git_commit(d):
    edit_json(d / "provenance.json", lambda p: p["git"].update(commit="0" * 40))
    return {"software.git_commit": "0" * 10}, ["provenance.json", "field git.commit", "manifest"]


@pytest.mark.parametrize("tamper", [_q_flags, _p_live, _git_dirty, _git_commit], ids=lambda f: f.__name__.strip("_"))
def test_a_consistent_edit_of_a_raw_record_fails_the_audit(copy, capsys, tamper):
    edits, names = tamper(set_dir(copy / "manifests", SET))
    rehash(copy, edits)
    line = audit_line(copy, capsys)
    assert all(name in line for name in names), line


@pytest.mark.parametrize("record", ["margins.parquet", "prediction_live.parquet", "level1.parquet",
                                    "calibration_power.parquet", "advise_runs.parquet"])
def test_a_deleted_raw_record_is_an_error_not_a_fallback(copy, capsys, record):
    """The set's manifest format (inferred: it lists the newer raw records) holds the
    record, so its loss is named, not silently replaced by a summary."""
    rehash(copy, drop=record)
    line = audit_line(copy, capsys)
    assert record in line and "missing" in line and "manifest format 2" in line, line


# ---------------------------------------------------------------- derived files and summaries

def _certificate(d):
    edit_json(d / "certificate.json", lambda c: c.update(rejected=not c["rejected"]))
    return ["certificate.json", "field rejected", "pit.parquet"]


def _certificate_pair(d):
    def flip(c):
        pair = next(iter(c["per_pair"]))
        c["per_pair"][pair]["min_pvalue"] *= 0.5
    edit_json(d / "certificate.json", flip)
    return ["certificate.json", "field per_pair.", ".min_pvalue"]


def _stats(d):
    edit_json(d / "stats.json", lambda s: s["speedup"][0].update(gmean_speedup=s["speedup"][0]["gmean_speedup"] * 1.5))
    return ["stats.json", "field speedup[0].gmean_speedup", "runs.parquet"]


def _calibration(d):
    edit_json(d / "calibration.json", lambda c: c["orders"]["id"].update(null_rejection_rate=0.9))
    return ["calibration.json", "field orders.id.null_rejection_rate", "calibration.parquet"]


def _prediction(d):
    edit_json(d / "prediction.json", lambda p: p.update(P_matched=p["P_total"]))
    return ["prediction.json", "field P_matched", "qualification.parquet"]


def _costs(d):
    costs = read_parquet(d / "costs.parquet")
    costs.loc[0, "S_measured"] *= 2
    write_parquet(costs, d / "costs.parquet")
    return ["costs.parquet", "row 0, field S_measured", "rounds.parquet"]


def _agreement(d):
    agree = read_parquet(d / "agreement.parquet")
    row = agree.index[~agree["Q"]][0]
    agree.loc[row, "Q"] = True
    write_parquet(agree, d / "agreement.parquet")
    return ["agreement.parquet", f"row {row}, field Q", "reference.parquet"]


def _advise(d):
    adv = read_parquet(d / "advise.parquet")
    adv.loc[0, "realized_speedup"] *= 2
    write_parquet(adv, d / "advise.parquet")
    return ["advise.parquet", "row 0, field realized_speedup", "advise_runs.parquet"]


@pytest.mark.parametrize("tamper", [_certificate, _certificate_pair, _stats, _calibration, _prediction, _costs,
                                    _agreement, _advise], ids=lambda f: f.__name__.strip("_"))
def test_a_derived_file_or_summary_unlike_its_recomputation_fails_the_audit(copy, capsys, cached, tamper):
    names = tamper(set_dir(copy / "manifests", SET))
    rehash(copy)
    line = audit_line(copy, capsys)
    assert all(name in line for name in names), line


def test_the_copy_rehashed_untouched_passes(copy, capsys, cached):
    """The harness itself changes nothing the audit checks."""
    rehash(copy)
    rc = main(["audit", "--studies", SET, "--manifests", str(copy / "manifests"),
               "--numbers", str(copy / "numbers.json"), "--benchmarks", str(ROOT / "benchmarks" / "results")])
    assert rc == 0, capsys.readouterr().err


def test_the_whole_audit_unaided_catches_a_flipped_certificate(copy, capsys):
    """As ``_certificate``, with the audit computing its own analysis of the copy."""
    names = _certificate(set_dir(copy / "manifests", SET))
    rehash(copy)
    line = audit_line(copy, capsys)
    assert all(name in line for name in names), line
