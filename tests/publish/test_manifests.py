"""Freezing refuses to overwrite without --force and keeps the previous manifest; a
changed byte in a frozen file is caught by the hash check."""
import json

import pytest

from specproof.errors import SpecproofError
from specproof.publish.manifests import DERIVED, RAW, freeze, verify_hashes


def fake_results(tmp_path, content="a"):
    d = tmp_path / "results" / "s"
    d.mkdir(parents=True, exist_ok=True)
    for name in RAW + DERIVED:
        (d / name).write_text(json.dumps({"name": name, "c": content}) if name.endswith(".json") else content)
    return d


def test_freeze_refuses_without_force_and_keeps_history(tmp_path):
    res = fake_results(tmp_path)
    man = tmp_path / "manifests"
    first = json.loads(freeze("s", res, man).read_text())
    assert set(first["files"]) == set(RAW + DERIVED)
    with pytest.raises(SpecproofError, match="already frozen; use --force"):
        freeze("s", res, man)
    fake_results(tmp_path, "b")
    freeze("s", res, man, force=True)
    hist = list((man / "s" / "history").glob("manifest-*.json"))
    assert len(hist) == 1 and json.loads(hist[0].read_text())["files"] == first["files"]
    assert (man / "s" / "runs.parquet").read_text() == "b"


def test_unfinished_study_is_not_frozen(tmp_path):
    res = fake_results(tmp_path)
    (res / "pit.parquet").unlink()
    with pytest.raises(SpecproofError, match="not finished.*pit.parquet"):
        freeze("s", res, tmp_path / "manifests")


def test_hash_check_names_the_changed_file(tmp_path):
    res = fake_results(tmp_path)
    man = tmp_path / "manifests"
    freeze("s", res, man)
    verify_hashes(man, "s")
    target = man / "s" / "rounds.parquet"
    data = bytearray(target.read_bytes())
    data[0] ^= 1
    target.write_bytes(bytes(data))
    with pytest.raises(SpecproofError, match="rounds.parquet: sha256 .* does not match"):
        verify_hashes(man, "s")
