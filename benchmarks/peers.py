"""llama.cpp's own tools, built from the source our llama-cpp-python vendors (`make peers`).

The comparison in benchmarks/llama_speculative.py is only fair if their loop runs the
same llama.cpp, compiled the same way: so the tools come from llama-cpp-python's source
distribution at the version we pin (``specproof.llama_build.LLAMA_VERSION``, its
``vendor/llama.cpp``), configured with the CMake flags ``specproof.llama_build`` chooses
for this CPU (or the override given, as ``make install`` takes LLAMA_CMAKE_ARGS), as
static Release binaries:

    llama-speculative-simple   their speculative loop (greedy, draft model, fixed or p_min-cut K)
    llama-completion           their target-only decoding (one prompt, -n tokens)

Everything goes to ``.peers/`` (git-ignored): ``sdist/`` the downloaded tarball, ``src/``
its extraction, ``build/`` CMake's tree, ``bin/`` the two tools, ``build.json`` what was
built from what (version, sdist sha256, CMake flags and the CPU features that chose them).
Not part of ``make install``: about 5 minutes of 2 cores, and only the benchmark needs it.

    python benchmarks/peers.py [--sdist llama_cpp_python-0.3.36.tar.gz] [--cmake-override ARGS] [--jobs N]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / ".peers"
TOOLS = ("llama-speculative-simple", "llama-completion")
# static, Release, only what the two tools need (no server, tests, HTTPS or web UI)
BUILD_ARGS = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF",
              "-DLLAMA_BUILD_EXAMPLES=ON", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=OFF",
              "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_OPENSSL=OFF"]


def tool_path(name: str, peers: Path = PEERS) -> Path:
    return peers / "bin" / name


def missing_tools(peers: Path = PEERS) -> list[str]:
    """The tools not built yet (empty when `make peers` has run)."""
    return [name for name in TOOLS if not tool_path(name, peers).is_file()]


def build_record(peers: Path = PEERS) -> dict | None:
    try:
        return json.loads((peers / "build.json").read_text())
    except (OSError, ValueError):
        return None


def fetch_sdist(version: str, dest: Path) -> Path:
    """llama-cpp-python's source distribution through pip (never a wheel)."""
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                    f"llama-cpp-python=={version}", "-d", str(dest)], check=True)
    found = sorted(dest.glob(f"llama_cpp_python-{version}.tar.gz"))
    if not found:
        raise SystemExit(f"peers: error: pip left no llama_cpp_python-{version}.tar.gz in {dest}")
    return found[0]


def build(sdist: Path, cmake_args: str, jobs: int, peers: Path = PEERS) -> dict:
    """Extract ``sdist``, configure vendor/llama.cpp with ``cmake_args`` + BUILD_ARGS,
    build TOOLS, copy them to bin/; returns the record written to build.json."""
    src = peers / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(src, filter="data")
    (top,) = [p for p in src.iterdir() if p.is_dir()]
    llama = top / "vendor" / "llama.cpp"
    if not (llama / "CMakeLists.txt").is_file():
        raise SystemExit(f"peers: error: {sdist}: no vendor/llama.cpp/CMakeLists.txt inside")
    build_dir = peers / "build"
    shutil.rmtree(build_dir, ignore_errors=True)
    subprocess.run(["cmake", "-S", str(llama), "-B", str(build_dir), *cmake_args.split(), *BUILD_ARGS],
                   check=True)
    subprocess.run(["cmake", "--build", str(build_dir), "--config", "Release", "-j", str(jobs),
                    "--target", *TOOLS], check=True)
    (peers / "bin").mkdir(exist_ok=True)
    for name in TOOLS:
        shutil.copy2(build_dir / "bin" / name, tool_path(name, peers))
    return {"sdist": sdist.name, "sdist_sha256": hashlib.sha256(sdist.read_bytes()).hexdigest(),
            "llama_cpp_dir": str(llama.relative_to(peers)), "cmake_args": cmake_args,
            "build_args": " ".join(BUILD_ARGS), "tools": list(TOOLS)}


def main() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from specproof.llama_build import LLAMA_VERSION, read_cpu, wanted_record

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdist", type=Path, help="a local llama_cpp_python-<version>.tar.gz (default: pip download)")
    ap.add_argument("--cmake-override", default="", help="CMake flags instead of the CPU's (LLAMA_CMAKE_ARGS)")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    if a.sdist is not None and not a.sdist.is_file():
        print(f"peers: error: {a.sdist}: file does not exist", file=sys.stderr)
        return 2
    wanted = wanted_record(read_cpu(), a.cmake_override, LLAMA_VERSION)
    sdist = a.sdist or fetch_sdist(LLAMA_VERSION, PEERS / "sdist")
    print(f"building {', '.join(TOOLS)} from {sdist.name} with {wanted['cmake_args']}", flush=True)
    record = {"version": LLAMA_VERSION, "chosen_by": wanted["chosen_by"], "cpu": wanted["cpu"],
              **build(sdist, wanted["cmake_args"], a.jobs)}
    (PEERS / "build.json").write_text(json.dumps(record, indent=1, allow_nan=False) + "\n")
    print(f"peers: {', '.join(str(tool_path(n).relative_to(ROOT)) for n in TOOLS)} built")
    return 0


if __name__ == "__main__":
    sys.exit(main())
