"""Benchmark goals as rows: each verdict computed from the tables' values and cited.yaml's
goals by one producer, which the audit reruns, so the paper prints a verdict it does not
compute and an edited verdict fails the audit."""
import pytest
import yaml

from specproof.errors import SpecproofError
from specproof.publish.benchgoals import cited_goal_rows, goal_rows
from specproof.publish.benchtables import bench_numbers, read_tables, write_table
from specproof.publish.benchvalues import target_only_cells, target_only_values
from specproof.publish.manifests import _audit_bench

PROV = {"cpu": {"model": "test cpu", "logical_cores": 2, "ram_gib": 1.0}, "os": {"system": "Linux", "release": "x"},
        "python": "3.11", "packages": {"torch": "t", "transformers": "tr", "llama-cpp-python": "l"},
        "git": {"commit": "0123456789abcdef", "dirty": False}}


def _bench(**values):
    return {f"bench.{k.replace('__', '.')}": {"value": v, "unit": "x", "source": "t.json"} for k, v in values.items()}


def test_a_goal_is_met_or_missed_by_the_minimum_of_its_values():
    goals = {"adaptive_over_best_fixed": 0.95, "target_only_ratio": 0.98}
    rows = goal_rows(_bench(policies__adaptive__code__ratio=0.97, policies__adaptive__chat__ratio=0.94), goals, "c.yaml")
    assert rows["bench_goal.adaptive_over_best_fixed.measured"]["value"] == 0.94
    assert rows["bench_goal.adaptive_over_best_fixed.met"]["value"] is False
    assert rows["bench_goal.adaptive_over_best_fixed.goal"]["op"] == ">="
    assert not any(k.startswith("bench_goal.target_only.") for k in rows)  # its table is absent


def test_identical_ids_must_also_hold_and_the_best_of_several_is_a_maximum():
    goals = {"ngram_ratio": 1.0, "beat_completion": 1.0}
    bench = _bench(ngram__min_ratio=1.2, ngram__ids_identical=False)
    assert goal_rows(bench, goals, "c.yaml")["bench_goal.ngram.met"]["value"] is False
    qwen = {f"llama_speculative_qwen_k{k}__qwen__{c}_vs_completion_q1": v
            for k, base in ((1, 0.6), (4, 0.7)) for c, v in (("fixed", base), ("adaptive", base - 0.1),
                                                            ("guard", base + 0.35))}
    rows = goal_rows(_bench(**qwen), goals, "c.yaml")
    assert rows["bench_goal.qwen_beat_completion.measured"]["value"] == pytest.approx(1.05)
    assert rows["bench_goal.qwen_beat_completion.met"]["value"] is True


def test_the_audit_refuses_an_edited_verdict(tmp_path):
    results = tmp_path / "results"
    samples = [{"setup": "s", "workload": "code", "repeat": i, "ours_s": 1.0, "theirs_s": 0.9} for i in range(3)]
    rows = [["t", "code", "gen", 1.0, 1.0, *cells] for cells in target_only_cells(samples)]
    write_table(results, "target_only", "T", list("abcdefg"), rows, [], target_only_values(samples), "python t.py",
                PROV, ("target_only", samples))
    cited = tmp_path / "cited.yaml"
    cited.write_text(yaml.safe_dump({"benchmark_goals": {"target_only_ratio": 0.98}}))
    numbers = bench_numbers(read_tables(results))
    numbers |= cited_goal_rows(numbers, cited)
    assert numbers["bench_goal.target_only.met"]["value"] is False
    _audit_bench(results, numbers, tmp_path / "numbers.json", cited)
    numbers["bench_goal.target_only.met"]["value"] = True
    with pytest.raises(SpecproofError, match=r"bench_goal\.target_only\.met"):
        _audit_bench(results, numbers, tmp_path / "numbers.json", cited)


def test_a_goal_missing_from_cited_yaml_is_an_error_when_its_table_is_there():
    with pytest.raises(SpecproofError, match=r"c\.yaml: field benchmark_goals\.ngram_ratio is missing \(goal ngram"):
        goal_rows(_bench(ngram__min_ratio=1.2, ngram__ids_identical=True), {}, "c.yaml")
