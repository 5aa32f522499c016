"""Calibration on the mock model: null p-values uniform; planted violations rejected."""
import numpy as np
import pytest

from specproof.evidence.calibration import calibrate, detectable_tv, level1, level2
from specproof.evidence.pit import uniformity


def test_level1_exact_and_draws():
    res = level1(seed=3, draws=5000)
    assert res["max_exact_error"] < 1e-12
    assert all(c["mass_outside_support"] == 0 for c in res["cases"])


def test_level2_mock_pit_uniform():
    res = level2(seed=4, n_tokens=1500)
    assert res["n_tokens"] == 1500
    assert res["ks_pvalue"] > 1e-3 and res["rank_order"]["ks_pvalue"] > 1e-3
    assert res["ratio_order"]["ks_pvalue"] > 1e-3


@pytest.fixture(scope="module")
def calibration():
    return calibrate(n_tokens=3000, reps=40, alpha=0.05, seed=11, violation_reps=10)


def test_null_pvalues_are_not_rejected_as_non_uniform(calibration):
    table, summary = calibration
    for order in ("id", "rank", "ratio"):
        res = summary["orders"][order]
        assert res["null_repetitions"] == 40
        assert res["null_pvalues_ks_pvalue"] > 0.001
        assert res["null_rejection_rate"] <= 0.2


def test_planted_violations_are_rejected(calibration):
    """At 3000 tokens: a temperature error is seen in rank order, a skipped residual in
    ratio order (q/p); id order sees neither well (recorded, not asserted)."""
    _, summary = calibration
    assert summary["orders"]["rank"]["violations"]["temperature_1.05"]["rejection_rate"] >= 0.5
    assert summary["orders"]["ratio"]["violations"]["skip_residual"]["rejection_rate"] >= 0.8
    assert np.isfinite(summary["detectable_tv_80"])


def test_detectable_tv_interpolates():
    curve = [{"tv_per_token": 0.01, "power": 0.1}, {"tv_per_token": 0.03, "power": 0.7},
             {"tv_per_token": 0.05, "power": 0.9}]
    assert detectable_tv(curve) == pytest.approx(0.04)
    assert np.isnan(detectable_tv(curve[:2]))


def test_uniformity_small_sample_is_nan_not_error():
    assert np.isnan(uniformity(np.array([0.5]))["ks_pvalue"])


