"""Parameters travel as arguments, never through the environment: the model directory
(``--model-dir`` -> ``run_stage(model_dir=)`` -> ``Study.model_dir`` -> ``resolve``) and the
study's threads (in each model spec, to the backend's ``threads``). No model is loaded."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specproof import cli
from specproof.evidence import stages
from specproof.models import loader
from specproof.models.files import resolve
from specproof.records import read_json
from specproof.study.config import load_study

SRC = Path(__file__).resolve().parents[1] / "src" / "specproof"
F16 = "SmolLM2-135M-Instruct.F16.gguf"  # the name embedded:smollm2-f16 is derived to

# every os.environ in src/ and why it is there: read to be recorded, or handed to a tool
# whose only interface it is; none passes a parameter of specproof's own
ENVIRON_ALLOWED = {
    "evidence/provenance.py": "env_threads",        # recorded in provenance, not used
    "llama_build.py": "dict(os.environ, CMAKE_ARGS=",  # pip's build of llama-cpp-python
}


def test_no_parameter_goes_through_the_environment():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"os\.environ|os\.getenv|os\.putenv|setenv", line):
                rel = path.relative_to(SRC).as_posix()
                if ENVIRON_ALLOWED.get(rel, "\0") not in line:
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_importing_the_hf_backend_leaves_the_environment_alone():
    code = ("import os; before = dict(os.environ); import specproof.models.hf; "
            "assert dict(os.environ) == before, set(os.environ.items()) ^ set(before.items())")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(SRC.parent)})
    assert res.returncode == 0, res.stderr


def test_resolve_derives_into_the_model_dir_it_is_given(tmp_path, monkeypatch):
    (tmp_path / F16).write_bytes(b"GGUF already derived")
    monkeypatch.setenv("SPECPROOF_MODEL_DIR", str(tmp_path / "ignored"))  # no longer read
    assert resolve("embedded:smollm2-f16", model_dir=tmp_path) == tmp_path / F16
    assert not (tmp_path / "ignored").exists()


def _study(tmp_path: Path, threads: int | None = None) -> Path:
    data = yaml.safe_load((Path(__file__).parent / "data" / "studies" / "tiny-mock.yaml").read_text())
    data["targets"]["mock-a"] = {"backend": "llama", "model": "embedded:smollm2-f16"}
    if threads:
        data["settings"]["threads"] = threads
    path = tmp_path / "tiny-mock.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_stage_models_resolves_in_the_model_dir_given_on_the_command_line(tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    (models / F16).write_bytes(b"GGUF already derived")
    monkeypatch.setattr(stages.M, "file_record", lambda p, project=None: {"path": str(p), "files": []})
    monkeypatch.delenv("SPECPROOF_MODEL_DIR", raising=False)
    results = tmp_path / "results"
    assert cli.main(["stage", "models", "--config", str(_study(tmp_path)), "--results", str(results),
                     "--model-dir", str(models)]) == 0
    assert read_json(results / "models.json")["target:mock-a"]["path"] == str(models.resolve() / F16)
    assert "SPECPROOF_MODEL_DIR" not in os.environ


class Loaded(Exception):
    pass


def test_the_pool_hands_model_dir_and_threads_to_the_backend(tmp_path, monkeypatch):
    seen = {}

    def fake_load(spec, model_dir=None):
        seen.update(spec=spec, model_dir=model_dir)
        raise Loaded

    monkeypatch.setattr(loader, "load_backend", fake_load)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    study = load_study(_study(tmp_path, threads=3))
    study.model_dir = tmp_path / "models"
    with pytest.raises(Loaded):
        loader.ModelPool(study.restricted(target="mock-a")).target("mock-a")
    assert seen["model_dir"] == tmp_path / "models" and seen["spec"]["threads"] == 3
    assert "OMP_NUM_THREADS" not in os.environ
