"""The clock boundary: a speedup with prefill inside the clock, and the prefill ratio, per
run from the block's target-only runs; and the label that keeps a set whose intervals
under-cover from making claims."""
import pandas as pd
import pytest

from specproof.analysis.costs import end_to_end_costs
from specproof.publish.numbers import verdict

BASE = {"pair": "t+d", "target": "t", "draft": "d", "workload": "code", "prompt_id": "p0", "rep": 0,
        "temperature": 0.0, "host": "h"}


def _run(run_id, path, prefill_ns, decode_ns, tokens=10, config="K4-fixed-batched-T0"):
    return {**BASE, "run_id": run_id, "path": path, "config": config if path == "speculative" else "A",
            "k": 4, "policy": "fixed", "verify_mode": "batched", "prefill_ns": prefill_ns,
            "decode_ns": decode_ns, "new_tokens": tokens}


def test_prefill_inside_the_clock_and_the_prefill_ratio():
    runs = pd.DataFrame([_run("a0", "target", 100, 900), _run("s", "speculative", 300, 600),
                         _run("a1", "target", 100, 900)])
    row = end_to_end_costs(runs).iloc[0]
    # target-only: 10 tokens in 1000 ns; speculative: 10 tokens in 900 ns
    assert row["S_measured"] == pytest.approx(1000 / 900)
    assert row["prefill_ratio"] == pytest.approx(3.0)


def test_a_slow_prefill_can_turn_a_decode_speedup_into_a_slowdown():
    runs = pd.DataFrame([_run("a0", "target", 100, 1000), _run("s", "speculative", 800, 500),
                         _run("a1", "target", 100, 1000)])
    row = end_to_end_costs(runs).iloc[0]
    assert 1000 / 500 > 1 > row["S_measured"]  # decode-only 2x, end to end 1100/1300


def test_an_indicative_set_makes_no_claim():
    assert verdict(1.1, 1.3) == "faster" and verdict(0.7, 0.9) == "slower"
    assert verdict(1.1, 1.3, indicative=True) == "indicative (faster)"
    assert verdict(0.7, 0.9, indicative=True) == "indicative (slower)"
    assert verdict(0.9, 1.1, indicative=True) == "unresolved"
