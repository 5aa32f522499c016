"""advise: the cost-model prediction is assembled from measured parts (no timing asserted)."""
import pytest

from specproof.evidence.advise import advise
from specproof.models.mock import MockBackend
from specproof.decode.costmodel import expected_committed
from specproof.decode.drafters import ModelDrafter, NGramDrafter

import numpy as np


def test_expected_committed_uses_survival_products():
    alpha = np.array([0.9, 0.5, 0.5])
    assert expected_committed(alpha, 3) == pytest.approx(1 + 0.9 + 0.45 + 0.225)
    assert expected_committed(alpha, 1) == pytest.approx(1.9)


@pytest.mark.parametrize("drafter_kind", ["model", "ngram"])
def test_advise_table_is_consistent(drafter_kind):
    target = MockBackend(vocab_size=40, seed=1, scale=3.0, latency_ms=1.0)
    draft = MockBackend(vocab_size=40, seed=1, scale=3.0, noise=0.5)
    drafter = ModelDrafter(draft) if drafter_kind == "model" else NGramDrafter()
    res = advise(target, drafter, [[1, 2, 3, 4], [5, 6, 7]], k_max=4, probe_tokens=16, repeats=2)
    assert [r["k"] for r in res["table"]] == [1, 2, 3, 4]
    best = max(res["table"], key=lambda r: r["predicted_speedup"])
    assert res["k"] == best["k"] and res["enable"] == (best["predicted_speedup"] > 1)
    for r in res["table"]:
        assert r["round_ms"] > 0 and 1.0 <= r["expected_committed"] <= r["k"] + 1
    assert set(res["verify_ms"]) == {1, 2, 3, 4, 5}


def test_a_position_asked_for_but_not_proposed_counts_as_rejected():
    """An n-gram lookup without a match proposes nothing (k=0) or fewer than K tokens;
    per drafted position it looks perfect, per requested position it does not."""
    import pandas as pd
    from specproof.decode.costmodel import acceptance_by_position
    rounds = pd.DataFrame({"k": [0, 2, 4], "accepted": [0, 2, 4]})
    assert acceptance_by_position(rounds, 4).tolist() == [1.0, 1.0, 1.0, 1.0]
    asked = acceptance_by_position(rounds, 4, requested=pd.Series([4, 4, 4]))
    assert asked.tolist() == pytest.approx([2 / 3, 1.0, 0.5, 1.0])
    # a model drafter proposes what it is asked: both definitions agree
    full = pd.DataFrame({"k": [4, 4, 2], "accepted": [1, 4, 2]})
    assert acceptance_by_position(full, 4, requested=full["k"]).tolist() == \
        acceptance_by_position(full, 4).tolist()



def test_expected_round_cost_follows_the_proposal_lengths():
    """A round costs min(K, d) draft steps and v(min(K, d) + 1): an n-gram lookup that
    proposes nothing costs one target step, a model drafter always K steps."""
    from specproof.decode.costmodel import expected_round_ms
    verify = {1: 10.0, 2: 11.0, 3: 12.0, 4: 13.0, 5: 14.0}
    assert expected_round_ms(3, np.array([0, 0]), 2.0, verify, 0.5) == pytest.approx(10.5)
    assert expected_round_ms(3, np.array([4, 4]), 2.0, verify, 0.5) == pytest.approx(3 * 2 + 13 + 0.5)
    assert expected_round_ms(3, np.array([1, 4]), 2.0, verify, 0.0) == pytest.approx(((2 + 11) + (6 + 13)) / 2)


# ---- the loop model (predict_loop) on synthetic probe records ------------------------------

V_ISO = {b: 10.0 + 1.5 * (b - 1) for b in range(1, 6)}


def probe_records(k_max=4, a=6.0, b=3.0, rho=1.3, t_target=12.0, x=0.4, noise=0.0, seed=0, rounds_per_k=6,
                  accepted=lambda i, d: min(d, i % 3), prompts=(0, 1)):
    """Probe records a real probe would write: isolated verify samples at v_iso(B) and a
    draft step at b; target-only rounds of ``t_target`` ms; speculative rounds asked for
    K_max, 1, K_max, 2, ... (CyclePolicy), each drafting d tokens in a + b d ms, verifying
    in rho v_iso(d + 1) ms, with ``x`` ms of residual, accepting ``accepted(i, d)`` tokens
    in its i-th round (default 0, 1, 2, 0, ... capped by d; ``accepted(i, d, prompt)`` where
    it takes three arguments). ``noise``: relative lognormal noise on every time."""
    import pandas as pd
    from specproof.evidence.advise import CyclePolicy
    rng = np.random.default_rng(seed)
    jitter = (lambda: float(np.exp(noise * rng.standard_normal()))) if noise else (lambda: 1.0)
    rows = []
    for prompt in prompts:
        for i in range(12):
            ns = int(t_target * jitter() * 1e6)
            rows.append(dict(path="target", prompt=prompt, requested=0, k=0, accepted=0, committed=1,
                             verify_positions=1, draft_ns=0, replay_ns=0, verify_ns=ns - 100_000,
                             residual_ns=100_000, round_ns=ns))
        policy = CyclePolicy(k_max)
        for i in range(rounds_per_k * 2 * (k_max - 1)):
            d = policy.next_k()
            acc = accepted(i, d, prompt) if accepted.__code__.co_argcount == 3 else accepted(i, d)
            draft, verify = (a + b * d) * jitter(), rho * V_ISO[d + 1] * jitter()
            rows.append(dict(path="speculative", prompt=prompt, requested=d, k=d, accepted=acc, committed=acc + 1,
                             verify_positions=d + 1, draft_ns=int(draft * 1e6), replay_ns=0,
                             verify_ns=int(verify * 1e6), residual_ns=int(x * 1e6),
                             round_ns=int((draft + verify + x) * 1e6)))
    rounds = pd.DataFrame(rows).assign(k_max=k_max)
    micro = pd.DataFrame([{"measure": "verify", "B": bb, "samples_ms": [v * jitter() for _ in range(3)]}
                          for bb, v in V_ISO.items()] + [{"measure": "draft", "B": 1, "samples_ms": [b] * 6}])
    return micro, rounds


def test_cycle_policy_asks_kmax_every_other_round_and_every_smaller_k():
    from specproof.evidence.advise import CyclePolicy
    p = CyclePolicy(4)
    assert [p.next_k() for _ in range(8)] == [4, 1, 4, 2, 4, 3, 4, 1]
    assert p.asked == [4, 1, 4, 2, 4, 3, 4, 1]
    one = CyclePolicy(1)
    assert [one.next_k() for _ in range(3)] == [1, 1, 1]


def test_the_loop_model_recovers_the_in_loop_costs_and_predicts_the_loop_speedup():
    from specproof.decode.costmodel import acceptance_by_position
    from specproof.evidence.advise import predict, predict_loop
    micro, rounds = probe_records()
    res = predict_loop(micro, rounds, 4, unit="rounds")
    assert res["draft_round_overhead_ms"] == pytest.approx(6.0, rel=1e-5)
    assert res["draft_step_ms"] == pytest.approx(3.0, rel=1e-5)
    assert res["verify_loop_ratio"] == pytest.approx(1.3, rel=1e-5)
    assert res["target_ms_per_token"] == pytest.approx(12.0, rel=1e-5)
    assert res["residual_ms"] == pytest.approx(0.4, rel=1e-5)
    spec = rounds[rounds["path"] == "speculative"]
    alpha = acceptance_by_position(spec, 4, requested=spec["requested"])
    for row in res["table"]:
        k = row["k"]
        truth = 12.0 * expected_committed(alpha, k) / (6.0 + 3.0 * k + 1.3 * V_ISO[k + 1] + 0.4)
        assert row["predicted_speedup"] == pytest.approx(truth, rel=1e-5)
    # the micro-benchmark model, which knows neither the overhead nor rho, predicts more
    micro_model = predict(micro, rounds, 4)
    assert micro_model["table"][res["k"] - 1]["predicted_speedup"] > 1.2 * res["predicted_speedup"]
    # no timing noise: the interval is acceptance's sampling noise alone
    assert res["predicted_low"] < res["predicted_speedup"] < res["predicted_high"]
    # and with every round accepting the same, nothing varies: the interval is the point
    res = predict_loop(*probe_records(accepted=lambda i, d: d), 4, unit="rounds")
    assert res["predicted_low"] == pytest.approx(res["predicted_speedup"], rel=1e-9)
    assert res["predicted_high"] == pytest.approx(res["predicted_speedup"], rel=1e-9)


def test_the_rounds_interval_covers_the_point_and_widens_with_the_probe_noise():
    from specproof.evidence.advise import predict_loop
    widths = []
    for noise in (0.05, 0.3):
        res = predict_loop(*probe_records(noise=noise, seed=1), 4, unit="rounds")
        assert res["predicted_low"] < res["predicted_speedup"] < res["predicted_high"]
        widths.append(res["predicted_high"] - res["predicted_low"])
    assert widths[1] > 2 * widths[0]
    # seeded: the audit recomputes the same interval
    again = predict_loop(*probe_records(noise=0.3, seed=1), 4, unit="rounds")
    assert again["predicted_high"] - again["predicted_low"] == widths[1]


def test_the_audit_recomputes_a_loop_row_with_the_loop_model_and_an_old_row_with_the_micro_model():
    import pandas as pd
    from specproof.analysis.summaries import recompute_advise
    from specproof.evidence.advise import predict, predict_loop
    micro, rounds = probe_records(noise=0.1)
    runs = pd.DataFrame({"path": ["target", "speculative"], "prompt": [0, 0], "new_tokens": [10, 10],
                         "decode_ns": [200, 100]})
    summary = pd.DataFrame([{"pair": "p", "k": 0, "predicted_speedup": 0.0, "realized_speedup": 0.0,
                             "enable": False, "draft_to_target_ratio": 0.0, "model": "loop",
                             "predicted_low": 0.0, "predicted_high": 0.0, "micro_predicted_speedup": 0.0}])
    tag = lambda df: df.assign(pair="p")  # noqa: E731
    out = recompute_advise(summary, tag(micro), tag(rounds), tag(runs)).iloc[0]
    loop, old = predict_loop(micro, rounds, 4, unit="rounds"), predict(micro, rounds, 4)
    assert out["predicted_speedup"] == loop["predicted_speedup"] and out["k"] == loop["k"]
    assert (out["predicted_low"], out["predicted_high"]) == (loop["predicted_low"], loop["predicted_high"])
    assert out["micro_predicted_speedup"] == old["table"][loop["k"] - 1]["predicted_speedup"]
    assert out["realized_speedup"] == pytest.approx(2.0)
    frozen = summary.drop(columns=["model", "predicted_low", "predicted_high", "micro_predicted_speedup"])
    out = recompute_advise(frozen, tag(micro), tag(rounds), tag(runs)).iloc[0]
    assert out["predicted_speedup"] == old["predicted_speedup"] and out["k"] == old["k"]


def test_the_audit_recomputes_a_prompts_interval_for_as_many_prompts_as_the_check_ran():
    import pandas as pd
    from specproof.analysis.summaries import recompute_advise
    from specproof.evidence.advise import predict_loop
    micro, rounds = probe_records(noise=0.1, prompts=range(4), accepted=lambda i, d, p: min(d, (i + p) % 3))
    runs = pd.DataFrame({"path": ["target", "speculative"] * 3, "prompt": [0, 0, 1, 1, 2, 2],
                         "new_tokens": [10] * 6, "decode_ns": [200, 100] * 3})
    summary = pd.DataFrame([{"pair": "p", "k": 0, "predicted_speedup": 0.0, "realized_speedup": 0.0,
                             "enable": False, "draft_to_target_ratio": 0.0, "model": "loop",
                             "predicted_low": 0.0, "predicted_high": 0.0, "micro_predicted_speedup": 0.0,
                             "interval_unit": "prompts", "probe_prompts": 0, "future_prompts": 0}])
    tag = lambda df: df.assign(pair="p")  # noqa: E731
    out = recompute_advise(summary, tag(micro), tag(rounds), tag(runs)).iloc[0]
    loop = predict_loop(micro, rounds, 4, future_prompts=3)
    assert (out["predicted_low"], out["predicted_high"]) == (loop["predicted_low"], loop["predicted_high"])
    assert (out["probe_prompts"], out["future_prompts"], out["interval_unit"]) == (4, 3, "prompts")


def test_the_prompt_interval_carries_the_spread_between_prompts():
    """Prompts alike (no timing noise, the same acceptance): the interval over prompts is
    the point. Prompts that differ in acceptance: it widens, more so for a check on fewer
    new prompts, and it is wider than the rounds interval, which sees only round noise."""
    from specproof.evidence.advise import predict_loop
    alike = predict_loop(*probe_records(prompts=range(6)), 4)
    assert alike["predicted_low"] == pytest.approx(alike["predicted_speedup"], rel=1e-9)
    assert alike["predicted_high"] == pytest.approx(alike["predicted_speedup"], rel=1e-9)
    differ = probe_records(prompts=range(6), accepted=lambda i, d, p: min(d, (i % 2) * p))
    width = lambda r: r["predicted_high"] - r["predicted_low"]  # noqa: E731
    many, few = predict_loop(*differ, 4, future_prompts=40), predict_loop(*differ, 4, future_prompts=2)
    assert many["predicted_low"] < many["predicted_speedup"] < many["predicted_high"]
    assert width(few) > 1.3 * width(many)
    assert width(many) > width(predict_loop(*differ, 4, unit="rounds"))
    assert many["probe_prompts"] == 6 and many["interval_unit"] == "prompts"


def test_the_prompt_interval_covers_new_prompts_drawn_like_the_probes():
    """A population of prompts whose acceptance differs: probe 8, then take the loop
    model's speedup on 24 other prompts as what a check would realize. Over 40 such
    studies the 95% interval covers it in most (binomial: 0.95 expected, 0.8 bound)."""
    from specproof.evidence.advise import predict_loop
    rng = np.random.default_rng(7)
    covered = 0
    for trial in range(40):
        rate = rng.beta(2, 2, size=32)
        accept = lambda i, d, p: int(min(d, rng.geometric(1 - 0.95 * rate[p]) - 1))  # noqa: E731
        probe = probe_records(prompts=range(8), accepted=accept, noise=0.05, seed=trial, rounds_per_k=2)
        check = probe_records(prompts=range(8, 32), accepted=accept, noise=0.05, seed=trial + 100,
                              rounds_per_k=2)
        pred = predict_loop(*probe, 4, resamples=200, future_prompts=24)
        truth = predict_loop(*check, 4, resamples=0)["table"][pred["k"] - 1]["predicted_speedup"]
        covered += pred["predicted_low"] <= truth <= pred["predicted_high"]
    assert covered >= 32


def test_a_replayed_ngram_round_proposes_and_commits_as_the_rule_says():
    from specproof.decode.costmodel import replayed_rounds
    from specproof.decode.drafters import NGramDrafter
    # context 5 6 7; output 5 6 9 5 6 9: at t=0 the last token 7 has no earlier match
    # (1-gram 7 unseen) -> nothing proposed, commit 5; then "7 5" -> 1-gram 5 matches ->
    # propose 6 7 (K=2): 6 accepted, 7 rejected -> commit 6 9; ...
    proposed, committed = replayed_rounds(NGramDrafter(3, 1), [5, 6, 7], [5, 6, 9, 5, 6, 9], 2)
    assert committed.sum() == 6 and list(proposed[:2]) == [0, 2] and list(committed[:2]) == [1, 2]
    assert all(p <= 2 for p in proposed)


def test_the_replay_commits_what_the_speculative_loop_commits():
    """Greedy on a mock target (exact numerics): the n-gram drafter replayed over the
    target-only output gives the rounds the speculative loop really ran, K by K."""
    from specproof.decode.costmodel import replayed_rounds
    from specproof.decode.decoding import DecodeSettings, decode_speculative, decode_target_only
    from specproof.decode.drafters import NGramDrafter
    from specproof.decode.policies import FixedPolicy
    target = MockBackend(vocab_size=12, seed=3, scale=1.5)
    prompt, s = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2], DecodeSettings(24, 0.0, 0)
    ids = decode_target_only(target, prompt, s).new_ids
    for k in (1, 3, 6):
        run = decode_speculative(target, NGramDrafter(3, 1), prompt, s, FixedPolicy(k)).rounds_frame()
        proposed, committed = replayed_rounds(NGramDrafter(3, 1), prompt, ids, k)
        assert list(proposed) == run["k"].tolist() and list(committed) == run["committed"].tolist()
    assert run["k"].sum() > 0  # the drafter did propose


def test_an_ngram_probe_predicts_from_its_replay_not_from_per_round_acceptance():
    """With the sequences recorded, E[C|K] is the replay's mean committed per round."""
    from specproof.decode.costmodel import replayed_rounds
    from specproof.decode.drafters import NGramDrafter
    target = MockBackend(vocab_size=12, seed=3, scale=1.5, latency_ms=1.0)
    prompts = [[1, 2, 3, 4, 1, 2, 3, 4, 1, 2], [5, 6, 5, 6, 5, 6]]
    rec: dict = {}
    res = advise(target, NGramDrafter(3, 1), prompts, k_max=4, probe_tokens=16, repeats=2, records=rec)
    t = rec["rounds"][rec["rounds"]["path"] == "target"]
    for k in (1, 4):
        committed = np.concatenate([replayed_rounds(NGramDrafter(3, 1), p, [int(x) for x in
                                    t.loc[t["prompt"] == i, "token"]], k)[1] for i, p in enumerate(prompts)])
        assert res["table"][k - 1]["expected_committed"] == pytest.approx(committed.mean())


# ---- the confirmation: the speedup measured at the chosen K ------------------------------

def paired_records(speedups, target_ns=10**8, tokens=20, phase=None):
    """Runs as ``paired_runs`` writes them: per prompt p one target-only run of
    ``target_ns`` and one speculative run realizing ``speedups[p]`` (equal tokens)."""
    import pandas as pd
    rows = [{"path": path, "prompt": p, "k": 2, "new_tokens": tokens, "decode_ns": ns}
            for p, s in enumerate(speedups) for path, ns in (("target", target_ns), ("speculative", int(target_ns / s)))]
    runs = pd.DataFrame(rows)
    return runs if phase is None else runs.assign(phase=phase)


def test_paired_runs_alternate_the_order_and_stop_at_the_deadline_after_two_prompts():
    import time
    from specproof.decode.decoding import DecodeSettings
    from specproof.evidence.advise import paired_runs
    target = MockBackend(vocab_size=40, seed=1, scale=3.0)
    drafter = ModelDrafter(MockBackend(vocab_size=40, seed=1, scale=3.0, noise=0.5))
    prompts = [[1, 2, 3], [4, 5], [6, 7, 8], [9]]
    runs = paired_runs(target, drafter, prompts, 2, DecodeSettings(8, 0.0, 0))
    assert [(r["prompt"], r["path"]) for r in runs][:4] == \
        [(0, "target"), (0, "speculative"), (1, "speculative"), (1, "target")]
    assert len(runs) == 8 and {r["k"] for r in runs} == {2} and all(r["new_tokens"] == 8 for r in runs)
    past = paired_runs(target, drafter, prompts, 2, DecodeSettings(8, 0.0, 0), deadline=time.perf_counter())
    assert sorted({r["prompt"] for r in past}) == [0, 1]


def test_the_confirmed_prediction_is_the_measured_speedup_with_an_interval_for_new_prompts():
    from specproof.evidence.advise import confirmed_prediction, realized_from_runs
    alike = confirmed_prediction(paired_records([0.8] * 6), future_prompts=20)
    assert alike["predicted_speedup"] == pytest.approx(0.8)
    assert alike["predicted_low"] == pytest.approx(0.8) and alike["predicted_high"] == pytest.approx(0.8)
    differ = paired_records([0.6, 1.0, 0.7, 1.2, 0.8, 0.9])
    many, few = confirmed_prediction(differ, 40), confirmed_prediction(differ, 2)
    assert many["predicted_speedup"] == realized_from_runs(differ) and many["confirm_prompts"] == 6
    assert many["predicted_low"] < many["predicted_speedup"] < many["predicted_high"]
    width = lambda r: r["predicted_high"] - r["predicted_low"]  # noqa: E731
    assert width(few) > 1.3 * width(many)
    assert confirmed_prediction(differ, 40) == many  # seeded: the audit recomputes it


def test_the_confirmed_interval_covers_the_speedup_of_new_prompts():
    """Prompts whose speedups spread (lognormal, 15%): confirm on 8, check on 24 others.
    Over 60 such studies the 95% interval covers the check's pooled speedup in most
    (binomial: 57 expected; 50 is below it by more than two standard deviations)."""
    from specproof.evidence.advise import confirmed_prediction, realized_from_runs
    rng = np.random.default_rng(3)
    covered = 0
    for _ in range(60):
        s = 0.8 * np.exp(0.15 * rng.standard_normal(32))
        pred = confirmed_prediction(paired_records(s[:8]), 24, resamples=400)
        covered += pred["predicted_low"] <= realized_from_runs(paired_records(s[8:])) <= pred["predicted_high"]
    assert covered >= 50


def test_advise_with_a_confirmation_predicts_what_it_measured_at_the_chosen_k():
    from specproof.evidence.advise import realized_from_runs
    target = MockBackend(vocab_size=40, seed=1, scale=3.0, latency_ms=1.0)
    drafter = ModelDrafter(MockBackend(vocab_size=40, seed=1, scale=3.0, noise=0.5))
    rec: dict = {}
    res = advise(target, drafter, [[1, 2, 3, 4], [5, 6, 7], [8, 9]], k_max=3, probe_tokens=12, repeats=2,
                 records=rec, future_prompts=5, confirm_s=1e-9)
    confirm = rec["confirm"]
    assert res["model"] == "confirmed" and res["confirm_prompts"] == 2 == confirm["prompt"].nunique()
    assert set(confirm["k"]) == {res["k"]} and res["predicted_speedup"] == realized_from_runs(confirm)
    assert res["enable"] == (res["predicted_speedup"] > 1)
    assert res["loop_predicted_speedup"] == res["table"][res["k"] - 1]["predicted_speedup"]
    plain = advise(target, drafter, [[1, 2, 3, 4], [5, 6, 7]], k_max=3, probe_tokens=12, repeats=2, records=rec)
    assert plain["model"] == "loop" and plain["confirm_prompts"] == 0 and rec["confirm"].empty


def advise_summary(model, confirm_prompts):
    """An advise.parquet of one pair 'p' whose every recomputed column is zero, with
    ``model`` and ``confirm_prompts`` as given."""
    import pandas as pd
    return pd.DataFrame([{"pair": "p", "k": 0, "predicted_speedup": 0.0, "realized_speedup": 0.0,
                          "enable": True, "draft_to_target_ratio": 0.0, "model": model,
                          "predicted_low": 0.0, "predicted_high": 0.0, "micro_predicted_speedup": 0.0,
                          "interval_unit": "prompts", "probe_prompts": 0, "future_prompts": 0,
                          "loop_predicted_speedup": 0.0, "confirm_prompts": confirm_prompts}])


def test_the_audit_recomputes_a_confirmed_row_from_the_confirmation_and_the_check_apart():
    import pandas as pd
    from specproof.analysis.summaries import recompute_advise
    from specproof.evidence.advise import confirmed_prediction, predict_loop
    micro, rounds = probe_records(noise=0.1, prompts=range(4))
    confirm, check = paired_records([0.7, 0.9, 0.8], phase="confirm"), paired_records([1.0, 1.0], phase="check")
    summary = advise_summary("confirmed", confirm_prompts=0)
    tag = lambda df: df.assign(pair="p")  # noqa: E731
    out = recompute_advise(summary, tag(micro), tag(rounds), tag(pd.concat([confirm, check]))).iloc[0]
    want = confirmed_prediction(confirm, 2)
    assert (out["predicted_speedup"], out["predicted_low"], out["predicted_high"]) == \
        (want["predicted_speedup"], want["predicted_low"], want["predicted_high"])
    assert out["realized_speedup"] == pytest.approx(1.0) and not out["enable"]
    assert out["loop_predicted_speedup"] == predict_loop(micro, rounds, 4, future_prompts=2)["predicted_speedup"]
    assert (out["confirm_prompts"], out["future_prompts"]) == (3, 2)


def test_the_audit_recomputes_a_loop_row_that_carries_the_confirmation_columns():
    """The stage writes loop_predicted_speedup and confirm_prompts 0 on a row whose
    confirmation did not run; recomputing it gives the loop model's own numbers."""
    from specproof.analysis.summaries import recompute_advise
    from specproof.evidence.advise import predict_loop
    micro, rounds = probe_records(noise=0.1, prompts=range(4))
    check = paired_records([1.0, 1.0], phase="check")
    summary = advise_summary("loop", confirm_prompts=5)
    tag = lambda df: df.assign(pair="p")  # noqa: E731
    out = recompute_advise(summary, tag(micro), tag(rounds), tag(check)).iloc[0]
    loop = predict_loop(micro, rounds, 4, unit="prompts", future_prompts=2)
    assert out["predicted_speedup"] == out["loop_predicted_speedup"] == loop["predicted_speedup"]
    assert (out["confirm_prompts"], out["model"]) == (0, "loop")
