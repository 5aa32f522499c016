"""Build llama-cpp-python for the CPU it lands on, record why, and smoke-check the result.

Why not a native build, and why not one fixed "portable" flag set:
- ``GGML_NATIVE=ON`` on an Intel Xeon that advertises AMX compiles the AMX kernels,
  and ``ggml_backend_amx_mul_mat`` segfaults there;
- a fixed ``-DGGML_AVX512=ON`` dies with SIGILL on an AMD EPYC (Zen 3) without AVX-512.

So on x86-64 each instruction-set flag is switched on exactly when ``/proc/cpuinfo``
reports every feature it compiles for (``FLAG_FEATURES``), AMX never. On aarch64 Linux
and on macOS llama.cpp's own defaults are right (native, Metal on Apple). The flags, the
CPU features that chose them and the llama-cpp-python version go to
``<venv>/llama_cpp_build.json``; provenance copies that record. A venv whose record was
written for other flags (carried from another machine) is rebuilt, always with pip's
``--no-cache-dir`` because pip's wheel cache ignores ``CMAKE_ARGS``.

This module imports nothing from specproof and nothing outside the standard library:
the Makefile runs it (``python -m specproof.llama_build``) before the package is installed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
from pathlib import Path

LLAMA_VERSION = "0.3.36"
RECORD_NAME = "llama_cpp_build.json"

# x86-64: ggml CMake option -> the /proc/cpuinfo flags every one of which it compiles for.
# GGML_AVX512 adds -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw.
FLAG_FEATURES: dict[str, tuple[str, ...]] = {
    "GGML_SSE42": ("sse4_2",),
    "GGML_AVX": ("avx",),
    "GGML_AVX2": ("avx2",),
    "GGML_BMI2": ("bmi2",),
    "GGML_FMA": ("fma",),
    "GGML_F16C": ("f16c",),
    "GGML_AVX512": ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
}
# Always off on x86-64: AMX crashes (see above); the AVX-512 subsets measured no gain here
# (draft step 11.3 vs 12.4 ms, within noise), so one fewer way for a build to differ.
ALWAYS_OFF = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16", "GGML_AVX512_VBMI",
              "GGML_AVX512_VNNI", "GGML_AVX512_BF16", "GGML_AVX_VNNI")


def read_cpu(cpuinfo: str | None = None, machine: str | None = None,
             system: str | None = None) -> dict:
    """This CPU as the flag choice sees it: {machine, system, model, features}."""
    machine = (machine or platform.machine()).lower()
    system = system or platform.system()
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    model, features = "", set()
    for line in cpuinfo.splitlines():
        key, _, val = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model") and not model:
            model = val.strip()
        elif key in ("flags", "features") and not features:  # x86 "flags", aarch64 "Features"
            features = set(val.split())
    return {"machine": machine, "system": system, "model": model, "features": sorted(features)}


def choose_cmake_args(cpu: dict) -> tuple[str, list[str]]:
    """(how, CMAKE_ARGS) for this CPU; ``how`` names the rule that chose them."""
    machine, system, have = cpu["machine"], cpu["system"], set(cpu["features"])
    if system == "Darwin":
        return "macos", ["-DGGML_METAL=ON"]
    if machine in ("x86_64", "amd64"):
        args = ["-DGGML_NATIVE=OFF"]
        args += [f"-D{opt}={'ON' if set(need) <= have else 'OFF'}" for opt, need in FLAG_FEATURES.items()]
        args += [f"-D{opt}=OFF" for opt in ALWAYS_OFF]
        return "x86-64 features", args
    if machine in ("aarch64", "arm64"):
        return "aarch64 native", ["-DGGML_NATIVE=ON"]
    return "llama.cpp defaults", []


def wanted_record(cpu: dict, override: str = "", version: str = LLAMA_VERSION) -> dict:
    """The build record this machine needs. Features recorded are those that chose the
    flags: the mapped subset on x86-64, all of them for a native build."""
    how, args = choose_cmake_args(cpu)
    if override.strip():
        how, args = "LLAMA_CMAKE_ARGS", override.split()
    if how == "x86-64 features":
        used = sorted({f for need in FLAG_FEATURES.values() for f in need} & set(cpu["features"]))
    else:
        used = list(cpu["features"])
    return {"version": version, "cmake_args": " ".join(args), "chosen_by": how,
            "cpu": {"machine": cpu["machine"], "system": cpu["system"], "model": cpu["model"],
                    "features": used}}


def record_path(prefix: str | Path | None = None) -> Path:
    return Path(prefix or sys.prefix) / RECORD_NAME


def read_record(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def needs_build(recorded: dict | None, wanted: dict, installed_version: str | None) -> str | None:
    """Why a (re)build is needed, or None when the installed build fits this CPU."""
    if installed_version != wanted["version"]:
        return f"llama-cpp-python {installed_version or 'absent'}, want {wanted['version']}"
    if recorded is None:
        return "no build record: flags unknown"
    if recorded.get("version") != wanted["version"]:
        return f"recorded version {recorded.get('version')!r}, want {wanted['version']!r}"
    if recorded.get("cmake_args") != wanted["cmake_args"]:
        return f"recorded flags {recorded.get('cmake_args')!r} do not fit this CPU"
    if (recorded.get("cpu") or {}).get("features") != wanted["cpu"]["features"]:
        return "recorded CPU features differ from this CPU's"
    return None


def _installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return None


def build(wanted: dict) -> None:
    """pip-build llama-cpp-python with the wanted flags (no wheel cache), then its deps."""
    # pip's build of llama-cpp-python takes its CMake flags from the environment only
    env = dict(os.environ, CMAKE_ARGS=wanted["cmake_args"], FORCE_CMAKE="1")
    pkg = f"llama-cpp-python=={wanted['version']}"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-cache-dir"]
    subprocess.run(pip + ["--force-reinstall", "--no-deps", pkg], env=env, check=True)
    subprocess.run(pip + [pkg], env=env, check=True)  # numpy, diskcache, jinja2: no rebuild


SMOKE_CODE = """
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=64, n_batch=8, n_threads=1, verbose=False)
tokens = llm.tokenize(b"def f(x):", add_bos=False)
llm.eval(tokens)
print(int(llm.n_tokens))
"""


def smoke_check(model: Path, cmake_args: str, python: str = sys.executable,
                code: str = SMOKE_CODE, timeout: float = 300) -> str | None:
    """Load ``model`` and decode one prompt in a subprocess. None when it worked, else one
    line naming the failure (the signal, for a crash), the flags and how to override them."""
    try:
        proc = subprocess.run([python, "-c", code, str(model)], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"llama.cpp smoke check timed out after {timeout:.0f} s"
    if proc.returncode == 0:
        return None
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode)
        what = f"died of {sig.name} ({signal.strsignal(sig) or sig.name})"
    else:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        what = f"failed (exit {proc.returncode}: {last})"
    return (f"llama.cpp smoke check {what} loading {model.name} with CMAKE_ARGS='{cmake_args}'; "
            f"rebuild with other flags: make clean-venv && make LLAMA_CMAKE_ARGS='...' install")


def _embedded_draft() -> Path:
    from specproof.models import embedded_path  # installed by now (the Makefile's last step)
    return embedded_path("smollm2-q4_1")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specproof.llama_build", description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=["install", "smoke", "show"])
    ap.add_argument("--cmake-args", default="",
                    help="CMake flags instead of the CPU's (the Makefile's LLAMA_CMAKE_ARGS; default: none)")
    args = ap.parse_args(argv)
    cpu = read_cpu()
    wanted = wanted_record(cpu, args.cmake_args)
    path = record_path()
    if args.action == "show":
        print(json.dumps(wanted, indent=1, allow_nan=False))
        return 0
    if args.action == "install":
        why = needs_build(read_record(path), wanted, _installed_version())
        if why is None:
            print(f"llama-cpp-python {wanted['version']} already built for this CPU: {wanted['cmake_args']}")
            return 0
        print(f"building llama-cpp-python {wanted['version']} (~5 min on 2 cores; {why}): "
              f"{wanted['cmake_args']}", flush=True)
        path.unlink(missing_ok=True)
        build(wanted)
        path.write_text(json.dumps(wanted, indent=1, allow_nan=False) + "\n")
        return 0
    recorded = read_record(path) or wanted
    problem = smoke_check(_embedded_draft(), recorded["cmake_args"])
    if problem:
        path.unlink(missing_ok=True)  # never reuse a build that crashed
        print(f"specproof: error: {problem}", file=sys.stderr)
        return 2
    print("llama.cpp smoke check passed: the embedded draft loads and decodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
