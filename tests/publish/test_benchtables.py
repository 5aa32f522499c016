"""Benchmark tables: the JSON the paper reads, checked against the .md and hashed, so the
audit tells an edited table from a rerun one."""
import json

import pytest

from specproof.publish.benchtables import bench_numbers, machine_of, read_table, read_tables, write_table
from specproof.errors import SpecproofError
from specproof.publish.numbers import compare

PROV = {"cpu": {"model": "test cpu", "logical_cores": 2, "ram_gib": 1.0}, "os": {"system": "Linux", "release": "x"},
        "python": "3.11", "packages": {"torch": "t", "transformers": "tr", "llama-cpp-python": "l"},
        "git": {"commit": "0123456789abcdef", "dirty": False}}


def _write(tmp_path, ratio=1.02):
    return write_table(tmp_path, "demo", "Demo", ["target", "ratio"], [["hf", ratio]], ["a note"],
                       {"hf.ratio": (ratio, "x"), "ids_identical": (True, "bool")}, "python demo.py", PROV)


def test_table_values_become_hashed_paper_numbers(tmp_path):
    md = _write(tmp_path)
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in md.read_text().splitlines()
            if line.startswith("|")]
    assert rows[0] == ["target", "ratio"] and ["hf", "1.02"] in rows
    assert "python demo.py" in md.read_text()
    numbers = bench_numbers(read_tables(tmp_path))
    # the table's values, and the machine its provenance names
    assert set(numbers) == {"bench.demo.hf.ratio", "bench.demo.ids_identical", "bench.demo.machine"}
    assert numbers["bench.demo.machine"]["value"] == machine_of(
        json.loads((tmp_path / "demo.json").read_text())["provenance"]["cpu"])
    entry = numbers["bench.demo.hf.ratio"]
    assert entry["value"] == 1.02 and entry["unit"] == "x" and entry["source"].endswith("demo.json")
    assert len(entry["sha256"]) == 64
    assert bench_numbers(read_tables(tmp_path / "absent")) == {}


def test_the_machine_label_tells_apart_cpus_that_share_a_model_name():
    assert machine_of({"model": "AMD EPYC", "simd_flags": ["avx", "avx2"]}) == "AMD EPYC (AVX2)"
    assert machine_of({"model": "AMD EPYC", "simd_flags": ["avx2", "avx512f"]}) == "AMD EPYC (AVX-512)"
    assert machine_of({"model": "Xeon", "simd_flags": ["avx2", "avx512f", "amx_tile"]}) == "Xeon (AVX-512, AMX)"
    assert machine_of({"model": "Apple M2", "simd_flags": []}) == "Apple M2"
    assert machine_of({}) is None


def test_an_edited_table_is_refused_naming_the_file_and_field(tmp_path):
    md = _write(tmp_path)
    md.write_text(md.read_text().replace("1.02", "1.20"))
    with pytest.raises(SpecproofError, match=r"demo\.md: sha256 does not match field table_sha256"):
        read_table(tmp_path / "demo.json")
    _write(tmp_path)
    data = json.loads((tmp_path / "demo.json").read_text())
    data["values"]["hf.ratio"] = 1.2
    (tmp_path / "demo.json").write_text(json.dumps(data))
    with pytest.raises(SpecproofError, match=r"demo\.json: field values\.hf\.ratio"):
        read_table(tmp_path / "demo.json")


def test_compare_catches_a_rerun_table_behind_unchanged_numbers(tmp_path):
    _write(tmp_path)
    before = bench_numbers(read_tables(tmp_path))
    _write(tmp_path, ratio=0.97)
    assert "bench.demo.hf.ratio: numbers.json has 1.02" in compare(before, bench_numbers(read_tables(tmp_path)))
    _write(tmp_path)
    data = json.loads((tmp_path / "demo.json").read_text())
    data["notes"] = ["a different note"]  # same values, different record
    (tmp_path / "demo.json").write_text(json.dumps(data))
    assert "sha256" in compare(before, bench_numbers(read_tables(tmp_path)))


def test_a_copy_of_a_table_under_another_name_cannot_shadow_it(tmp_path):
    _write(tmp_path)
    for ext in ("json", "md"):  # a second file claiming to be table 'demo'
        (tmp_path / f"zz_demo.{ext}").write_text((tmp_path / f"demo.{ext}").read_text())
    with pytest.raises(SpecproofError, match="zz_demo.json: field benchmark is 'demo'"):
        bench_numbers(read_tables(tmp_path))
