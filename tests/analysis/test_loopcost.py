"""In-loop vs isolated costs (analysis.loopcost) on synthetic records whose in-loop costs
are set by hand: the ratios, the draft round fit and the split of realized / model."""
import math

import numpy as np
import pandas as pd
import pytest

from specproof.analysis.costs import config_costs, run_costs
from specproof.analysis.loopcost import TERMS, loop_costs, pair_summary, shapley_log_factors
from specproof.decode.costmodel import fit_draft_round

V_ISO = {b: 10.0 + 2.0 * (b - 1) for b in range(1, 10)}  # isolated verify curve, ms
C_ISO = 3.0  # isolated draft step, ms


def synthetic(draft_a=0.0, draft_b=C_ISO, verify_ratio=1.0, target_ratio=1.0, residual_ms=0.0,
              ks=(2, 4), accepted=None, rounds_per_run=6):
    """One pair; per K one speculative run per prompt (2 prompts), bracketed by two
    target-only runs. Every speculative round drafts K, accepts ``accepted(K)``; its
    draft time is a + b K, its verify rho v_iso(K + 1), plus ``residual_ms``. A target-only
    step costs target_ratio * v_iso(1)."""
    accepted = accepted or (lambda k: k // 2)
    runs, rounds, rid = [], [], 0
    t_ms = target_ratio * V_ISO[1]
    for k in ks:
        config = f"K{k}-fixed-batched-T0"
        for prompt in ("p0", "p1"):
            for _ in range(2):  # bracketing target-only runs
                n = 12
                runs.append(dict(run_id=rid, path="target", config="target-only", k=0, policy="fixed",
                                 prompt_id=prompt, new_tokens=n, decode_ns=int(n * t_ms * 1e6)))
                rounds += [dict(run_id=rid, round=i, k=0, accepted=0, committed=1, verify_positions=1,
                                draft_ns=0, replay_ns=0, verify_ns=int(t_ms * 1e6), residual_ns=0)
                           for i in range(n)]
                rid += 1
            round_ms = draft_a + draft_b * k + verify_ratio * V_ISO[k + 1] + residual_ms
            c = accepted(k) + 1
            runs.append(dict(run_id=rid, path="speculative", config=config, k=k, policy="fixed", prompt_id=prompt,
                             new_tokens=c * rounds_per_run, decode_ns=int(rounds_per_run * round_ms * 1e6)))
            rounds += [dict(run_id=rid, round=i, k=k, accepted=accepted(k), committed=c, verify_positions=k + 1,
                            draft_ns=int((draft_a + draft_b * k) * 1e6), replay_ns=0,
                            verify_ns=int(verify_ratio * V_ISO[k + 1] * 1e6), residual_ns=int(residual_ms * 1e6))
                       for i in range(rounds_per_run)]
            rid += 1
    runs = pd.DataFrame(runs).assign(pair="t+d", target="t", draft="d", workload="chat", rep=0,
                                     verify_mode="batched", temperature=0.0)
    runs["tokens_per_s"] = runs["new_tokens"] / (runs["decode_ns"] / 1e9)
    rounds = pd.DataFrame(rounds)
    rounds["round_ns"] = rounds[["draft_ns", "replay_ns", "verify_ns", "residual_ns"]].sum(axis=1)
    micro = pd.DataFrame([{"role": "target", "name": "t", "B": b, "median_ms": v} for b, v in V_ISO.items()]
                         + [{"role": "draft", "name": "d", "B": 1, "median_ms": C_ISO}])
    return runs, rounds, micro


def test_isolated_costs_in_the_loop_give_the_micro_model_exactly():
    lc = loop_costs(*synthetic())
    assert len(lc) == 2
    for r in lc.itertuples():
        assert r.draft_ratio == pytest.approx(1) and r.verify_ratio == pytest.approx(1)
        assert r.target_ratio == pytest.approx(1)
        assert r.realized_over_model == pytest.approx(1, rel=1e-6)
        for t in (*TERMS, "committed"):
            assert getattr(r, f"gap_{t}") == pytest.approx(1, rel=1e-6)


def test_the_one_inflated_term_takes_the_whole_gap():
    lc = loop_costs(*synthetic(verify_ratio=1.4))
    for r in lc.itertuples():
        assert r.verify_ratio == pytest.approx(1.4, rel=1e-6)
        assert r.realized_over_model < 0.9
        assert r.gap_verify == pytest.approx(r.realized_over_model, rel=1e-6)
        assert r.explains == "verify"
    lc = loop_costs(*synthetic(target_ratio=1.3))
    assert (lc["explains"] == "target").all() and (lc["realized_over_model"] > 1).all()


def test_a_per_round_draft_overhead_is_fitted_and_named():
    lc = loop_costs(*synthetic(draft_a=5.0, ks=(2, 4, 6)))
    assert lc["draft_round_overhead_ms"].iloc[0] == pytest.approx(5.0, rel=1e-6)
    assert lc["draft_token_ms"].iloc[0] == pytest.approx(C_ISO, rel=1e-6)
    # the overhead weighs most at small K: the draft ratio falls with K
    assert list(lc.sort_values("k")["draft_ratio"]) == sorted(lc["draft_ratio"], reverse=True)
    assert (lc["explains"] == "draft").all()
    s = pair_summary(lc).iloc[0]
    assert s["explains"] == "draft" and s["draft_round_overhead_ms"] == pytest.approx(5.0, rel=1e-6)


def test_factors_multiply_to_realized_over_model_and_match_config_costs():
    runs, rounds, micro = synthetic(draft_a=4.0, verify_ratio=1.2, target_ratio=1.1, residual_ms=0.7)
    lc = loop_costs(runs, rounds, micro)
    cc = config_costs(run_costs(runs, rounds), rounds, micro).set_index("config")
    for r in lc.to_dict(orient="records"):
        product = math.prod(r[f"gap_{t}"] for t in (*TERMS, "committed"))
        assert product == pytest.approx(r["realized_over_model"], rel=1e-9)
        assert r["S_model"] == pytest.approx(cc.loc[r["config"], "S_model"], rel=1e-12)
        assert r["S_measured"] == pytest.approx(cc.loc[r["config"], "S_measured"], rel=1e-6)  # ns rounding
        assert r["gap_residual"] < 1 and r["gap_target"] > 1


def test_shapley_factors_are_symmetric_and_exact():
    iso = {"target": 10.0, "draft": 6.0, "verify": 12.0, "residual": 0.0}
    loop = {"target": 10.0, "draft": 9.0, "verify": 15.0, "residual": 0.0}
    f = shapley_log_factors(iso, loop, 2.5)
    assert f["target"] == pytest.approx(1) and f["residual"] == pytest.approx(1)
    assert f["draft"] * f["verify"] == pytest.approx(18 / 24)
    # equal absolute increases (+3 ms each) share the log-change equally
    assert f["draft"] == pytest.approx(f["verify"])


def test_draft_round_fit_falls_back_to_the_pooled_step():
    assert fit_draft_round(np.array([2, 2, 2]), np.array([7.0, 7.0, 7.0])) == (0.0, 3.5)
    a, b = fit_draft_round(np.array([1, 2, 4, 0]), np.array([5.0, 8.0, 14.0, 99.0]))
    assert (a, b) == pytest.approx((2.0, 3.0))
    # a negative intercept is not a physical overhead
    assert fit_draft_round(np.array([1, 3]), np.array([1.0, 9.0])) == (0.0, 2.5)
