"""The PIT transform is exactly uniform under the null (enumerated on small vocabularies)."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from conftest import random_dist
from specproof.decode.decoding import DecodeSettings, decode_speculative
from specproof.decode.drafters import ModelDrafter, NGramDrafter
from specproof.decode.policies import FixedPolicy
from specproof.decode.sampling import Sampler
from specproof.errors import SpecproofError
from specproof.evidence.calibration import SkipResidualSampler
from specproof.evidence.pit import (pit_one, pit_ordered, pit_rank_values, pit_values, position_roles,
                                    rank_below, ratio_key, score_sequence)
from specproof.models.mock import MockBackend


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
    rng = np.random.default_rng(0)
    p = random_dist(rng, 6)
    wrong = np.roll(p, 1)
    x = rng.choice(6, size=4000, p=wrong)
    u = pit_values(np.tile(p, (4000, 1)), x, rng.random(4000))
    assert stats.kstest(u, "uniform").pvalue < 1e-6


# ---------------------------------------------------------------- ratio order on the real path

@pytest.mark.parametrize("v", [3, 7, 12])
def test_ratio_and_proposal_orders_are_exactly_uniform_under_the_null(v):
    """Any key fixed before x is drawn: q/p (model draft) and proposal-first (n-gram)."""
    rng = np.random.default_rng(v)
    for _ in range(10):
        p, q = random_dist(rng, v), random_dist(rng, v)
        for key in (ratio_key(p, q, None), ratio_key(p, None, int(rng.integers(v)))):
            below = np.array([pit_ordered(p, x, 0.0, key) for x in range(v)])
            for s in np.linspace(0, 1, 21):
                assert pit_cdf(p, below, s) == pytest.approx(s, abs=1e-12)


def test_ratio_key_puts_the_proposal_first_and_bonus_in_rank_order():
    p = np.array([0.5, 0.3, 0.2])
    assert pit_ordered(p, 2, 0.0, ratio_key(p, None, 2)) == 0.0
    assert pit_ordered(p, 0, 0.0, ratio_key(p, None, 2)) == pytest.approx(0.2)
    np.testing.assert_array_equal(ratio_key(p, None, None), p)
    q = np.array([0.1, 0.3, 0.6])
    assert pit_ordered(p, 0, 0.0, ratio_key(p, q, None)) == pytest.approx(0.5)  # q/p = 0.2, 1, 3: token 0 comes last


def test_position_roles_mark_drafted_and_bonus_positions():
    rounds = pd.DataFrame({"round": [1, 0, 2], "drafted": [[7, 8], [4, 5, 6], []],
                           "accepted": [2, 1, 0], "committed": [3, 2, 1]})
    # round 0: 4 accepted, 5 rejected (resampled); round 1: 7, 8 accepted + bonus; round 2: no proposal
    assert position_roles(rounds, 6) == [4, 5, 7, 8, None, None]
    with pytest.raises(SpecproofError, match="run r commits 6 tokens .* holds 5 ids"):
        position_roles(rounds, 5, "r")


def _scored(sampler_cls, n_tokens=1200, drafter="model"):
    """PIT of sampled speculative runs of a mock pair, scored as the pit stage scores them."""
    target = MockBackend(vocab_size=32, seed=5, scale=2.5)
    draft = MockBackend(vocab_size=32, seed=5, scale=2.5, noise=1.2)
    rows, i, rng = [], 0, np.random.default_rng(1)
    while len(rows) < n_tokens:
        prompt = rng.integers(0, 32, size=6).tolist()
        s = DecodeSettings(48, 1.0, 100 + i, stop_at_eos=False)
        d = ModelDrafter(draft, 1.0, 100 + i) if drafter == "model" else NGramDrafter(2)
        r = decode_speculative(target, d, prompt, s, FixedPolicy(4), sampler=sampler_cls(1.0))
        roles = position_roles(r.rounds_frame(), r.new_tokens)
        rows += score_sequence(target, prompt, r.new_ids, 1.0, seed=i,
                               draft=draft if drafter == "model" else None, roles=roles)
        i += 1
    return np.array(rows)


def test_ratio_order_sees_a_skipped_residual_on_the_pit_path_and_accepts_the_sampler():
    good, bad = _scored(Sampler), _scored(SkipResidualSampler)
    assert stats.kstest(good[:, 4], "uniform").pvalue > 1e-3
    assert stats.kstest(bad[:, 4], "uniform").pvalue < 1e-4
    # the same tokens in id order barely move: the ratio column is what sees it
    assert stats.kstest(bad[:, 0], "uniform").pvalue > stats.kstest(bad[:, 4], "uniform").pvalue


def test_ngram_proposal_order_is_uniform_under_the_sampler():
    u = _scored(Sampler, n_tokens=600, drafter="ngram")
    assert stats.kstest(u[:, 4], "uniform").pvalue > 1e-3


def test_without_roles_ratio_equals_rank_order():
    target = MockBackend(vocab_size=16, seed=2, scale=2.0)
    out = np.array(score_sequence(target, [1, 2, 3], [4, 5, 6, 7], 1.0, seed=0))
    np.testing.assert_array_equal(out[:, 4], out[:, 1])
