"""Level 2: mock target and draft; greedy ids equal target-only for every K, policy and
verify mode; sampled runs are bit-reproducible from the seed; the trace adds up."""
import numpy as np
import pytest

from specproof.models.mock import MockBackend
from specproof.decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from specproof.decode.drafters import ModelDrafter, NGramDrafter
from specproof.errors import ConfigError
from specproof.decode.policies import make_policy

PROMPT = [1, 2, 3, 4, 5, 1, 2, 3]


@pytest.mark.parametrize("verify_mode", ["batched", "serialized"])
@pytest.mark.parametrize("policy", ["fixed", "adaptive", "guard"])
@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_greedy_speculative_equals_target_only(mock_pair, verify_mode, policy, k):
    target, draft = mock_pair
    settings = DecodeSettings(max_new_tokens=48, temperature=0.0, verify_mode=verify_mode)
    ref = decode_target_only(target, PROMPT, settings)
    run = decode_speculative(target, ModelDrafter(draft), PROMPT, settings, make_policy(policy, k))
    assert run.new_ids == ref.new_ids
    assert len(run.new_ids) == 48
    ngram = decode_speculative(target, NGramDrafter(), PROMPT, settings, make_policy(policy, k))
    assert ngram.new_ids == ref.new_ids


@pytest.mark.parametrize("verify_mode", ["batched", "serialized"])
def test_sampled_runs_bit_identical_for_one_seed(mock_pair, verify_mode):
    target, draft = mock_pair
    s = DecodeSettings(max_new_tokens=40, temperature=1.0, seed=11, verify_mode=verify_mode)
    a = decode_speculative(target, ModelDrafter(draft, 1.0, seed=11), PROMPT, s, make_policy("fixed", 4))
    b = decode_speculative(target, ModelDrafter(draft, 1.0, seed=11), PROMPT, s, make_policy("fixed", 4))
    assert a.new_ids == b.new_ids
    assert [r.drafted for r in a.rounds] == [r.drafted for r in b.rounds]
    c = decode_speculative(target, ModelDrafter(draft, 1.0, seed=12), PROMPT,
                           DecodeSettings(40, 1.0, 12, verify_mode), make_policy("fixed", 4))
    assert c.new_ids != a.new_ids
    t1 = decode_target_only(target, PROMPT, s)
    t2 = decode_target_only(target, PROMPT, s)
    assert t1.new_ids == t2.new_ids


def test_batched_and_serialized_agree_when_sampled_on_batch_invariant_backend(mock_pair):
    target, draft = mock_pair
    runs = [decode_speculative(target, ModelDrafter(draft, 1.0, seed=4), PROMPT,
                               DecodeSettings(40, 1.0, 4, mode), make_policy("fixed", 3))
            for mode in ("batched", "serialized")]
    assert runs[0].new_ids == runs[1].new_ids


def test_trace_parts_sum_to_wall_time_and_committed_is_accepted_plus_one(mock_pair):
    target, draft = mock_pair
    target.latency_ms, draft.latency_ms = 0.5, 0.2
    run = decode_speculative(target, ModelDrafter(draft), PROMPT,
                             DecodeSettings(max_new_tokens=60), make_policy("fixed", 4))
    df = run.rounds_frame()
    assert df["round_ns"].sum() == run.decode_ns  # rounds tile the decode time
    # X is the remainder of each round, so D + R + X = round by construction; what can fail
    # is a timing boundary in the wrong place, which would make X negative
    assert (df[["draft_ns", "verify_ns", "replay_ns", "residual_ns"]] >= 0).all().all()
    full = df.iloc[:-1]  # the last round may be cut by max_new_tokens
    assert (full["committed"] == full["accepted"] + 1).all()
    assert df["committed"].sum() == 60
    assert (df["draft_ns"] > 0).all() and (df["verify_ns"] > 0).all()
    alpha = run.acceptance_by_position(4)
    assert len(alpha) == 4 and all(0 <= a <= 1 for a in alpha if a == a)


def test_eos_stops_both_paths_at_the_same_token():
    target = MockBackend(vocab_size=30, seed=9, scale=2.0)
    ref0 = decode_target_only(target, PROMPT, DecodeSettings(max_new_tokens=40))
    eos = ref0.new_ids[12]
    first = ref0.new_ids.index(eos)
    target.eos_id = eos
    draft = MockBackend(vocab_size=30, seed=9, scale=2.0, noise=0.5, eos_id=eos)
    ref = decode_target_only(target, PROMPT, DecodeSettings(max_new_tokens=40))
    run = decode_speculative(target, ModelDrafter(draft), PROMPT, DecodeSettings(max_new_tokens=40),
                             make_policy("fixed", 5))
    assert ref.new_ids == run.new_ids == ref0.new_ids[:first + 1]
    assert ref.stop_reason == run.stop_reason == "eos"


def test_rollback_refeeds_recompute(mock_pair):
    target, _ = mock_pair
    target.reset()
    a = target.forward([1, 2, 3, 4, 5])
    target.rollback(2)
    b = target.forward([3, 9])
    np.testing.assert_array_equal(a[2], b[0])
    assert target.length == 4
    with pytest.raises(ValueError):
        target.rollback(9)


@pytest.mark.parametrize("bad", [dict(max_new_tokens=0), dict(temperature=-1.0),
                                 dict(verify_mode="tree")])
def test_bad_settings_raise_config_error(mock_pair, bad):
    target, draft = mock_pair
    with pytest.raises(ConfigError):
        decode_speculative(target, ModelDrafter(draft), PROMPT, DecodeSettings(**bad))


def test_k_below_one_and_empty_prompt_are_refused(mock_pair):
    target, draft = mock_pair
    with pytest.raises(ConfigError, match="K: must be an integer from 1 to 64"):
        make_policy("fixed", 0)
    with pytest.raises(ConfigError, match="empty prompt"):
        decode_target_only(target, [], DecodeSettings())
    with pytest.raises(ConfigError, match="unknown policy"):
        make_policy("greedy", 3)


def test_ngram_drafter_proposes_the_continuation_of_the_last_match():
    d = NGramDrafter(max_ngram=3)
    assert d.propose([7, 8, 9, 5, 6, 7, 8], 3).tokens == [9, 5, 6]
    assert d.propose([1, 2, 3], 3).tokens == []
    assert d.propose([4, 4], 2).tokens == [4]


def _round(k, accepted, draft_ms, verify_ms, positions):
    from specproof.decode.policies import RoundObservation
    return RoundObservation(k, accepted, int(draft_ms * 1e6), int(verify_ms * 1e6), positions, 0)


def _opening_steps(g, ms=23.0, steps=3):
    """The guard's opening target-only steps, all ``ms`` long."""
    for _ in range(steps):
        assert g.next_k() == 0
        g.observe(_round(0, 0, 0, ms, 1))


def _stays_target_only(g, rounds=300):
    for _ in range(rounds):
        assert g.next_k() == 0
        g.observe(_round(0, 0, 0, 23, 1))


def _probes(g, *rounds):
    """The guard's opening K = 1 probes, observed as given."""
    for r in rounds:
        assert g.next_k() == 1
        g.observe(r)


def test_guard_turns_speculation_off_when_even_full_acceptance_cannot_pay():
    """Verify cost linear in B (llama.cpp n_ubatch=1), and the prefill cost 23 ms per
    position as well: one K=1 probe and the target steps settle it, and the guard stays
    target-only for good."""
    g = make_policy("guard", 8)
    g.observe_prefill(30, int(30 * 23e6))
    _probes(g, _round(1, 1, 13, 46, 2))     # every draft accepted, v(2) = 2 v(1)
    _opening_steps(g)                       # target steps: v(1) = t_target = 23 ms
    assert g.model.speedup_ceiling() < 1
    _stays_target_only(g)


def test_guard_takes_a_second_probe_straight_after_the_first_when_the_prefill_cannot_tell():
    """A short prompt says nothing about batching: the verdict needs the faster of two
    probes. After the target steps the second probe's draft call would first catch up on
    every token they committed; straight after the first it feeds only two."""
    g = make_policy("guard", 8)
    g.observe_prefill(3, int(3 * 23e6))
    _probes(g, _round(1, 1, 13, 46, 2), _round(1, 1, 13, 46, 2))  # back to back
    _opening_steps(g)
    _stays_target_only(g)


@pytest.mark.parametrize("prefill_positions", [0, 30])
@pytest.mark.parametrize("spiked", [0, 1])
def test_guard_keeps_speculating_from_k_max_when_verification_is_nearly_flat_in_b(prefill_positions, spiked):
    """A probe hit by a 3x timing spike, the first or the second, must not switch off a
    pair that pays off, whether or not the prefill (here cheap per position: batched) was
    seen: the ceiling takes the faster of the two."""
    g = make_policy("guard", 8)
    g.observe_prefill(prefill_positions, int(prefill_positions * 4e6))
    probes = [_round(1, 1, 5, 47, 2), _round(1, 1, 5, 47, 2)]  # cheap draft, v(2) ~ v(1)
    probes[spiked] = _round(1, 1, 5, 150, 2)
    _probes(g, *probes)
    _opening_steps(g, 45)
    assert g.model.speedup_ceiling() > 1
    assert g.next_k() == 8                  # the adaptive policy starts at K_max
    g.observe(_round(8, 8, 40, 80, 9))
    assert g.next_k() >= 1


def test_guard_switches_off_when_both_probes_show_a_ceiling_below_one():
    """Two slow probes are no spike: the verdict stands."""
    g = make_policy("guard", 8)
    _probes(g, _round(1, 1, 5, 150, 2), _round(1, 1, 5, 140, 2))
    _opening_steps(g, 45)
    _stays_target_only(g)


def test_a_slow_first_target_step_does_not_switch_speculation_on_for_a_serial_target():
    """Seen on llama.cpp F16 with n_ubatch=1: the first target step after the draft's
    first call took 1.6x the others. Read alone as t_target it puts the full-acceptance
    ceiling above 1 and the guard into a K = 8 round of serial verification; the median
    of the opening's target steps does not."""
    g = make_policy("guard", 8)
    g.observe_prefill(30, int(30 * 12e6))   # serial prefill: 12 ms per position
    _probes(g, _round(1, 1, 12, 24, 2))     # K = 1 probe, v(2) = 2 v(1)
    for ms in (19, 12, 12):                 # one slow step, then the usual ones
        assert g.next_k() == 0
        g.observe(_round(0, 0, 0, ms, 1))
    assert g.model.speedup_ceiling() < 1
    _stays_target_only(g)


def test_adaptive_reaches_past_a_fully_accepted_k_after_one_early_rejection():
    """A first round at K_max = 16 rejected at position 15; every later round at the K
    the model then chose was fully accepted. Rounds that never reach position K + 1
    cannot raise alpha_(K+1): without trying K + 1 the policy stays below it for good."""
    a = make_policy("adaptive", 16)
    assert a.next_k() == 16
    a.observe(_round(16, 14, 160, 92, 17))  # draft 10 ms per token, verify 60 + 2B ms
    seen = []
    for _ in range(12):
        k = a.next_k()
        seen.append(k)
        a.observe(_round(k, k, 10 * k, 60 + 2 * (k + 1), k + 1))
    assert seen[0] == 1                     # the v(2) probe: the opening round timed one size
    assert 16 in seen[:10], seen            # without the step up: never above 14
    assert min(seen[seen.index(16):]) >= 15, seen  # then K_max, but for an exploring step down


def _adaptive_ks(verify_ms, draft_ms: float = 25.0, rounds: int = 8) -> list[int]:
    """K of each round of an adaptive policy (K_max = 8) whose every draft is accepted,
    the target taking ``verify_ms(B)`` to verify B positions."""
    a = make_policy("adaptive", 8)
    seen = []
    for _ in range(rounds):
        k = a.next_k()
        seen.append(k)
        a.observe(_round(k, k, draft_ms * k, verify_ms(k + 1), k + 1))
    return seen


def test_adaptive_probes_v2_and_settles_short_when_verification_is_serial():
    """Seen on the Qwen pair on a CPU: v(B) nearly B v(1), every draft accepted. One
    verify size fits v(B) flat and kept K = 8 for whole runs, and stepping up after
    every fully accepted round climbed K again; the K = 1 probe measures the slope and
    the policy stays at the short K the cost model prefers."""
    seen = _adaptive_ks(lambda b: 50.0 * b)
    assert seen[:2] == [8, 1]               # the opening round, then the v(2) probe
    assert max(seen[2:]) <= 2, seen          # (K+1)/(75K+50) peaks at K = 1


def test_adaptive_keeps_long_rounds_when_verification_is_nearly_flat_in_b():
    seen = _adaptive_ks(lambda b: 60.0 + 2 * b, draft_ms=5.0)
    assert seen[:2] == [8, 1]
    assert min(seen[2:]) >= 7, seen         # after the probe the model goes back to long rounds
