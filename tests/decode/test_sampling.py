"""Level 1: the accept/reject step's output distribution equals p, exactly and by draws."""
import numpy as np
import pytest
from scipy import stats

from conftest import random_dist
from specproof.evidence.calibration import SkipResidualSampler, level1, step_distribution
from specproof.decode.sampling import Sampler, acceptance_probability, residual_distribution, sample_from, softmax


def output_distribution(p, q, sampler=None):
    """The exact law of Sampler.verify_token at T = 1 (logits log p), measured on its code."""
    return step_distribution(sampler or Sampler(1.0), np.log(np.where(p > 0, p, 1e-300)), q)


CASES = [(5, None, None), (12, None, None), (12, 6, None), (12, None, 4), (12, 5, 5), (3, 1, None)]


@pytest.mark.parametrize("v,p_support,q_support", CASES)
def test_branch_enumeration_reproduces_p_exactly(v, p_support, q_support):
    rng = np.random.default_rng(v * 31 + (p_support or 0))
    for _ in range(50):
        p, q = random_dist(rng, v, p_support), random_dist(rng, v, q_support)
        np.testing.assert_allclose(output_distribution(p, q), p, rtol=0, atol=1e-12)


def test_equal_distributions_always_accept():
    rng = np.random.default_rng(0)
    p = random_dist(rng, 10)
    for x in range(10):
        if p[x] > 0:
            assert acceptance_probability(p, p.copy(), x) == 1.0
    np.testing.assert_allclose(output_distribution(p, p.copy()), p, atol=1e-12)


def test_one_hot_draft_is_lossless_and_zero_q_never_accepts():
    rng = np.random.default_rng(1)
    p = random_dist(rng, 8)
    for x in range(8):
        q = np.zeros(8)
        q[x] = 1.0
        np.testing.assert_allclose(output_distribution(p, q), p, atol=1e-12)
    assert acceptance_probability(p, np.zeros(8), 3) == 0.0


@pytest.mark.parametrize("v,p_support,q_support", [(6, None, None), (10, 5, None), (10, None, 3)])
def test_verify_token_draws_match_p_chi_square(v, p_support, q_support):
    """>= 50,000 seeded draws of the full step (draft, accept/reject, residual) against p."""
    gen = np.random.default_rng(100 + v)
    p, q = random_dist(gen, v, p_support), random_dist(gen, v, q_support)
    logits_p = np.log(np.where(p > 0, p, 1e-300))  # T = 1 softmax recovers p
    sampler = Sampler(temperature=1.0)
    rng = np.random.default_rng(7)
    n = 50_000
    counts = np.zeros(v)
    for _ in range(n):
        x = sample_from(q, rng.random())
        _, y = sampler.verify_token(logits_p, x, q, rng)
        counts[y] += 1
    support = p > 1e-12
    assert counts[~support].sum() == 0
    expected = n * p[support]
    _, pvalue = stats.chisquare(counts[support], expected * counts[support].sum() / expected.sum())
    assert pvalue > 1e-3


def test_level1_catches_a_sampler_that_skips_the_residual():
    """Both level-1 checks see the bug: the exact law moves off p, and the draws' chi-square
    rejects; the correct sampler passes the same checks."""
    rng = np.random.default_rng(5)
    p, q = random_dist(rng, 6), random_dist(rng, 6)
    assert np.abs(output_distribution(p, q, SkipResidualSampler(1.0)) - p).max() > 1e-3
    np.testing.assert_allclose(output_distribution(p, q), p, atol=1e-12)
    bad, good = level1(seed=3, draws=20_000, sampler=SkipResidualSampler(1.0)), level1(seed=3, draws=20_000)
    assert bad["max_exact_error"] > 1e-3 and bad["min_chi2_pvalue"] < 1e-6
    assert good["max_exact_error"] < 1e-12 and good["min_chi2_pvalue"] > 1e-4


def test_exact_law_agrees_with_the_formula():
    """The measured law equals P(y) = q(y) a(y) + sum_x q(x)(1 - a(x)) r(y)."""
    rng = np.random.default_rng(9)
    p, q = random_dist(rng, 7, 4), random_dist(rng, 7)
    a = np.array([acceptance_probability(p, q, x) for x in range(7)])
    formula = q * a + (q * (1 - a)).sum() * residual_distribution(p, q)
    np.testing.assert_allclose(output_distribution(p, q), formula, atol=1e-12)


def test_greedy_is_argmax_and_temperature_to_zero_converges():
    logits = np.array([0.1, 2.0, 1.9, -3.0], dtype=np.float32)
    s = Sampler(0.0)
    assert s.sample(logits, np.random.default_rng(0)) == 1
    assert s.verify_token(logits, 1, None, np.random.default_rng(0)) == (True, 1)
    assert s.verify_token(logits, 2, None, np.random.default_rng(0)) == (False, 1)
    assert softmax(logits, 1e-3)[1] == pytest.approx(1.0, abs=1e-12)


def test_sampling_arithmetic_is_float64_and_float32_would_drift():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=262_144).astype(np.float32)
    p = softmax(logits, 1.0)
    assert p.dtype == np.float64
    assert abs(np.cumsum(p)[-1] - 1.0) < 1e-10
    drift32 = abs(float(np.cumsum(p.astype(np.float32), dtype=np.float32)[-1]) - 1.0)
    assert drift32 > 1e-6  # why float32 is not used
