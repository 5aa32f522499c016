"""Micro-benchmark medians carry distribution-free intervals, and a verify curve that
falls with the call size is told apart as noise (overlapping intervals) or kernels."""
import math

import numpy as np
import pandas as pd

from specproof.analysis.costs import micro_medians


def _row(role, name, b, samples):
    return {"role": role, "name": name, "B": b, "median_ms": float(np.median(samples)),
            "samples_ms": list(samples)}


def _micro():
    rng = np.random.default_rng(0)
    return pd.DataFrame([
        _row("target", "t", 1, 100 + rng.normal(0, 1, 30)),
        _row("target", "t", 2, 90 + rng.normal(0, 1, 30)),   # well below v(1): the kernels
        _row("target", "t", 3, 89.8 + np.linspace(-5, 5, 30)),  # a hair below v(2), within noise
        _row("target", "t", 4, 120 + rng.normal(0, 1, 30)),
        _row("draft", "d", 1, 30 + rng.normal(0, 1, 12)),
        _row("target", "old", 1, [10.0, 11.0, 12.0]),
    ])


def test_the_median_interval_is_the_binomial_order_statistics():
    m = micro_medians(_micro()).set_index(["name", "B"])
    samples = np.sort(_micro().iloc[0]["samples_ms"])
    # n = 30 at 95%: the 10th and 21st smallest samples (coverage 1 - 2 P(Bin(30, 1/2) <= 9) = 0.957)
    assert m.loc[("t", 1), "ci_low"] == samples[9] and m.loc[("t", 1), "ci_high"] == samples[20]
    assert m.loc[("t", 1), "n"] == 30 and m.loc[("t", 1), "median_ms"] == np.median(samples)


def test_a_dip_is_resolved_only_when_the_intervals_are_disjoint():
    m = micro_medians(_micro()).set_index(["name", "B"])
    assert m.loc[("t", 2), "dip"] and m.loc[("t", 2), "dip_resolved"]
    assert m.loc[("t", 3), "median_ms"] < m.loc[("t", 2), "median_ms"]
    assert m.loc[("t", 3), "dip"] and not m.loc[("t", 3), "dip_resolved"]
    assert not m.loc[("t", 4), "dip"] and not m.loc[("t", 1), "dip"]
    assert not m.loc[("d", 1), "dip"]


def test_three_samples_give_no_95_percent_interval():
    m = micro_medians(_micro()).set_index(["name", "B"])
    assert m.loc[("old", 1), "n"] == 3 and math.isnan(m.loc[("old", 1), "ci_low"])
    assert m.loc[("old", 1), "median_ms"] == 11.0
