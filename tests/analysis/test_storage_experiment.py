"""The storage-cost experiment: the break-even map agrees with the cost model, two storages of one
network are compared prompt by prompt, and speculating on one file is set against the other alone."""
import numpy as np
import pandas as pd
import pytest

from specproof.analysis.breakeven import best_predicted, break_even_cost, map_alpha, map_points
from specproof.analysis.costs import model_speedup
from specproof.decode.costmodel import expected_committed


def test_break_even_cost_is_the_mean_accepted_prefix_per_drafted_position():
    assert break_even_cost(np.array([1.0, 1.0, 1.0]), 3) == pytest.approx(1.0)
    assert break_even_cost(np.array([0.5, 0.5]), 1) == pytest.approx(0.5)
    assert break_even_cost(np.array([0.5, 0.5]), 2) == pytest.approx((0.5 + 0.25) / 2)


def test_best_prediction_breaks_even_exactly_at_the_best_break_even_cost():
    alpha = np.array([0.9, 0.8, 0.7])
    cost = max(break_even_cost(alpha, k) for k in (1, 2, 3))
    s, k = best_predicted(alpha, np.array([cost - 0.01, cost, cost + 0.01]))
    assert s[1] == pytest.approx(1.0)
    assert s[0] > 1 > s[2]
    # at no marginal cost the longest K commits the most tokens
    s0, k0 = best_predicted(alpha, 0.0)
    assert int(k0) == 3 and float(s0) == pytest.approx(expected_committed(alpha, 3))


def _records(draft_ms=20.0, v=(100.0, 115.0, 130.0, 160.0), alpha=(0.9, 0.8)):
    verify = dict(zip(range(1, len(v) + 1), v))
    micro = pd.DataFrame([{"role": "target", "name": "t", "B": b, "median_ms": ms} for b, ms in verify.items()]
                         + [{"role": "draft", "name": "d", "B": 1, "median_ms": draft_ms}])
    cc, speedups = [], []
    for k in (1, 2):
        a = np.array(alpha[:k])
        cc.append({"pair": "t+d", "config": f"K{k}", "target": "t", "draft": "d", "k": k, "policy": "fixed",
                   "temperature": 0.0, "alpha": a.tolist(), "draft_ms": draft_ms, "target_ms": v[0],
                   "S_model": model_speedup(a, k, draft_ms, verify, v[0])})
        speedups.append({"pair": "t+d", "config": f"K{k}", "workload": "all", "gmean_speedup": 1.2,
                         "ci_low": 1.1, "ci_high": 1.3})
    return pd.DataFrame(cc), micro, speedups


def test_map_points_place_each_configuration_at_its_own_ratios():
    cc, micro, speedups = _records()
    p = map_points(cc, micro, speedups).set_index("k")
    assert p.loc[2, "verify_slope"] == pytest.approx((130 / 100 - 1) / 2)
    assert p.loc[1, "verify_slope"] == pytest.approx(0.15)
    assert p.loc[2, "draft_ratio"] == pytest.approx(0.2)
    # the model is the map's formula: S = E[C|K] / (1 + K (s_K + r))
    for k in (1, 2):
        e = expected_committed(np.array([0.9, 0.8]), k)
        assert p.loc[k, "S_model"] == pytest.approx(e / (1 + k * p.loc[k, "marginal_cost"]))
        assert (p.loc[k, "S_model"] > 1) == (p.loc[k, "marginal_cost"] < p.loc[k, "break_even_cost"])
    assert p.loc[2, "realized_over_model"] == pytest.approx(1.2 / p.loc[2, "S_model"])
    pair, config, alpha = map_alpha(cc, p.reset_index())
    assert (pair, config) == ("t+d", "K2") and alpha.tolist() == [0.9, 0.8]


def test_a_call_size_not_measured_is_not_mapped():
    cc, micro, speedups = _records(v=(100.0, 115.0))  # v(3) missing: K = 2 cannot be placed
    assert map_points(cc, micro, speedups)["k"].tolist() == [1]
    with pytest.raises(ValueError, match="no greedy fixed-K configuration"):
        map_alpha(cc, map_points(cc[cc["k"] == 2], micro[micro["B"] == 1], speedups))


def test_a_draft_not_timed_alone_is_mapped_at_its_drafting_time_in_the_runs():
    """An n-gram drafter has no micro-benchmark: its draft ratio is config_costs' draft_ms
    (its drafting time per drafted position in the timed runs) over v(1)."""
    cc, micro, speedups = _records()
    cc["draft_ms"] = 0.5
    timed = map_points(cc, micro, speedups).set_index("k")
    free = map_points(cc, micro[micro["role"] == "target"], speedups).set_index("k")
    assert set(timed["draft_timed"]) == {"isolated"} and set(free["draft_timed"]) == {"in-run"}
    assert free.loc[2, "draft_ratio"] == pytest.approx(0.5 / 100)
    assert free.loc[2, "verify_slope"] == timed.loc[2, "verify_slope"]


def test_the_map_figure_is_written(tmp_path):
    from specproof.publish.figures import break_even_map
    cc, micro, speedups = _records()
    points = map_points(cc, micro, speedups)
    break_even_map({"set@here": points}, np.array([0.9, 0.8]), "t+d K2", tmp_path)
    assert (tmp_path / "break_even.png").stat().st_size > 0 and (tmp_path / "break_even.pdf").is_file()


def test_same_function_counts_equal_references_of_targets_with_one_tokenizer():
    from specproof.analysis.agreement import same_function
    ref = pd.DataFrame([
        {"target": "f16", "prompt_id": "p1", "prompt_ids": [1, 2], "ids": [5, 6], "text": "ab"},
        {"target": "f16", "prompt_id": "p2", "prompt_ids": [3], "ids": [7, 8], "text": "cd"},
        {"target": "q4", "prompt_id": "p1", "prompt_ids": [1, 2], "ids": [5, 6], "text": "ab"},
        {"target": "q4", "prompt_id": "p2", "prompt_ids": [3], "ids": [7, 9], "text": "ce"},
        {"target": "other", "prompt_id": "p1", "prompt_ids": [4, 4], "ids": [5, 6], "text": "ab"}])
    out = same_function(ref)
    assert out.to_dict(orient="records") == [
        {"target_a": "f16", "target_b": "q4", "prompts": 2, "ids_equal": 1, "text_equal": 1}]


def _provenance():
    entry = lambda model, sha, source: {"spec": {"backend": "llama", "model": model, "threads": 2},  # noqa: E731
                                        "files": [{"sha256": sha, "bytes": 1}], "source": source}
    return {"study": {"config": {"targets": {"q4": {"backend": "llama", "model": "embedded:base"},
                                             "f16": {"backend": "llama", "model": "embedded:base-f16"},
                                             "other": {"backend": "llama", "model": "/models/x.gguf"}}}},
            "models": {"a": entry("embedded:base", "S", {"expected_sha256": "S"}),
                       "b": entry("embedded:base-f16", "F", {"expected_sha256": "S", "derived": True}),
                       "c": entry("/models/x.gguf", "X", {})}}


def test_two_storages_of_one_network_share_their_network_and_a_stranger_does_not():
    from specproof.analysis.costs import target_networks
    assert target_networks(_provenance()) == {"q4": "S", "f16": "S", "other": "X"}


def test_speculating_on_one_file_is_set_against_the_other_file_alone_prompt_by_prompt():
    from specproof.analysis.costs import cross_target_costs
    from specproof.analysis.statistics import cross_target_stats
    runs = []
    for j, (fast, slow, spec) in enumerate([(20.0, 10.0, 15.0), (10.0, 5.0, 8.0), (30.0, 12.0, 24.0)]):
        common = {"prompt_id": f"p{j}", "workload": "code", "rep": 0, "temperature": 0.0, "host": "h",
                  "k": 0, "policy": "fixed", "verify_mode": "batched"}
        runs += [{**common, "path": "target", "target": "q4", "pair": "q4+d", "config": "K2", "tokens_per_s": fast},
                 {**common, "path": "target", "target": "f16", "pair": "f16+d", "config": "K2", "tokens_per_s": slow},
                 {**common, "path": "speculative", "target": "f16", "pair": "f16+d", "config": "K2", "k": 2,
                  "tokens_per_s": spec}]
    cross = cross_target_costs(pd.DataFrame(runs), {"q4": "S", "f16": "S"})
    assert cross["other"].unique().tolist() == ["q4"]
    assert cross.sort_values("prompt_id")["S_measured"].tolist() == pytest.approx([0.75, 0.8, 0.8])
    (row,) = cross_target_stats(cross, seed=1, method="t")
    assert row["prompts"] == 3 and row["gmean_speedup"] == pytest.approx((0.75 * 0.8 * 0.8) ** (1 / 3))
    assert row["ci_low"] < row["gmean_speedup"] < row["ci_high"]
    # a target of another network is never the baseline
    assert cross_target_costs(pd.DataFrame(runs), {"q4": "S", "f16": "T"}).empty
