"""Benchmark values recomputed from the samples a table stores: the benchmark and the audit
run the same producer, so a value edited in a committed table fails the audit."""
import json

import numpy as np
from scipy import stats

import pytest

from specproof.errors import SpecproofError
from specproof.publish.benchtables import read_tables, write_table
from specproof.publish.benchvalues import (check_bench_values, check_values, llama_speculative_values,
                                           pair_summaries, speculative_cells, speculative_summary, spread,
                                           target_only_cells, target_only_values)

PROV = {"cpu": {"model": "test cpu", "logical_cores": 2, "ram_gib": 1.0}, "os": {"system": "Linux", "release": "x"},
        "python": "3.11", "packages": {"torch": "t", "transformers": "tr", "llama-cpp-python": "l"}, "git": {"commit": "0123456789abcdef", "dirty": False}}
RUNS = ("ours target-only", "ours fixed", "ours adaptive", "ours guard", "theirs target-only", "theirs fixed",
        "theirs default")


def _sample(pair, rep, tps, drafted=10, accepted=8, ids_equal=True):
    return {"pair": pair, "prompt": 0, "repeat": rep, "tokens_per_s": dict(zip(RUNS, tps)),
            "drafted": dict.fromkeys(("ours fixed", "theirs fixed", "theirs default"), drafted),
            "accepted": dict.fromkeys(("ours fixed", "theirs fixed", "theirs default"), accepted),
            "ids_equal": ids_equal, "text_equal": True}


SAMPLES = [_sample("a", 0, (10, 8, 9, 10, 11, 9, 12)), _sample("a", 1, (12, 10, 11, 12, 12, 10, 12)),
           _sample("a", 2, (11, 9, 10, 11, 12, 9, 11)), _sample("b", 0, (20, 30, 28, 20, 22, 25, 24), 20, 19),
           _sample("b", 1, (21, 32, 30, 21, 22, 26, 25), 20, 18, ids_equal=False)]


def test_spread_is_median_and_quartiles():
    assert spread([1.0, 2.0, 3.0, 4.0, 5.0]) == (3.0, 1.5, 4.5)
    assert spread([2.0]) == (2.0, 2.0, 2.0)


def test_a_pairs_ratios_speedups_and_acceptance_follow_their_definitions():
    r = speculative_summary(SAMPLES[:3])
    assert r["fixed_ratio"][0] == pytest.approx(1.0)  # 8/9, 10/10, 9/9 per sample
    assert r["speedup"]["ours fixed"] == pytest.approx(0.8181818, rel=1e-6)  # median of 0.8, 0.8333, 0.8182
    assert r["vs_completion"]["ours target-only"][0] == pytest.approx(11 / 12)
    assert r["acceptance"]["ours fixed"] == pytest.approx(0.8)
    assert r["ids_equal"] and r["n_pairs"] == 3


def test_cross_pair_values_name_each_pair_and_the_extremes():
    v = llama_speculative_values(SAMPLES)
    assert v["pairs"] == (2, "pairs")
    assert v["min_fixed_ratio"][0] == pytest.approx(1.0) and v["max_fixed_ratio"][0] == pytest.approx(1.21, abs=0.02)
    assert v["ids_equal"] == (False, "bool")  # one sample of pair b changed its ids
    assert v["b.acceptance_ours"][0] == pytest.approx(37 / 40)


def test_values_from_given_summaries_are_the_producers_own():
    """The benchmark passes the summaries it tabulates; the audit's rerun computes them."""
    summaries = pair_summaries(SAMPLES)
    assert list(summaries) == ["a", "b"] and summaries["a"] == speculative_summary(SAMPLES[:3])
    assert llama_speculative_values(SAMPLES, summaries) == llama_speculative_values(SAMPLES)


def test_target_only_ratio_is_theirs_seconds_over_ours():
    samples = [{"setup": "s", "workload": "code", "repeat": i, "ours_s": 1.0, "theirs_s": t}
               for i, t in enumerate((0.9, 1.0, 1.1))]
    v = target_only_values(samples)
    assert v["s.code.ratio"] == (1.0, "x") and v["min_ratio"] == v["max_ratio"] == (1.0, "x")


def _rows(samples=SAMPLES):
    return [[key, *speculative_cells(r)] for key, r in pair_summaries(samples).items()]


def _table(tmp_path, values=None, rows=None):
    derived = llama_speculative_values(SAMPLES)
    rows = _rows() if rows is None else rows
    return write_table(tmp_path, "llama_speculative_qwen", "T", ["pair", *(f"c{i}" for i in range(20))], rows,
                       ["n"], values if values is not None else {**derived, "k": (4, "K")}, "python x.py", PROV,
                       ("llama_speculative", SAMPLES))


def test_the_writer_refuses_values_its_samples_do_not_give(tmp_path):
    wrong = {**llama_speculative_values(SAMPLES), "a.fixed_ratio": (1.3, "x")}
    with pytest.raises(SpecproofError, match=r"field values\.a\.fixed_ratio is 1\.3; its samples give 1\.0"):
        _table(tmp_path, wrong)
    assert not (tmp_path / "llama_speculative_qwen.json").exists()


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["values"]["a.fixed_ratio"].update(value=1.25), "values.a.fixed_ratio"),
    (lambda d: d["values"].pop("b.guard_ratio"), "values.b.guard_ratio"),
    (lambda d: d["values"]["ids_equal"].update(value=True), "values.ids_equal"),
    (lambda d: d["samples"][0]["tokens_per_s"].update({"ours fixed": 80}), "values.a.fixed_ratio"),
    (lambda d: d["samples"][1].pop("drafted"), "samples"),
    (lambda d: d.update(kind="nonesuch"), "kind"),
    (lambda d: d["rows"][0].__setitem__(5, "1.300 (1.200-1.400)"), r"rows\[0\]\[5\]"),
    (lambda d: d["rows"][1].__setitem__(19, "yes"), r"rows\[1\]\[19\]"),
    (lambda d: d["rows"].pop(), "rows"),
    (lambda d: d["rows"][0].__setitem__(1, "fast"), r"rows\[0\]\[1\]"),  # not a number: named, no TypeError
])
def test_an_edited_value_or_sample_is_named_by_file_and_field(tmp_path, edit, field):
    _table(tmp_path)
    path = tmp_path / "llama_speculative_qwen.json"
    data = json.loads(path.read_text())
    assert check_values(data, path) > 0
    edit(data)
    with pytest.raises(SpecproofError, match=rf"llama_speculative_qwen\.json: field(s)? .*{field.split('.')[0]}"):
        check_values(data, path)
    path.write_text(json.dumps(data))
    with pytest.raises(SpecproofError, match=r"llama_speculative_qwen\.json"):
        check_bench_values(read_tables(tmp_path))


def test_the_writer_refuses_rows_its_samples_do_not_give(tmp_path):
    rows = _rows()
    rows[0][1] = 99.0  # ours target-only tok/s
    with pytest.raises(SpecproofError, match=r"field rows\[0\]\[1\] is 99\.0; its samples give 11"):
        _table(tmp_path, rows=rows)


def test_target_only_rows_carry_the_producers_ratio_and_quartiles():
    samples = [{"setup": s, "workload": "code", "repeat": i, "ours_s": 1.0, "theirs_s": t}
               for s in ("x", "y") for i, t in enumerate((0.9, 1.0, 1.1))]
    assert target_only_cells(samples) == [[1.0, "0.900-1.100"], [1.0, "0.900-1.100"]]
    record = {"kind": "target_only", "samples": samples, "values": {k: {"value": v, "unit": u} for k, (v, u)
                                                                     in target_only_values(samples).items()},
              "rows": [["X", "code", "gen", 10.0, 10.0, 1.0, "0.900-1.100"],
                       ["Y", "code", "gen", 10.0, 10.0, 1.0, "0.800-1.100"]]}
    with pytest.raises(SpecproofError, match=r"t\.json: field rows\[1\]\[6\] is '0\.800-1\.100'"):
        check_values(record, "t.json")


def test_the_report_line_names_tables_without_samples(tmp_path):
    _table(tmp_path)
    write_table(tmp_path, "old", "Old", ["x"], [[1]], [], {"x": (1, "x")}, "python old.py", PROV)
    line = check_bench_values(read_tables(tmp_path))
    assert "of 1 tables recomputed from their samples (llama_speculative_qwen)" in line
    assert line.endswith("checked against their rows only: old")


def test_a_table_that_stores_samples_cannot_drop_them(tmp_path):
    path = tmp_path / "target_only_qwen.json"
    with pytest.raises(SpecproofError, match=r"target_only_qwen\.json: fields kind and samples are missing"):
        check_values({"values": {"min_ratio": {"value": 0.99, "unit": "x"}}}, path)
    assert check_values({"values": {}}, tmp_path / "ngram.json") == 0  # an older table


def test_the_counts_a_table_prints_come_from_its_samples():
    v = llama_speculative_values(SAMPLES)
    assert v["prompts"] == (1, "prompts") and v["repeats"] == (3, "runs")


def _advise_sample(pair, predicted, low, high, spec_ns, target_ns, prompts=3):
    runs = [{"path": path, "prompt": p, "new_tokens": 10, "decode_ns": ns}
            for p in range(prompts) for path, ns in (("target", target_ns), ("speculative", spec_ns))]
    return {"pair": pair, "k": 2, "predicted": predicted, "low": low, "high": high, "model": "confirmed",
            "probe_prompts": 8, "future_prompts": prompts, "confirm_prompts": 8, "loop_predicted": predicted,
            "target_ms_pred": 10.0, "runs": runs}


def test_advise_check_realizes_from_the_runs_and_judges_the_error_and_the_cover():
    """realized = target time / speculative time for equal tokens; error = predicted /
    realized - 1; within the goal at |error| <= 10%; covered by [low, high]."""
    from specproof.publish.benchvalues import advise_cells, advise_values
    samples = [_advise_sample("a", 1.05, 0.9, 1.2, 10**8, 10**8),      # realized 1.0: +5%, covered
               _advise_sample("b", 1.5, 1.4, 1.6, 10**8, 12 * 10**7)]  # realized 1.2: +25%, not covered
    v = advise_values(samples)
    assert v["a.realized"] == (1.0, "x") and v["a.error"][0] == pytest.approx(0.05)
    assert v["a.within_goal"] == (True, "bool") and v["a.covered"] == (True, "bool")
    assert v["b.realized"][0] == pytest.approx(1.2) and v["b.error"][0] == pytest.approx(0.25)
    assert v["b.within_goal"] == (False, "bool") and v["b.covered"] == (False, "bool")
    assert (v["covered"], v["within_goal"], v["pairs"]) == ((1, "pairs"), (1, "pairs"), (2, "pairs"))
    assert v["a.reserved_prompts"] == (3, "prompts")
    # every prompt of a realizes 1.0: its interval over prompts is the point
    assert v["a.realized_low"][0] == pytest.approx(1.0) and v["a.realized_high"][0] == pytest.approx(1.0)
    # b: target-only 12 ms/token against 10 predicted; speculative 10 against 10 / 1.5 predicted
    assert v["b.target_factor"][0] == pytest.approx(1.2) and v["b.spec_factor"][0] == pytest.approx(2 / 3)
    assert v["b.target_factor"][0] * v["b.spec_factor"][0] == pytest.approx(v["b.realized"][0] / 1.5)
    record = {"kind": "advise_check", "samples": samples,
              "values": {k: {"value": x, "unit": u} for k, (x, u) in v.items()}, "rows": advise_cells(samples)}
    assert check_values(record, "advise_check.json") > 0
    record["samples"][1]["runs"][0]["decode_ns"] = 15 * 10**7  # a target-only run made slower: b's realized moves
    with pytest.raises(SpecproofError, match=r"advise_check\.json: field values\.b\.realized"):
        check_values(record, "advise_check.json")


def test_the_realized_interval_spans_the_prompts_spread():
    from specproof.publish.benchvalues import advise_values
    s = _advise_sample("c", 1.0, 0.9, 1.1, 10**8, 10**8, prompts=8)
    for r in s["runs"]:
        if r["path"] == "speculative":
            r["decode_ns"] = 10**8 * (1 + r["prompt"]) // 4  # prompt p realizes 4 / (1 + p)
    v = advise_values([s])
    assert v["c.realized_low"][0] < v["c.realized"][0] < v["c.realized_high"][0]
    assert advise_values([s]) == v  # seeded: the audit recomputes the same interval


def test_advise_check_samples_moved_with_their_values_still_differ_from_the_records(tmp_path):
    """The forgery the values check cannot see: a sample and the values it gives edited
    together. The samples are recomputed from the stage records beside the table."""
    import shutil
    from pathlib import Path
    from specproof.publish.audit.benchmarks import check_advise_records
    from specproof.publish.benchvalues import advise_cells, advise_values
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    for name in ("advise_check.json", "advise_check.md"):
        shutil.copy(results / name, tmp_path / name)
    shutil.copytree(results / "advise_check", tmp_path / "advise_check")
    check_advise_records(read_tables(tmp_path))  # the committed table holds
    path = tmp_path / "advise_check.json"
    data = json.loads(path.read_text())
    run = next(r for r in data["samples"][0]["runs"] if r["path"] == "speculative")
    run["decode_ns"] = int(run["decode_ns"] * 0.99)
    data["values"] = {k: {"value": v, "unit": u} for k, (v, u) in advise_values(data["samples"]).items()}
    data["rows"] = advise_cells(data["samples"])
    assert check_values(data, path) > 0  # consistent with its own samples
    with pytest.raises(SpecproofError, match=r"advise_check\.json: field samples\[0\]\.runs .*advise_check/ give"):
        check_advise_records({path: data})


def test_an_edited_confirmation_run_moves_the_recomputed_prediction_away_from_the_samples(tmp_path):
    """The prediction is the confirmation's measured speedup: a confirmation run made
    faster in advise_runs.parquet, the samples left alone, no longer recomputes to them."""
    import shutil
    from pathlib import Path
    from specproof.publish.audit.benchmarks import check_advise_records
    from specproof.records import read_parquet, write_parquet
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    shutil.copy(results / "advise_check.json", tmp_path / "advise_check.json")
    shutil.copytree(results / "advise_check", tmp_path / "advise_check")
    runs = read_parquet(tmp_path / "advise_check" / "advise_runs.parquet")
    i = runs.index[(runs["phase"] == "confirm") & (runs["path"] == "speculative")][0]
    runs.loc[i, "decode_ns"] = int(runs.loc[i, "decode_ns"] * 0.8)
    write_parquet(runs, tmp_path / "advise_check" / "advise_runs.parquet")
    path = tmp_path / "advise_check.json"
    with pytest.raises(SpecproofError, match=r"advise_check\.json: field samples\[\d\]\.(predicted|low|high|target_ms_pred)"):
        check_advise_records({path: json.loads(path.read_text())})


def test_prompt_intervals_are_over_prompts_with_repetitions_averaged_within_each():
    """Two prompts, two repetitions each: the geometric mean is over the prompts' mean log
    ratios, and the interval is Student-t over the two prompts; the best of our three
    configurations against llama-completion is named."""
    from specproof.publish.benchvalues import PRODUCERS, prompt_interval_values
    runs = {"ours target-only": 10.0, "ours fixed": 8.0, "ours adaptive": 7.0, "ours guard": 9.5,
            "theirs target-only": 10.0, "theirs fixed": 6.0, "theirs default": 6.5}
    theirs = {(0, 0): 10.0, (0, 1): 12.5, (1, 0): 12.5, (1, 1): 12.5}  # (prompt, repeat) -> tok/s
    samples = [{"pair": "p", "prompt": i, "repeat": r, "tokens_per_s": {**runs, "theirs target-only": t}}
               for (i, r), t in theirs.items()]
    v = prompt_interval_values(samples)
    logs = [np.mean(np.log([1.0, 0.8])), np.log(0.8)]  # ours target-only over theirs, per prompt
    assert v["p.target_only_vs_completion_gmean"][0] == pytest.approx(np.exp(np.mean(logs)))
    half = stats.t.ppf(0.975, 1) * stats.sem(logs)
    assert v["p.target_only_vs_completion_low"][0] == pytest.approx(np.exp(np.mean(logs) - half))
    assert v["p.best_vs_completion_config"] == ("guard", "text")
    assert v["p.best_vs_completion_gmean"] == v["p.guard_vs_completion_gmean"]
    assert "p.fixed_ratio_high" in PRODUCERS["llama_speculative_prompts"](
        [dict(s, drafted={n: 1 for n in ("ours fixed", "theirs fixed", "theirs default")},
              accepted={n: 1 for n in ("ours fixed", "theirs fixed", "theirs default")}, ids_equal=True,
              text_equal=True) for s in samples])


def _advise_records_copy(tmp_path):
    import shutil
    from pathlib import Path
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    shutil.copy(results / "advise_check.json", tmp_path / "advise_check.json")
    shutil.copytree(results / "advise_check", tmp_path / "advise_check")
    return tmp_path / "advise_check"


def test_a_confirmation_and_a_check_swapped_no_longer_cover_the_reserved_prompts(tmp_path):
    """Red team: the phases of one pair's runs swapped exchange its prediction and its
    realized speedup; the check must have run on every reserved prompt of prompts.jsonl."""
    from specproof.publish.audit.benchmarks import check_advise_records
    from specproof.records import read_parquet, write_parquet
    d = _advise_records_copy(tmp_path)
    runs = read_parquet(d / "advise_runs.parquet")
    mine = runs["pair"] == runs["pair"].iloc[0]
    runs.loc[mine, "phase"] = runs.loc[mine, "phase"].map({"confirm": "check", "check": "confirm"})
    write_parquet(runs, d / "advise_runs.parquet")
    path = tmp_path / "advise_check.json"
    with pytest.raises(SpecproofError, match=r"advise_runs\.parquet: field phase: .* reserved"):
        check_advise_records({path: json.loads(path.read_text())})


def test_a_prediction_model_chosen_after_the_fact_is_refused(tmp_path):
    """Red team: a confirmed row relabelled 'loop' would be recomputed with the loop
    model's prediction; the model a row names must be the one its records make."""
    from specproof.publish.audit.benchmarks import check_advise_records
    from specproof.records import read_parquet, write_parquet
    d = _advise_records_copy(tmp_path)
    advice = read_parquet(d / "advise.parquet")
    advice.loc[0, "model"] = "loop"
    write_parquet(advice, d / "advise.parquet")
    path = tmp_path / "advise_check.json"
    with pytest.raises(SpecproofError, match=r"advise\.parquet: pair .*field model is 'loop'; its records give 'confirmed'"):
        check_advise_records({path: json.loads(path.read_text())})
