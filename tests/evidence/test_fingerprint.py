"""The machine fingerprint tells apart CPUs that share a model name (two EPYC generations
under "AMD EPYC") and ignores where the checkout or the models lie."""
from pathlib import Path

from specproof.evidence.fingerprint import (cpu_fingerprint, fingerprint_of, identity_differences,
                                            same_machine)
from specproof.evidence.provenance import portable

CPUINFO = Path(__file__).parents[1] / "data" / "cpuinfo"
MEMINFO = "MemTotal:       24681234 kB\n"


def _prov(cpuinfo: str, **extra) -> dict:
    fp = cpu_fingerprint(cpuinfo, MEMINFO)
    return {"cpu": {"model": fp.get("model_name"), "fingerprint": fp}, "os": {"release": "6.1"}, **extra}


FULL = (CPUINFO / "xeon-emerald-2core.txt").read_text()  # a whole /proc/cpuinfo of a 2-core VM


def test_fingerprint_reads_vendor_family_model_stepping_flags_cores_and_memory():
    fp = cpu_fingerprint(FULL, MEMINFO)
    assert fp == {"vendor": "GenuineIntel", "family": "6", "model_number": "207", "stepping": "2",
                  "model_name": "Intel(R) Xeon(R) Processor", "flags_sha256": fp["flags_sha256"],
                  "physical_cores": 2, "logical_cores": 2, "sockets": 1, "memory_gib": 24}
    smt = cpu_fingerprint(FULL.replace("core id\t\t: 1", "core id\t\t: 0"), MEMINFO)
    assert smt["physical_cores"] == 1 and smt["logical_cores"] == 2  # SMT siblings are one core


def test_records_that_differ_only_in_stepping_or_flags_are_not_the_same_machine():
    a = _prov(FULL)
    stepping = _prov(FULL.replace("stepping\t: 2", "stepping\t: 1"))
    flags = _prov(FULL.replace(" avx512_fp16", " avx512_fp16 avx512_vp2intersect"))
    assert identity_differences(fingerprint_of(a), fingerprint_of(stepping)) == ["stepping"]
    assert identity_differences(fingerprint_of(a), fingerprint_of(flags)) == ["flags_sha256"]
    assert not same_machine(a, stepping) and not same_machine(a, flags) and same_machine(a, _prov(FULL))


def test_records_that_differ_only_in_checkout_and_model_paths_are_the_same_machine():
    text = FULL
    model = {"spec": {"model": "embedded:x"}, "files": [{"path": "/work/a/models/x.gguf", "sha256": "s", "bytes": 3}]}
    a = _prov(text, code={"package_dir": "/work/a/src/specproof"}, models={"target:x": model})
    b = _prov(text, code={"package_dir_in_checkout": "src/specproof"},
              models={"target:x": {"spec": {"model": "embedded:x"}, "name": "x.gguf",
                                   "files": [{"name": "x.gguf", "sha256": "s", "bytes": 3}]}})
    b["os"]["release"] = "6.2"  # the kernel is context, not identity
    assert same_machine(a, b)
    assert portable(a)["models"] == portable(b)["models"] and portable(a)["code"] == portable(b)["code"]


def test_old_records_are_told_apart_by_their_simd_flags():
    """paper-qwen's host (no avx512_vp2intersect) and paper-qwen-v2's (with it) share the
    model name "AMD EPYC"; records of that age hold only the SIMD flags."""
    old = {"cpu": {"model": "AMD EPYC", "simd_flags": ["avx", "avx512f"], "logical_cores": 2, "ram_gib": 23.54}}
    new = {"cpu": {"model": "AMD EPYC", "simd_flags": ["avx", "avx512_vp2intersect", "avx512f"],
                   "logical_cores": 2, "ram_gib": 23.54}}
    assert identity_differences(fingerprint_of(old), fingerprint_of(new)) == ["simd_flags_sha256"]
    assert same_machine(old, dict(old))
