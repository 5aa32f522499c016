"""Calibration on the mock model: null p-values uniform; planted violations rejected."""
import numpy as np
import pandas as pd
import pytest

from specproof.analysis.certificate import certificate
from specproof.evidence.calibration import calibrate, detectable_tv, level1, level2, rule_calibration
from specproof.evidence.pit import RULE_TESTS, rule_decision, uniformity


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


# ---------------------------------------------------------------- the whole rule

def test_whole_rule_is_calibrated_and_sees_both_planted_violations(calibration):
    """The rule the certificate applies (six tests at alpha/6), not each test: size at
    most alpha (within sampling error) and power against both violations."""
    table, summary = calibration
    rule = summary["rule"]
    assert rule["tests"] == 6 and rule["level"] == pytest.approx(0.05 / 6)
    null = rule["scenarios"]["null"]
    assert null["repetitions"] == 40 and null["ci_low"] <= 0.05
    assert rule["scenarios"]["skip_residual"]["rejection_rate"] >= 0.8
    assert rule["scenarios"]["temperature_1.05"]["rejection_rate"] >= 0.5
    assert np.isfinite(rule["detectable_tv_80"])
    assert summary["power_curve"]["rule"][-1]["power"] >= 0.8  # the largest delta is seen


def test_rule_calibration_counts_a_rejection_when_any_test_is_below_alpha_over_six():
    ones = {c: 0.5 for _, c in RULE_TESTS}
    table = pd.DataFrame([{"scenario": "null", "n_tokens": 100, **ones},
                          {"scenario": "null", "n_tokens": 100, **ones, "ratio_chi2_pvalue": 0.008},
                          {"scenario": "null", "n_tokens": 100, **ones, "rank_ks_pvalue": 0.009}])
    res = rule_calibration(table, 0.05)["null"]
    assert res["rejections"] == 1 and res["repetitions"] == 3  # 0.008 < 0.05/6 < 0.009
    assert res["ci_low"] < 1 / 3 < res["ci_high"]


def test_rule_without_ratio_order_uses_four_tests():
    pv = {c: 0.01 for _, c in RULE_TESTS[:4]} | {"ratio_ks_pvalue": None, "ratio_chi2_pvalue": None}
    d = rule_decision(pv, 0.05)
    assert d["tests"] == 4 and d["level"] == pytest.approx(0.0125) and d["rejected"]
    d6 = rule_decision({**pv, "ratio_ks_pvalue": 0.5, "ratio_chi2_pvalue": 0.5}, 0.05)
    assert d6["tests"] == 6 and not d6["rejected"]


def _pit_frame(rng, n, pairs, ratio=True, bad_pair=None):
    rows = []
    for pair in pairs:
        u = rng.random((n, 3))
        if pair == bad_pair:
            u[:, 2] = rng.random(n) ** 1.5  # only the ratio order is off
        for i in range(n):
            rows.append({"run_id": f"{pair}|{i // 20}", "pair": pair, "target": pair, "path": "speculative",
                         "workload": "code", "prompt_id": f"p{i // 20}", "p_token": 0.5,
                         "u": u[i, 0], "u_rank": u[i, 1], **({"u_ratio": u[i, 2]} if ratio else {})})
    return pd.DataFrame(rows)


CAL = {"detectable_tv_80": 0.01, "detectable_tv_80_id_order": 0.02, "power_family": "T"}


def test_certificate_per_pair_whole_rule_catches_a_pair_the_id_order_misses():
    rng = np.random.default_rng(0)
    pit = _pit_frame(rng, 2000, ["good", "bad"], bad_pair="bad")
    c = certificate(pit, CAL, seed=1)
    assert c["ratio_recorded"] and c["tests"] == 6
    assert c["per_pair"]["bad"]["rejected"] and "ratio order" in c["per_pair"]["bad"]["min_pvalue_test"]
    assert c["per_pair"]["bad"]["ks_pvalue"] > 0.01  # id order alone would pass it
    assert not c["per_pair"]["good"]["rejected"]


def test_old_record_set_without_ratio_order_reports_it_as_not_recorded():
    rng = np.random.default_rng(1)
    c = certificate(_pit_frame(rng, 300, ["a"], ratio=False), CAL, seed=1)
    assert c["ratio_recorded"] is False and c["ratio_order"] is None and c["tests"] == 4
    assert c["per_pair"]["a"]["pvalues"]["ratio_ks_pvalue"] is None and c["per_pair"]["a"]["tests"] == 4
