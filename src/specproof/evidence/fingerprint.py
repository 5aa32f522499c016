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
            out["flags"] = sorted(flags)
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


# llama.cpp's system_info names of the instruction sets a build compiled in, as the
# /proc/cpuinfo flag a CPU must have to run them
COMPILED_FLAG = {"AVX": "avx", "AVX2": "avx2", "AVX512": "avx512f", "AVX512_VBMI": "avx512vbmi",
                 "AVX512_VNNI": "avx512_vnni", "AVX512_BF16": "avx512_bf16", "AVX_VNNI": "avx_vnni",
                 "FMA": "fma", "F16C": "f16c", "AMX_INT8": "amx_int8"}
SIMD_PREFIXES = ("avx", "amx", "fma", "f16c", "sse4")  # the flags cpu.simd_flags keeps


def compiled_flags(system_info: str) -> list[str]:
    """The CPU flags a llama.cpp build needs, from its system_info ('CPU : AVX = 1 | ...')."""
    out = []
    for part in system_info.replace("CPU :", "|").split("|"):
        name, sep, value = part.partition("=")
        if sep and value.strip() == "1" and name.strip() in COMPILED_FLAG:
            out.append(COMPILED_FLAG[name.strip()])
    return out


def cpu_contradiction(prov: dict) -> str | None:
    """The first field of a provenance record that contradicts its own CPU, or None: the
    stored flag list against its sha256 (``cpu.fingerprint.flags``), the SIMD flags against
    the flag list, and the instruction sets the llama.cpp build ran (``llama_cpp.system_info``)
    or was built for (``llama_cpp.build.cpu.features``) against the SIMD flags: a build that
    ran on this machine used only instructions its CPU has."""
    cpu = prov.get("cpu") or {}
    fp, simd = cpu.get("fingerprint") or {}, set(cpu.get("simd_flags") or [])
    if "flags" in fp and _digest(list(fp["flags"])) != fp.get("flags_sha256"):
        return "field cpu.fingerprint.flags does not hash to cpu.fingerprint.flags_sha256"
    if "flags" in fp and not simd <= set(fp["flags"]):
        return (f"field cpu.simd_flags holds {sorted(simd - set(fp['flags']))[0]}, "
                "which cpu.fingerprint.flags lacks")
    if not simd:
        return None
    llama = prov.get("llama_cpp") or {}
    needs = {"llama_cpp.system_info": compiled_flags(llama.get("system_info") or ""),
             "llama_cpp.build.cpu.features": [f for f in ((llama.get("build") or {}).get("cpu") or {}).get(
                 "features") or [] if f.startswith(SIMD_PREFIXES)]}
    for field, flags in needs.items():
        missing = [f for f in flags if f not in simd]
        if missing:
            return (f"field {field} says the llama.cpp build used {missing[0]}, which cpu.simd_flags "
                    "lacks: the build did not run on the CPU this record names")
    return None


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
