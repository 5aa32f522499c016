"""Provenance capture: hardware, OS, software that touches numbers, build flags, git.

Everything is read from the running machine; nothing is typed in by hand.
"""
from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

from ..load import load_average, usable_cores
from .fingerprint import SIMD_PREFIXES, cpu_fingerprint

PACKAGES = ("torch", "transformers", "accelerate", "llama-cpp-python", "numpy", "scipy", "pandas",
            "pyarrow", "gguf", "snakemake", "matplotlib", "typst", "specproof")


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def cpu_info() -> dict:
    info = {"machine": platform.machine(), "logical_cores": os.cpu_count()}
    try:
        info["affinity_cores"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    text = _read("/proc/cpuinfo")
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key = key.strip()
        if key == "model name" and "model" not in info:
            info["model"] = val.strip()
        elif key == "flags" and "flags" not in info:
            flags = val.split()
            info["simd_flags"] = sorted(f for f in flags if f.startswith(SIMD_PREFIXES))
    if "model" not in info and sys.platform == "darwin":
        info["model"] = _run(["sysctl", "-n", "machdep.cpu.brand_string"])
    mem = _read("/proc/meminfo")
    for line in mem.splitlines():
        if line.startswith("MemTotal:"):
            info["ram_gib"] = round(int(line.split()[1]) / 2**20, 2)
    info["fingerprint"] = cpu_fingerprint(text, mem)
    return info


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def gpu_info() -> list[dict]:
    out = _run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                "--format=csv,noheader"])
    gpus = []
    for line in out.splitlines():
        name, mem, driver = [x.strip() for x in line.split(",")]
        gpus.append({"name": name, "memory": mem, "driver": driver})
    return gpus


def package_versions() -> dict:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def torch_info() -> dict:
    try:
        import torch
    except ImportError:
        return {}
    return {"version": torch.__version__, "cuda": torch.version.cuda,
            "cuda_available": torch.cuda.is_available(), "threads": torch.get_num_threads(),
            "mkldnn": torch.backends.mkldnn.is_available(),
            "config": torch.__config__.show().strip().splitlines()[:3]}


def llama_info() -> dict:
    try:
        from ..models.llama import build_record
        return build_record()
    except ImportError:
        return {}


def energy_counters() -> dict:
    """Which energy counters this machine exposes (RAPL, powermetrics, nvidia-smi)."""
    rapl = Path("/sys/class/powercap/intel-rapl:0/energy_uj")
    readable = False
    try:
        rapl.read_text()
        readable = True
    except OSError:
        pass
    return {"rapl_readable": readable,
            "powermetrics": sys.platform == "darwin" and bool(_run(["which", "powermetrics"])),
            "nvidia_smi": bool(gpu_info())}


def git_state(root: Path) -> dict:
    commit = _run(["git", "-C", str(root), "rev-parse", "HEAD"])
    dirty = bool(_run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"]))
    return {"commit": commit or None, "dirty": dirty}


def code_state(root: Path) -> dict:
    """Where the specproof package that is running was imported from, relative to the
    caller's checkout ``root`` (None when outside it: an editable install of another
    checkout, or an installed package), and that tree's git state: another checkout's code
    shows here, not in the caller's ``git``. No absolute host path is recorded."""
    package_dir = Path(__file__).resolve().parents[1]
    try:
        inside = package_dir.relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        inside = None
    return {"package_dir_in_checkout": inside, "git": git_state(package_dir)}


def portable(prov: dict) -> dict:
    """A provenance record as two machines can compare it: each model's files by name,
    sha256 and size (no host path), the code's directory left out. Records frozen before
    provenance dropped host paths hold them; this is how drift compares them."""
    models = {key: {"spec": m.get("spec"), "source": m.get("source"),
                    "files": [{"name": Path(f.get("name") or f.get("path", "")).name,
                               "sha256": f.get("sha256"), "bytes": f.get("bytes")} for f in m.get("files", [])]}
              for key, m in (prov.get("models") or {}).items()}
    code = {k: v for k, v in (prov.get("code") or {}).items() if k not in ("package_dir", "package_dir_in_checkout")}
    return {**prov, "models": models, "code": code}


def memory_bandwidth() -> dict:
    """This machine's STREAM Add bandwidth (evidence.bandwidth.add_bandwidth) on one
    thread and on every usable core, GB/s (1e9 bytes/s), 3 x 128 MiB arrays, best of 3."""
    from .bandwidth import ADD_BYTES_PER_ELEMENT, add_bandwidth
    cores, elements = usable_cores(), 1 << 24
    return {"method": f"STREAM Add, {ADD_BYTES_PER_ELEMENT} bytes per float64 element, {elements} elements, "
                      "best of 3", "unit": "GB/s",
            "threads": {str(t): add_bandwidth(t, elements, repeats=3) / 1e9 for t in sorted({1, cores})}}


def capture(root: Path | None = None, bandwidth: bool = False) -> dict:
    """The machine and software record for a study or benchmark; with ``bandwidth``
    also its memory bandwidth (a second of numpy, for records that time decoding)."""
    root = root or Path.cwd()
    return {
        "captured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_info(),
        "gpus": gpu_info(),
        "os": {"system": platform.system(), "release": platform.release(),
               "platform": platform.platform()},
        "python": sys.version.split()[0],
        "packages": package_versions(),
        "torch": torch_info(),
        "llama_cpp": llama_info(),
        # recorded, not a parameter: what the caller's environment held (it can change BLAS
        # and OpenMP thread pools); specproof passes thread counts to the backends itself
        "env_threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
        "energy": energy_counters(),
        # how busy the machine was when the record was taken (1, 5, 15-minute averages);
        # timed stages record other processes' CPU share per timed block (specproof.load)
        "load": {"loadavg": load_average(), "usable_cores": usable_cores()},
        "git": git_state(root),
        "code": code_state(root),
        **({"memory_bandwidth": memory_bandwidth()} if bandwidth else {}),
    }


def run_provenance(target, drafter) -> dict:
    """What one ``decode --json`` or ``advise --json`` ran on: both models' files (paths,
    sha256) and settings (the drafter's backend; None for a model-free drafter or none),
    and the machine and software (``capture``, git of specproof's source)."""
    draft = getattr(drafter, "backend", None)
    return {"target": asdict(target.info()), "draft": asdict(draft.info()) if draft else None,
            "machine": capture(Path(__file__).resolve().parents[1])}


def summary_line(prov: dict) -> str:
    cpu = prov["cpu"]
    pk = prov["packages"]
    return (f"{cpu.get('model', '?')}, {cpu.get('affinity_cores', cpu.get('logical_cores'))} cores, "
            f"{cpu.get('ram_gib', '?')} GiB; {prov['os']['system']} {prov['os']['release']}; "
            f"Python {prov['python']}; torch {pk['torch']}, transformers {pk['transformers']}, "
            f"llama-cpp-python {pk['llama-cpp-python']}; git {str(prov['git']['commit'])[:10]}"
            f"{' (dirty)' if prov['git']['dirty'] else ''}")
