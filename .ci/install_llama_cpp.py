"""Install llama-cpp-python with a portable (non-native) build, and record its flags.

A native build of llama.cpp segfaults on CPUs that advertise AMX, and pip's wheel
cache ignores CMAKE_ARGS, so a natively built wheel cached once would be reused
silently. We therefore (1) reuse an installed build only when its recorded flags
match the requested ones, (2) otherwise build with --no-cache-dir, and (3) write
the flags to <venv>/llama_cpp_build.json, which provenance capture reads.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

RECORD = Path(sys.prefix) / "llama_cpp_build.json"


def installed_version() -> str | None:
    try:
        from importlib.metadata import version
        return version("llama-cpp-python")
    except Exception:
        return None


def main() -> int:
    cmake_args = os.environ["LLAMA_CMAKE_ARGS"]
    wanted = os.environ["LLAMA_VERSION"]
    want = {"version": wanted, "cmake_args": cmake_args}
    if installed_version() == wanted and RECORD.exists():
        if json.loads(RECORD.read_text()) == want:
            print(f"llama-cpp-python {wanted} already built with: {cmake_args}")
            return 0
    print(f"building llama-cpp-python {wanted} (portable, ~5 min on 2 cores): {cmake_args}", flush=True)
    env = dict(os.environ, CMAKE_ARGS=cmake_args, FORCE_CMAKE="1")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-cache-dir", "--force-reinstall",
         "--no-deps", f"llama-cpp-python=={wanted}"],
        env=env, check=True,
    )
    # its runtime deps (numpy, typing-extensions, diskcache, jinja2) without rebuilding
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"llama-cpp-python=={wanted}"],
                   env=env, check=True)
    RECORD.write_text(json.dumps(want, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
