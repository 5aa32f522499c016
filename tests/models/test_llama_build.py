"""llama.cpp build flags chosen from recorded CPUs, the rebuild rule, the smoke check's crash path."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specproof import llama_build as lb

CPUINFO = Path(__file__).parents[1] / "data" / "cpuinfo"


def flags_for(name: str, machine: str = "x86_64", system: str = "Linux") -> dict[str, str]:
    cpu = lb.read_cpu((CPUINFO / name).read_text(), machine=machine, system=system)
    _, args = lb.choose_cmake_args(cpu)
    return dict(a.removeprefix("-D").split("=") for a in args)


def test_xeon_with_amx_gets_avx512_and_never_amx():
    f = flags_for("xeon-sapphire-rapids.txt")
    assert f["GGML_NATIVE"] == "OFF"
    assert f["GGML_AVX512"] == "ON" and f["GGML_AVX2"] == "ON"
    assert f["GGML_AMX_TILE"] == f["GGML_AMX_INT8"] == f["GGML_AMX_BF16"] == "OFF"


def test_epyc_without_avx512_gets_avx2_only():
    f = flags_for("epyc-zen3.txt")
    assert f["GGML_AVX2"] == f["GGML_FMA"] == f["GGML_F16C"] == f["GGML_AVX"] == "ON"
    assert f["GGML_AVX512"] == "OFF"
    assert f["GGML_NATIVE"] == "OFF"


def test_avx2_only_cpu():
    f = flags_for("haswell-avx2.txt")
    assert f["GGML_AVX2"] == f["GGML_BMI2"] == "ON" and f["GGML_AVX512"] == "OFF"


def test_avx512_needs_every_subset_it_compiles_for():
    cpu = {"machine": "x86_64", "system": "Linux", "model": "x",
           "features": ["avx", "avx2", "fma", "f16c", "avx512f"]}  # no avx512bw/vl/dq/cd
    _, args = lb.choose_cmake_args(cpu)
    assert "-DGGML_AVX512=OFF" in args


def test_aarch64_and_macos_use_llamas_defaults():
    assert flags_for("neoverse-n1-aarch64.txt", machine="aarch64") == {"GGML_NATIVE": "ON"}
    assert flags_for("neoverse-n1-aarch64.txt", machine="arm64", system="Darwin") == {"GGML_METAL": "ON"}
    cpu = lb.read_cpu((CPUINFO / "neoverse-n1-aarch64.txt").read_text(), machine="aarch64")
    assert "asimddp" in lb.wanted_record(cpu)["cpu"]["features"]  # native: all features recorded


def test_override_and_record_of_the_features_that_chose():
    cpu = lb.read_cpu((CPUINFO / "epyc-zen3.txt").read_text(), machine="x86_64", system="Linux")
    rec = lb.wanted_record(cpu)
    assert rec["chosen_by"] == "x86-64 features" and rec["cpu"]["model"] == "AMD EPYC"
    assert "avx2" in rec["cpu"]["features"] and "avx512f" not in rec["cpu"]["features"]
    assert "sse" not in rec["cpu"]["features"]  # only features that choose a flag
    over = lb.wanted_record(cpu, "-DGGML_CUDA=ON")
    assert over["cmake_args"] == "-DGGML_CUDA=ON" and over["chosen_by"] == "LLAMA_CMAKE_ARGS"


def test_a_build_carried_from_another_cpu_is_rebuilt():
    xeon = lb.wanted_record(lb.read_cpu((CPUINFO / "xeon-sapphire-rapids.txt").read_text(), "x86_64", "Linux"))
    epyc = lb.wanted_record(lb.read_cpu((CPUINFO / "epyc-zen3.txt").read_text(), "x86_64", "Linux"))
    assert lb.needs_build(epyc, epyc, lb.LLAMA_VERSION) is None
    assert "do not fit" in lb.needs_build(xeon, epyc, lb.LLAMA_VERSION)
    assert "no build record" in lb.needs_build(None, epyc, lb.LLAMA_VERSION)
    assert "absent" in lb.needs_build(epyc, epyc, None)
    old = dict(epyc, cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON "
                                "-DGGML_F16C=ON -DGGML_AVX512=ON")  # the flags that crashed the EPYC
    assert lb.needs_build(old, epyc, lb.LLAMA_VERSION) is not None


def test_smoke_check_names_the_signal_flags_and_override(tmp_path):
    crash = "import os, signal; os.kill(os.getpid(), signal.SIGILL)"
    msg = lb.smoke_check(tmp_path / "draft.gguf", "-DGGML_AVX512=ON", code=crash)
    assert msg is not None and "\n" not in msg
    assert "SIGILL" in msg and "-DGGML_AVX512=ON" in msg and "LLAMA_CMAKE_ARGS" in msg
    assert lb.smoke_check(tmp_path / "draft.gguf", "", code="pass") is None
    failed = lb.smoke_check(tmp_path / "d.gguf", "", code="raise SystemExit('no such model')")
    assert "exit 1" in failed and "no such model" in failed


def test_installed_build_record_fits_this_machine():
    """The venv this suite runs in was built for this CPU (what `make install` guarantees)."""
    rec = lb.read_record(lb.record_path())
    if rec is None:
        pytest.skip("no llama_cpp_build.json in this environment (not installed by make)")
    wanted = lb.wanted_record(lb.read_cpu(), rec["cmake_args"] if rec["chosen_by"] == "LLAMA_CMAKE_ARGS" else "")
    assert lb.needs_build(rec, wanted, lb._installed_version()) is None


@pytest.mark.models
def test_smoke_check_passes_on_this_build():
    out = subprocess.run([sys.executable, "-m", "specproof.llama_build", "smoke"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "passed" in out.stdout


@pytest.mark.models
def test_n_gpu_layers_reaches_llama_cpp_and_provenance():
    from specproof.models.llama import default_gpu_layers
    from specproof.models.loader import load_backend
    spec = {"backend": "llama", "model": "embedded:smollm2-q4_1", "n_ctx": 128}
    explicit = load_backend(dict(spec, n_gpu_layers=3))
    try:
        assert explicit.llm.model_params.n_gpu_layers == 3
        assert explicit.info().settings["n_gpu_layers"] == 3
    finally:
        explicit.close()
    default = load_backend(spec)
    try:
        assert default.llm.model_params.n_gpu_layers == default_gpu_layers()
        assert default.info().settings["n_gpu_layers"] == default_gpu_layers()
    finally:
        default.close()


def _requirement_names(reqs) -> dict[str, str]:
    import re
    out = {}
    for req in reqs:
        name = re.split(r"[<>=!~ \[]", req, maxsplit=1)[0].lower()
        out[name] = req
    return out


def test_environment_yml_in_step_with_pyproject():
    """conda's environment.yml lists every pyproject dependency (torch pinned to the CPU
    wheel); llama-cpp-python and the package come from environment.post-deploy.sh."""
    import tomllib

    import yaml
    root = Path(__file__).parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    wanted = _requirement_names(project["dependencies"] + project["optional-dependencies"]["pipeline"]
                                + project["optional-dependencies"]["dev"])
    env = yaml.safe_load((root / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    have = _requirement_names(pip)
    assert set(have) == set(wanted) - {"llama-cpp-python"}
    for name, req in wanted.items():
        if "==" in req and name in have:
            assert have[name] == req, f"environment.yml pins {have[name]}, pyproject {req}"
    assert have["torch"] == "torch==2.13.0"
    script = (root / "environment.post-deploy.sh").read_text()
    assert "specproof.llama_build install" in script and "--no-deps -e ." in script
