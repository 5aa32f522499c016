"""Freezing refuses to overwrite without --force and keeps the previous manifest; two
machines freeze side by side; a changed byte in a frozen file is caught by the hash check;
drift compares with the frozen machine of the same CPU model only."""
import json

import pytest

from specproof.errors import SpecproofError
from specproof.publish.manifests import (DERIVED, RAW, freeze, frozen_sets, machine_label,
                                         nearest_frozen, verify_hashes)


def fake_results(tmp_path, content="a"):
    d = tmp_path / "results" / "s"
    d.mkdir(parents=True, exist_ok=True)
    for name in RAW + DERIVED:
        (d / name).write_text(json.dumps({"name": name, "c": content}) if name.endswith(".json") else content)
    (d / "provenance.json").write_text(json.dumps({"cpu": {"model": f"CPU {content}"}, "packages": {}}))
    return d


def test_freeze_refuses_without_force_and_keeps_history(tmp_path):
    res = fake_results(tmp_path)
    man = tmp_path / "manifests"
    first = json.loads(freeze("s", res, man, machine="m1").read_text())
    assert set(first["files"]) == set(RAW + DERIVED) and first["machine"] == "m1"
    with pytest.raises(SpecproofError, match="already frozen for machine 'm1'; use --force"):
        freeze("s", res, man, machine="m1")
    fake_results(tmp_path, "b")
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
    assert nearest_frozen(man, "s", {"cpu": {"model": "CPU a"}})[0] == "s@xeon"
    found, listed = nearest_frozen(man, "s", {"cpu": {"model": "other"}})
    assert found is None and listed == ["s@b (CPU b)", "s@xeon (CPU a)"]
    with pytest.raises(SpecproofError, match="--machine 'a/b'"):
        freeze("s", fake_results(tmp_path), man, machine="a/b")


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
