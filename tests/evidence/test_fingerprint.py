"""The machine fingerprint tells apart CPUs that share a model name (two EPYC generations
under "AMD EPYC") and ignores where the checkout or the models lie."""
from pathlib import Path

from specproof.evidence.fingerprint import (compiled_flags, cpu_contradiction, cpu_fingerprint, fingerprint_of,
                                            identity_differences, same_machine)
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
                  "model_name": "Intel(R) Xeon(R) Processor", "flags": fp["flags"], "flags_sha256": fp["flags_sha256"],
                  "physical_cores": 2, "logical_cores": 2, "sockets": 1, "memory_gib": 24}
    assert fp["flags"] == sorted(fp["flags"]) and "avx512f" in fp["flags"]
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


SYSTEM_INFO = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 | AMX_INT8 = 0 |"


def _consistent() -> dict:
    fp = cpu_fingerprint(FULL, MEMINFO)
    simd = [f for f in fp["flags"] if f.startswith(("avx", "amx", "fma", "f16c", "sse4"))]
    return {"cpu": {"fingerprint": fp, "simd_flags": simd},
            "llama_cpp": {"system_info": SYSTEM_INFO, "build": {"cpu": {"features": ["avx512f", "bmi2", "fma"]}}}}


def test_a_build_names_the_instruction_sets_it_compiled_in():
    assert compiled_flags(SYSTEM_INFO) == ["avx", "avx2", "f16c", "fma", "avx512f"]


def test_a_record_that_agrees_with_its_own_cpu_has_no_contradiction():
    assert cpu_contradiction(_consistent()) is None
    assert cpu_contradiction({"cpu": {"model": "Apple M2"}}) is None  # no flags: nothing to contradict


def test_a_record_whose_build_ran_instructions_its_cpu_lacks_is_contradicted():
    """A forger moving the record to an AVX2-only machine must also explain the AVX-512
    build that ran."""
    prov = _consistent()
    prov["cpu"]["simd_flags"] = [f for f in prov["cpu"]["simd_flags"] if not f.startswith("avx512")]
    prov["cpu"]["fingerprint"].pop("flags")
    assert "field llama_cpp.system_info says the llama.cpp build used avx512f" in cpu_contradiction(prov)
    prov["llama_cpp"]["system_info"] = ""
    assert "field llama_cpp.build.cpu.features" in cpu_contradiction(prov)


def test_a_flag_list_unlike_its_hash_or_its_simd_flags_is_contradicted():
    prov = _consistent()
    prov["cpu"]["fingerprint"]["flags"] = prov["cpu"]["fingerprint"]["flags"][1:]
    assert "does not hash to cpu.fingerprint.flags_sha256" in cpu_contradiction(prov)
    prov = _consistent()
    prov["cpu"]["simd_flags"].append("amx_tile")
    assert "field cpu.simd_flags holds amx_tile" in cpu_contradiction(prov)


def test_no_frozen_record_set_contradicts_its_own_cpu():
    import json
    root = Path(__file__).parents[2] / "manifests"
    for path in sorted(root.glob("*/*/provenance.json")):
        assert cpu_contradiction(json.loads(path.read_text())) is None, path
