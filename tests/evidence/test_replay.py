"""Certificate power by replay: each planted violation's law is the one the planted
sampler's own code produces (measured by calibration.step_distribution), the replayed
PIT values are uniform with nothing planted, the whole rule rejects a violation that
moves the output and keeps its level when none is planted, and the real loop with a
violation planted emits the law the replay assigns it (and a loop that does not fails the
check)."""
import numpy as np
import pytest
from scipy import stats

from specproof.decode.sampling import Sampler, softmax
from specproof.evidence.calibration import (TEMPERATURE_VIOLATION, SkipResidualSampler, mock_pair,
                                            step_distribution)
from specproof.evidence.pit import rank_below, ratio_key
from specproof.evidence.replay import (LOOP_VIOLATIONS, VIOLATIONS, Position, emitted_law, loop_agreement,
                                       mass_before, planted_evidence, planted_sampler, position_draws,
                                       run_positions, study_power)
from tests.conftest import random_dist

V = 7


@pytest.fixture
def dists():
    rng = np.random.default_rng(11)
    logits = rng.normal(size=V) * 2
    return logits, softmax(logits, 1.0), random_dist(rng, V)


def test_skip_residual_law_is_the_planted_samplers(dists):
    logits, p, q = dists
    measured = step_distribution(SkipResidualSampler(1.0), logits, q)
    np.testing.assert_allclose(emitted_law("skip_residual", p, q, None), measured, atol=1e-9)
    assert np.abs(measured - p).sum() > 1e-3  # the violation moves the output


def test_null_law_is_the_real_samplers(dists):
    logits, p, q = dists
    np.testing.assert_allclose(emitted_law("null", p, q, None), step_distribution(Sampler(1.0), logits, q),
                               atol=1e-9)


def test_temperature_law_is_sampling_at_c_times_t(dists):
    logits, p, q = dists
    law = emitted_law(f"temperature_{TEMPERATURE_VIOLATION}", p, q, None)
    np.testing.assert_allclose(law, softmax(logits, TEMPERATURE_VIOLATION), atol=1e-12)


def test_off_by_one_emits_the_previous_row_at_drafted_positions_only(dists):
    logits, p, q = dists
    prev_logits = np.roll(logits, 2)
    prev = softmax(prev_logits, 1.0)
    # the real rule run on the previous row's logits is exact for that row
    np.testing.assert_allclose(step_distribution(Sampler(1.0), prev_logits, q), prev, atol=1e-9)
    np.testing.assert_allclose(emitted_law("off_by_one", p, q, prev), prev)
    np.testing.assert_allclose(emitted_law("off_by_one", p, None, prev), p)  # a bonus position
    np.testing.assert_allclose(emitted_law("skip_residual", p, None, prev), p)


def test_mass_before_is_rank_below_for_every_token(dists):
    _, p, q = dists
    key = ratio_key(p, q, None)
    tokens = np.arange(V)
    np.testing.assert_allclose(mass_before(p, key), rank_below(np.tile(p, (V, 1)), tokens, np.tile(key, (V, 1))))


def test_ngram_positions_use_the_proposal_first_order():
    rng = np.random.default_rng(2)
    p = random_dist(rng, V)
    [pos] = list(run_positions([(p, None)], [3]))
    assert pos.q[3] == 1.0 and pos.q.sum() == 1.0
    np.testing.assert_array_equal(pos.key, ratio_key(p, None, 3))


def _positions(n: int, seed: int) -> list[Position]:
    rng = np.random.default_rng(seed)
    out, prev = [], None
    for i in range(n):
        p, q = random_dist(rng, 30), random_dist(rng, 30)
        drafted = i % 3 != 2
        out.append(Position(p, q if drafted else None, prev, ratio_key(p, q, None) if drafted else p))
        prev = p
    return out


def test_replayed_pit_values_are_uniform_when_nothing_is_planted():
    rng = np.random.default_rng(5)
    draws = np.stack([position_draws(x, 1, rng) for x in _positions(3000, 1)])
    null = draws[:, VIOLATIONS.index("null"), 0, :]
    for order in range(3):
        assert stats.kstest(null[:, order], "uniform").pvalue > 1e-3
    skip = draws[:, VIOLATIONS.index("skip_residual"), 0, 2]
    assert stats.kstest(skip, "uniform").pvalue < 1e-6  # the ratio order sees the skipped residual


def test_the_rule_rejects_a_planted_violation_and_keeps_its_level():
    rng = np.random.default_rng(6)
    draws = np.stack([position_draws(x, 40, rng) for x in _positions(600, 2)])
    power = study_power(draws, alpha=0.05).set_index("violation")
    assert power.loc["null", "rate"] <= 0.15
    assert power.loc["skip_residual", "rate"] >= 0.9
    assert power.loc["off_by_one", "rate"] >= 0.9
    assert (power["studies"] == 40).all() and (power["tokens"] == 600).all()
    doubled = study_power(draws, alpha=0.05, multiple=2)
    assert (doubled["studies"] == 20).all() and (doubled["tokens"] == 1200).all()


def _mock_evidence(planted: str, law: str, seed: int = 9) -> np.ndarray:
    """Evidence of 24 runs of the real loop on the mock pair with ``planted`` planted,
    read against the replay's law of ``law``."""
    target, draft = mock_pair(4)
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(0, target.vocab_size, size=6).tolist() for _ in range(24)]
    return np.concatenate([planted_evidence(target, draft, prompt, planted, 4, 64, 1.0, seed * 100 + i, rng,
                                            law=law) for i, prompt in enumerate(prompts)])


@pytest.mark.parametrize("violation", LOOP_VIOLATIONS)
def test_the_planted_loop_emits_the_replays_law(violation):
    r = loop_agreement(_mock_evidence(violation, violation), violation, 0.05)
    assert r["agrees"], r
    assert r["positions"] == 24 * 64 and 0 < r["drafted"] < r["positions"]
    if violation == "skip_residual":
        assert r["distinguished"] and r["z_target"] > 2, r  # the runs tell it from the target's law


def test_the_check_fails_when_the_loop_does_not_emit_the_law():
    r = loop_agreement(_mock_evidence("null", "skip_residual"), "skip_residual", 0.05)
    assert not r["agrees"] and r["z_law"] < -2, r


def test_planted_samplers_are_the_ones_the_laws_describe(dists):
    logits, p, q = dists
    for violation in LOOP_VIOLATIONS:
        measured = step_distribution(planted_sampler(violation, 1.0), logits, q)
        np.testing.assert_allclose(emitted_law(violation, p, q, None), measured, atol=1e-9)
    with pytest.raises(ValueError, match="no planted loop"):
        planted_sampler("off_by_one", 1.0)
