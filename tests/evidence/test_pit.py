"""The PIT transform is exactly uniform under the null (enumerated on small vocabularies)."""
import numpy as np
import pytest

from conftest import random_dist
from specproof.evidence.pit import pit_one, pit_rank_values, pit_values, rank_below


def pit_cdf(p: np.ndarray, below: np.ndarray, s: float) -> float:
    """P(u <= s) for x ~ p, V ~ U(0,1), u = below(x) + V p(x): sum_x p(x) clip((s - below)/p, 0, 1)."""
    mask = p > 0
    return float((p[mask] * np.clip((s - below[mask]) / p[mask], 0, 1)).sum())


@pytest.mark.parametrize("v,support", [(2, None), (5, None), (9, 4), (16, None)])
def test_pit_is_exactly_uniform_in_both_orders(v, support):
    rng = np.random.default_rng(v)
    for _ in range(20):
        p = random_dist(rng, v, support)
        tokens = np.arange(v)
        below_id = np.cumsum(p) - p
        below_rank = rank_below(np.tile(p, (v, 1)), tokens)
        for s in np.linspace(0, 1, 41):
            assert pit_cdf(p, below_id, s) == pytest.approx(s, abs=1e-12)
            assert pit_cdf(p, below_rank, s) == pytest.approx(s, abs=1e-12)


def test_rank_order_breaks_ties_by_id_and_matches_scalar_version():
    p = np.array([0.25, 0.25, 0.4, 0.1])
    np.testing.assert_allclose(rank_below(np.tile(p, (4, 1)), np.arange(4)), [0.4, 0.65, 0.0, 0.9])
    for x in range(4):
        u, u_rank, px, below = pit_one(p, x, 0.5)
        assert u == pytest.approx(pit_values(p[None], np.array([x]), np.array([0.5]))[0])
        assert u_rank == pytest.approx(pit_rank_values(p[None], np.array([x]), np.array([0.5]))[0])
        assert px == p[x] and below == pytest.approx(p[:x].sum())


def test_pit_detects_a_wrong_distribution():
    from scipy import stats
    rng = np.random.default_rng(0)
    p = random_dist(rng, 6)
    wrong = np.roll(p, 1)
    x = rng.choice(6, size=4000, p=wrong)
    u = pit_values(np.tile(p, (4000, 1)), x, rng.random(4000))
    assert stats.kstest(u, "uniform").pvalue < 1e-6
