"""The rules users of other libraries get, reimplemented as policies: transformers'
heuristic K schedule and assistant confidence threshold, llama.cpp's p_min. Lossless
(greedy ids equal target-only) and each rule's behaviour on scripted inputs."""
import numpy as np
import pytest

from specproof.decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from specproof.decode.drafters import DraftStop, ModelDrafter, NGramDrafter
from specproof.decode.policies import POLICIES, RoundObservation, make_policy
from specproof.decode.sampling import softmax
from specproof.models.mock import MockBackend

PROMPT = [1, 2, 3, 4, 5, 1, 2, 3]
LIBRARY_POLICIES = ["hf_heuristic", "hf_confidence", "llama_pmin"]


@pytest.mark.parametrize("verify_mode", ["batched", "serialized"])
@pytest.mark.parametrize("policy", LIBRARY_POLICIES)
@pytest.mark.parametrize("k", [1, 3, 6])
def test_greedy_ids_equal_target_only(mock_pair, verify_mode, policy, k):
    target, draft = mock_pair
    settings = DecodeSettings(max_new_tokens=48, temperature=0.0, verify_mode=verify_mode)
    ref = decode_target_only(target, PROMPT, settings)
    run = decode_speculative(target, ModelDrafter(draft), PROMPT, settings, make_policy(policy, k))
    assert run.new_ids == ref.new_ids and len(run.new_ids) == 48
    ngram = decode_speculative(target, NGramDrafter(), PROMPT, settings, make_policy(policy, k))
    assert ngram.new_ids == ref.new_ids


def _obs(k, accepted):
    return RoundObservation(k, accepted, 1, 1, k + 1, 0)


def test_hf_heuristic_schedule_over_a_scripted_acceptance_sequence():
    """K + 2 after a fully accepted round, max(1, K - 1) otherwise; a round that drafted
    fewer than K (cut by max_new_tokens) counts as full when all it drafted was accepted."""
    p = make_policy("hf_heuristic", 3)
    script = [(3, 3), (5, 5), (7, 2), (6, 0), (5, 4), (4, 4), (2, 2), (8, 0)]
    seen = []
    for drafted, accepted in script:
        seen.append(p.next_k())
        p.observe(_obs(drafted, accepted))
    seen.append(p.next_k())
    assert seen == [3, 5, 7, 6, 5, 4, 6, 8, 7]
    low = make_policy("hf_heuristic", 2)
    for _ in range(5):
        low.observe(_obs(low.next_k(), 0))
    assert low.next_k() == 1                # never below 1
    low.observe(_obs(0, 0))                 # a target-only step changes nothing
    assert low.next_k() == 1


def _confidences(draft, context, k, top_k):
    """The draft's greedy chain from ``context`` and each step's c_i, from logits_for."""
    ctx, out = list(context), []
    for _ in range(k):
        logits = draft.logits_for(ctx).astype(np.float64)
        tok = int(np.argmax(logits))
        if top_k is None:
            c = softmax(logits, 1.0)[tok]
        else:
            top = np.sort(logits)[-top_k:]
            c = 1.0 / np.exp(top - logits[tok]).sum()
        out.append((tok, c))
        ctx.append(tok)
    return out


def _first_prompt_with_a_stop(draft, threshold, top_k, k=8):
    """A context whose greedy draft chain falls below ``threshold`` at a step > 0."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        ctx = rng.integers(0, draft.vocab_size, size=6).tolist()
        chain = _confidences(draft, ctx, k, top_k)
        below = [i for i, (_, c) in enumerate(chain) if c < threshold]
        if below and 0 < below[0] < k - 1:
            return ctx, chain, below[0]
    raise AssertionError("no scripted context found")


def test_hf_confidence_keeps_the_token_below_the_threshold_and_stops_after_it():
    draft = MockBackend(vocab_size=50, seed=3, scale=2.0, noise=1.5)
    policy = make_policy("hf_confidence", 8)
    assert policy.draft_stop.threshold == 0.4
    ctx, chain, first = _first_prompt_with_a_stop(draft, 0.4, None)
    drafter = ModelDrafter(draft)
    drafter.start(ctx)
    prop = drafter.propose(ctx, 8, policy.draft_stop)
    assert prop.tokens == [tok for tok, _ in chain[:first + 1]]
    assert chain[first][1] < 0.4 <= min(c for _, c in chain[:first])


def test_llama_pmin_drops_the_token_below_p_min_over_the_top_10():
    draft = MockBackend(vocab_size=50, seed=3, scale=2.0, noise=1.5)
    policy = make_policy("llama_pmin", 8)
    assert policy.draft_stop.threshold == 0.75 and policy.draft_stop.top_k == 10
    ctx, chain, first = _first_prompt_with_a_stop(draft, 0.75, 10)
    drafter = ModelDrafter(draft)
    drafter.start(ctx)
    prop = drafter.propose(ctx, 8, policy.draft_stop)
    assert prop.tokens == [tok for tok, _ in chain[:first]]
    # the dropped token was never fed: after committing, the draft's cache holds every
    # committed id but the pending one, as after a round without a stop
    drafter.commit(ctx + prop.tokens)
    assert drafter.backend.length == len(ctx) + len(prop.tokens) - 1


def test_top_10_probability_ignores_the_tail_of_the_vocabulary():
    logits = np.full(40, -1e9)
    logits[:10] = np.log([4, 1, 1, 1, 1, 1, 1, 1, 1, 1])  # top-10 softmax: 4/13 for token 0
    logits[10:] = np.log(0.9)                             # just below the 10th: filtered out
    stop = DraftStop(0.3, top_k=10, keep_below=False)
    assert stop.confidence(logits, 0, None) == pytest.approx(4 / 13)
    assert stop.confidence(logits, 20, None) == 0.0       # not in the top 10
    full = DraftStop(0.3)
    assert full.confidence(logits, 0, None) == pytest.approx(4 / (13 + 30 * 0.9))


def test_a_first_draft_token_below_p_min_makes_a_target_only_step(mock_pair):
    target, draft = mock_pair
    settings = DecodeSettings(max_new_tokens=24)
    policy = make_policy("llama_pmin", 4)
    policy.draft_stop = DraftStop(1.01, top_k=10, keep_below=False)  # nothing is confident enough
    run = decode_speculative(target, ModelDrafter(draft), PROMPT, settings, policy)
    assert all(r.drafted == [] and r.committed == 1 for r in run.rounds)
    assert run.new_ids == decode_target_only(target, PROMPT, settings).new_ids


def test_without_a_draft_stop_proposals_are_unchanged(mock_pair):
    _, draft = mock_pair
    a, b = ModelDrafter(draft), ModelDrafter(MockBackend(vocab_size=50, seed=3, scale=4.0, noise=1.5))
    a.start(PROMPT)
    b.start(PROMPT)
    assert a.propose(PROMPT, 6).tokens == b.propose(PROMPT, 6, DraftStop(0.0)).tokens
    assert make_policy("fixed", 6).draft_stop is None
    assert make_policy("adaptive", 6).draft_stop is None


def test_every_listed_policy_is_made_and_reports_its_name():
    for name in POLICIES:
        assert make_policy(name, 4).describe()["policy"] == name
