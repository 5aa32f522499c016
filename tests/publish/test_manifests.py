"""Freezing refuses to overwrite without --force and keeps the previous manifest; two
machines freeze side by side; a changed byte in a frozen file is caught by the hash check;
drift compares with the frozen set of the same machine fingerprint, and a machine label
never names two machines."""
import json

import pytest

from specproof.errors import SpecproofError
from specproof.catalog import format_records
from specproof.publish.manifests import (freeze, frozen_sets, machine_label, matching_frozen, relabel,
                                         verify_hashes)


def fake_results(tmp_path, content="a", cpu=None):
    d = tmp_path / "results" / "s"
    d.mkdir(parents=True, exist_ok=True)
    for name in format_records(1):
        (d / name).write_text(json.dumps({"name": name, "c": content}) if name.endswith(".json") else content)
    (d / "provenance.json").write_text(json.dumps({"cpu": {"model": f"CPU {cpu or content}"}, "packages": {}}))
    return d


def test_freeze_refuses_without_force_and_keeps_history(tmp_path):
    res = fake_results(tmp_path)
    man = tmp_path / "manifests"
    first = json.loads(freeze("s", res, man, machine="m1").read_text())
    assert set(first["files"]) == set(format_records(1)) and first["machine"] == "m1"
    with pytest.raises(SpecproofError, match="already frozen for machine 'm1'; use --force"):
        freeze("s", res, man, machine="m1")
    fake_results(tmp_path, "b", cpu="a")
    freeze("s", res, man, force=True, machine="m1")
    hist = list((man / "s" / "m1" / "history").glob("manifest-*.json"))
    assert len(hist) == 1 and json.loads(hist[0].read_text())["files"] == first["files"]
    assert (man / "s" / "m1" / "runs.parquet").read_text() == "b"
    assert sorted(p.name for p in (man / "s").iterdir()) == ["m1"]  # no temporary left behind


def test_a_second_machine_freezes_beside_the_first(tmp_path):
    man = tmp_path / "manifests"
    freeze("s", fake_results(tmp_path, "a"), man, machine="xeon")
    freeze("s", fake_results(tmp_path, "b"), man)  # default label from the CPU model: "b"
    assert frozen_sets(man, "s") == ["s@b", "s@xeon"]
    assert (man / "s" / "xeon" / "runs.parquet").read_text() == "a"
    assert (man / "s" / "b" / "runs.parquet").read_text() == "b"
    verify_hashes(man, "s@xeon")
    verify_hashes(man, "s@b")
    assert matching_frozen(man, "s", {"cpu": {"model": "CPU a"}})[0] == "s@xeon"
    same, nearest, fields = matching_frozen(man, "s", {"cpu": {"model": "other"}})
    assert same is None and nearest == "s@b" and fields[0] == "model_name"
    with pytest.raises(SpecproofError, match="--machine 'a/b'"):
        freeze("s", fake_results(tmp_path), man, machine="a/b")


def test_freeze_refuses_a_label_that_names_another_machine_naming_both(tmp_path):
    man = tmp_path / "manifests"
    freeze("s", fake_results(tmp_path, "a"), man, machine="epyc")
    with pytest.raises(SpecproofError, match=r"--machine epyc: already names the machine of s@epyc, a different "
                                             r"machine from this run's \(model_name CPU a vs CPU b\)"):
        freeze("s", fake_results(tmp_path, "b"), man, machine="epyc", force=True)
    data = json.loads((tmp_path / "results" / "s" / "provenance.json").read_text())
    with pytest.raises(SpecproofError, match="already names the machine of s@epyc"):  # another study, same label
        (tmp_path / "results" / "t").mkdir()
        for f in (tmp_path / "results" / "s").iterdir():
            (tmp_path / "results" / "t" / f.name).write_bytes(f.read_bytes())
        freeze("t", tmp_path / "results" / "t", man, machine="epyc")
    assert data["cpu"]["model"] == "CPU b"
    assert json.loads((man / "s" / "epyc" / "provenance.json").read_text())["cpu"]["model"] == "CPU a"


def test_relabel_moves_a_set_unchanged_and_keeps_its_manifest_in_history(tmp_path):
    man = tmp_path / "manifests"
    first = json.loads(freeze("s", fake_results(tmp_path, "a"), man, machine="old").read_text())
    path = relabel("s", man, "old", "new")
    moved = json.loads(path.read_text())
    assert moved["files"] == first["files"] and moved["machine"] == "new" and moved["relabelled_from"] == "old"
    assert frozen_sets(man, "s") == ["s@new"] and verify_hashes(man, "s@new")
    assert [json.loads(p.read_text())["machine"] for p in (man / "s" / "new" / "history").iterdir()] == ["old"]
    freeze("t", fake_results(tmp_path, "b"), man, machine="other")
    with pytest.raises(SpecproofError, match="already names the machine of t@other"):
        relabel("s", man, "new", "other")


def test_machine_label_from_cpu_model():
    assert machine_label({"cpu": {"model": "AMD EPYC"}}) == "amd-epyc"
    assert machine_label({"cpu": {"model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"}}) == \
        "intel-xeon-platinum-8481c"


def test_unfinished_study_is_not_frozen(tmp_path):
    res = fake_results(tmp_path)
    (res / "pit.parquet").unlink()
    with pytest.raises(SpecproofError, match="not finished.*pit.parquet"):
        freeze("s", res, tmp_path / "manifests")


def test_hash_check_names_the_changed_file(tmp_path):
    res = fake_results(tmp_path)
    man = tmp_path / "manifests"
    freeze("s", res, man, machine="m")
    verify_hashes(man, "s@m")
    target = man / "s" / "m" / "rounds.parquet"
    data = bytearray(target.read_bytes())
    data[0] ^= 1
    target.write_bytes(bytes(data))
    with pytest.raises(SpecproofError, match="rounds.parquet: sha256 .* does not match"):
        verify_hashes(man, "s@m")


def test_the_machines_section_compares_the_study_frozen_on_several_machines():
    from specproof.publish.manifests import compared_sets
    quick = ["cpu@xeon", "cpu@epyc"]
    # a head study on one machine: the first listed study that has several
    assert compared_sets(["paper@epyc512", *quick]) == quick
    # a head study on several machines is compared itself, whatever follows
    assert compared_sets(["paper@a", "paper@b", *quick]) == ["paper@a", "paper@b"]
    # unfrozen (bare) sets and single-machine studies compare nothing
    assert compared_sets(["paper", "cpu@xeon"]) == []


def test_drift_names_the_same_machine_or_says_in_its_first_line_that_none_matches():
    """A rerun is compared with the frozen set of its machine fingerprint; on a machine no
    set was frozen on, drift.md's first line says so and names the nearest set and every
    field that differs (the quick tier is frozen on an AVX-512 Xeon and an AVX2 EPYC)."""
    from pathlib import Path
    from specproof.publish.manifests import _drift_heading
    from specproof.records import read_json
    root = Path(__file__).resolve().parents[2]
    xeon = read_json(root / "manifests" / "cpu-smollm2" / "xeon-avx512" / "provenance.json")
    same, lines = _drift_heading("cpu-smollm2", Path("results/cpu-smollm2"), root / "manifests", xeon)
    assert same == "cpu-smollm2@xeon-avx512"
    assert lines[0].startswith("# Drift report: cpu-smollm2, rerun against cpu-smollm2@xeon-avx512")
    other = json.loads(json.dumps(xeon))
    other["cpu"]["simd_flags"] = [*other["cpu"]["simd_flags"], "avx512_vp2intersect"]
    nearest, lines = _drift_heading("cpu-smollm2", Path("results/cpu-smollm2"), root / "manifests", other)
    assert nearest == "cpu-smollm2@xeon-avx512"
    assert lines[0].startswith("# Another machine, not drift: no frozen record set of cpu-smollm2 matches this "
                               "machine; the nearest, cpu-smollm2@xeon-avx512, differs in simd_flags_sha256")
