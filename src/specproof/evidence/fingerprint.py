"""The machine fingerprint: which physical machine kind a record set was timed on.

A CPU's model name does not tell machines apart: "AMD EPYC" covers at least three
generations on this project's hosts, with target-only speeds from 20 to 33 tokens/s on the
same model. The fingerprint is what ``/proc/cpuinfo`` and ``/proc/meminfo`` say of the
hardware:

- identity (two records are the same machine when these agree): CPU vendor, family, model
  number, stepping, model name, the sha256 of the sorted flag list, the sha256 of the SIMD
  flags (``cpu.simd_flags``, the only flags records written before the fingerprint hold),
  physical cores, logical CPUs, sockets and memory in whole GiB;
- context (reported beside a comparison, never used to match): the kernel release, the
  measured memory bandwidth and the llama.cpp build flags.

Records written before the fingerprint existed carry only the model name, the SIMD flags,
the logical cores and the memory; two records are compared on the identity fields both hold.
"""
from __future__ import annotations

import hashlib

IDENTITY = ("vendor", "family", "model_number", "stepping", "model_name", "flags_sha256",
            "simd_flags_sha256", "physical_cores", "logical_cores", "sockets", "memory_gib")
CONTEXT = ("kernel", "bandwidth_gbs", "llama_cmake_args")


def _digest(words: list[str]) -> str:
    return hashlib.sha256(" ".join(sorted(words)).encode()).hexdigest()


def _processors(cpuinfo: str) -> list[dict[str, str]]:
    """One {field: value} per ``processor`` block of /proc/cpuinfo text."""
    blocks, current = [], {}
    for line in cpuinfo.splitlines():
        key, sep, val = line.partition(":")
        if not sep:
            if current:
                blocks.append(current)
            current = {}
            continue
        current.setdefault(key.strip(), val.strip())
    if current:
        blocks.append(current)
    return [b for b in blocks if "processor" in b]


def cpu_fingerprint(cpuinfo: str, meminfo: str) -> dict:
    """The identity fields readable from /proc/cpuinfo and /proc/meminfo text (fields the
    text lacks, e.g. on Arm or macOS, are left out). physical_cores counts distinct
    (physical id, core id) pairs; without them every logical CPU counts as a core."""
    procs = _processors(cpuinfo)
    out: dict = {}
    if procs:
        first = procs[0]
        for field, key in (("vendor", "vendor_id"), ("family", "cpu family"), ("model_number", "model"),
                           ("stepping", "stepping"), ("model_name", "model name")):
            if key in first:
                out[field] = first[key]
        flags = (first.get("flags") or first.get("Features") or "").split()
        if flags:
            out["flags_sha256"] = _digest(flags)
        cores = {(p.get("physical id"), p.get("core id")) for p in procs if "core id" in p}
        out["physical_cores"] = len(cores) or len(procs)
        out["logical_cores"] = len(procs)
        out["sockets"] = len({p.get("physical id") for p in procs if "physical id" in p}) or 1
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            out["memory_gib"] = round(int(line.split()[1]) / 2**20)
    return out


def fingerprint_of(prov: dict) -> dict:
    """A provenance record's fingerprint: its identity fields (``cpu.fingerprint`` where the
    record holds one, plus what older records hold: model name, SIMD flags, logical cores,
    memory) and its context fields."""
    cpu = prov.get("cpu") or {}
    out = dict(cpu.get("fingerprint") or {})
    if cpu.get("model") is not None:
        out.setdefault("model_name", cpu["model"])
    if cpu.get("simd_flags") is not None:
        out["simd_flags_sha256"] = _digest(list(cpu["simd_flags"]))
    if cpu.get("logical_cores") is not None:
        out.setdefault("logical_cores", cpu["logical_cores"])
    if cpu.get("ram_gib") is not None:
        out.setdefault("memory_gib", round(float(cpu["ram_gib"])))
    threads = ((prov.get("memory_bandwidth") or {}).get("threads") or {})
    return {**{k: out[k] for k in IDENTITY if k in out},
            "kernel": (prov.get("os") or {}).get("release"),
            "bandwidth_gbs": round(max(threads.values()), 1) if threads else None,
            "llama_cmake_args": ((prov.get("llama_cpp") or {}).get("build") or {}).get("cmake_args")}


def identity_differences(a: dict, b: dict) -> list[str]:
    """The identity fields two fingerprints both hold and disagree on ([] = the same machine)."""
    return [k for k in IDENTITY if k in a and k in b and a[k] != b[k]]


def context_differences(a: dict, b: dict) -> list[str]:
    """The context fields (kernel, bandwidth, build flags) two fingerprints disagree on."""
    return [k for k in CONTEXT if a.get(k) != b.get(k)]


def same_machine(a: dict, b: dict) -> bool:
    """Two provenance records come from the same machine kind: their fingerprints agree on
    every identity field both hold (the checkout, model paths and kernel do not count)."""
    return not identity_differences(fingerprint_of(a), fingerprint_of(b))
