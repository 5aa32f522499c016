"""Target-only and speculative decoding with identical stop rules.

Cache invariant on both paths: the target's KV cache holds every committed id except
the last one (the *pending* token), so each step feeds the pending token first. The
prompt's last token is the first pending token: prefill feeds prompt[:-1] and is timed
separately from decoding.

One speculative round (propose -> verify -> accept -> commit), as in Leviathan et al.
(2023, Alg. 1) and Chen et al. (2023):
  1. the drafter proposes d_1..d_K with draft distributions q_1..q_K;
  2. the target scores [pending, d_1..d_K] -> p_1..p_{K+1}, either in one call
     (``batched``) or one position per call (``serialized``, exactly as target-only
     decoding scores them; it stops at the first rejection);
  3. accept d_i while u_i < min(1, p_i(d_i)/q_i(d_i)); at the first rejection draw
     from norm(max(0, p_i - q_i)); if all K are accepted draw the bonus from p_{K+1};
  4. commit, roll the target back to the committed prefix, tell the drafter.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .backend import Backend
from .drafters import Drafter, Proposal
from ..errors import ConfigError
from ..limits import check, check_context
from .policies import FixedPolicy, Policy, RoundObservation
from .sampling import Sampler
from .trace import RoundRecord, RunResult

VERIFY_MODES = ("batched", "serialized")
now = time.perf_counter_ns


@dataclass(frozen=True)
class DecodeSettings:
    max_new_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0
    verify_mode: str = "batched"
    stop_at_eos: bool = True

    def validate(self) -> None:
        """The bounds of ``limits`` (the CLI's and the study's); seeds are derived inside
        a study, so any non-negative one is taken here."""
        check("max_new_tokens", self.max_new_tokens, "max_new_tokens")
        check("temperature", self.temperature, "temperature")
        if self.seed < 0:
            raise ConfigError(f"seed: must be >= 0 (got {self.seed})")
        if self.verify_mode not in VERIFY_MODES:
            raise ConfigError(f"verify_mode must be one of {VERIFY_MODES} (got {self.verify_mode!r})")


def target_rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 1])))


class _Stopper:
    """The shared stop rule: max_new_tokens, or EOS (kept as the last emitted id)."""

    def __init__(self, settings: DecodeSettings, eos_ids: frozenset[int]):
        self.budget = settings.max_new_tokens
        self.eos = eos_ids if settings.stop_at_eos else frozenset()
        self.new: list[int] = []
        self.reason = ""

    @property
    def remaining(self) -> int:
        return 0 if self.reason else self.budget - len(self.new)

    def emit(self, tokens: list[int]) -> int:
        """Append tokens until a stop rule fires; returns how many were kept."""
        kept = 0
        for tok in tokens:
            if self.reason:
                break
            self.new.append(tok)
            kept += 1
            if tok in self.eos:
                self.reason = "eos"
            elif len(self.new) >= self.budget:
                self.reason = "max_new_tokens"
        return kept


def _check_prompt(prompt_ids: list[int], settings: DecodeSettings | None = None,
                  *backends: Backend | None) -> None:
    """A prompt to condition on that fits, with ``settings.max_new_tokens``, into every
    backend's context: refused before the run, not when a forward call overflows."""
    if not prompt_ids:
        raise ConfigError("empty prompt: nothing to condition on")
    for b in backends:
        if b is not None and settings is not None:
            check_context(b.label, f"{b.label}'s context", len(prompt_ids),
                          settings.max_new_tokens, b.max_context)


def _prefill(target: Backend, prompt_ids: list[int]) -> None:
    target.reset()
    if len(prompt_ids) > 1:
        target.forward(prompt_ids[:-1], last_only=True)
    target.synchronize()


def decode_target_only(target: Backend, prompt_ids: list[int],
                       settings: DecodeSettings) -> RunResult:
    """Plain autoregressive decoding: one target call per token."""
    settings.validate()
    _check_prompt(prompt_ids, settings, target)
    sampler, rng = Sampler(settings.temperature), target_rng(settings.seed)
    t0 = now()
    _prefill(target, prompt_ids)
    t_start = now()
    stop = _Stopper(settings, target.eos_ids)
    pending, rounds, t_prev = prompt_ids[-1], [], t_start
    while stop.remaining > 0:
        tv0 = now()
        logits = target.forward([pending])[0]
        target.synchronize()
        tv1 = now()
        pending = sampler.sample(logits, rng)
        stop.emit([pending])
        t_end = now()
        rounds.append(RoundRecord.timed(round=len(rounds), drafted=[], accepted=0, committed=1,
                                        replay_tokens=0, verify_positions=1, draft_ns=0,
                                        replay_ns=0, verify_ns=tv1 - tv0, round_ns=t_end - t_prev))
        t_prev = t_end
    return RunResult("target", list(prompt_ids), stop.new, target.decode(stop.new),
                     prefill_ns=t_start - t0, decode_ns=t_prev - t_start, rounds=rounds,
                     stop_reason=stop.reason)


PREDICTORS = ("ub1", "verify_shape")


def predict_greedy(target: Backend, prompt_ids: list[int], max_new_tokens: int, predictor: str,
                   k: int = 4) -> list[int]:
    """Draft-free greedy ids under a stated call shape (endpoint P's predictors; neither
    is the reference path, which prefills in one call and then scores one position per
    call). Same stop rule as greedy decoding (max_new_tokens or EOS).

    - ``ub1``: every target call scores one position, the prompt included (the seed
      study's n_ubatch = 1 predictor);
    - ``verify_shape``: every new token's logits are the last row of one call over the
      last min(k + 1, length) positions, the shape of a fully accepted batched verify
      call at K = k (the cache is rolled back k positions before each call).
    """
    if predictor not in PREDICTORS:
        raise ConfigError(f"predictor must be one of {PREDICTORS} (got {predictor!r})")
    _check_prompt(prompt_ids)
    stop = _Stopper(DecodeSettings(max_new_tokens, 0.0), target.eos_ids)
    seq = list(prompt_ids)
    if predictor == "ub1":
        target.reset()
        for tok in seq[:-1]:
            target.forward([tok], last_only=True)
    else:
        _prefill(target, seq)
    while stop.remaining > 0:
        if predictor == "ub1":
            logits = target.forward([seq[-1]])[0]
        else:
            m = min(k + 1, len(seq))
            target.rollback(len(seq) - m)
            logits = target.forward(seq[-m:])[-1]
        tok = int(np.argmax(logits))
        stop.emit([tok])
        seq.append(tok)
    target.synchronize()
    return stop.new


def _verify_batched(target, pending, prop, sampler, rng):
    """Score [pending, d_1..d_K] in one call; returns (accepted, final token, ns, B)."""
    tv0 = now()
    logits = target.forward([pending] + prop.tokens)
    target.synchronize()
    verify_ns = now() - tv0
    for i, tok in enumerate(prop.tokens):
        q = prop.q[i] if prop.q is not None else None
        ok, out = sampler.verify_token(logits[i], tok, q, rng)
        if not ok:
            return i, out, verify_ns, len(prop.tokens) + 1
    return len(prop.tokens), sampler.sample(logits[-1], rng), verify_ns, len(prop.tokens) + 1


def _verify_serialized(target, pending, prop, sampler, rng):
    """Score one position per call, as target-only decoding does; stop at the first
    rejection (later positions cannot change the outcome)."""
    verify_ns, feed = 0, pending
    for i, tok in enumerate(prop.tokens):
        tv0 = now()
        row = target.forward([feed])[0]
        target.synchronize()
        verify_ns += now() - tv0
        q = prop.q[i] if prop.q is not None else None
        ok, out = sampler.verify_token(row, tok, q, rng)
        if not ok:
            return i, out, verify_ns, i + 1
        feed = tok
    tv0 = now()
    row = target.forward([feed])[0]
    target.synchronize()
    verify_ns += now() - tv0
    return len(prop.tokens), sampler.sample(row, rng), verify_ns, len(prop.tokens) + 1


def decode_speculative(target: Backend, drafter: Drafter, prompt_ids: list[int],
                       settings: DecodeSettings, policy: Policy | None = None,
                       sampler: Sampler | None = None) -> RunResult:
    """Speculative decoding; lossless for any drafter, policy and verify mode (greedy:
    identical ids whenever the verify path's logits equal target-only's).

    ``sampler`` does the accept/reject step and the final draw; the default is
    ``Sampler(settings.temperature)``. The certificate's calibration passes a planted
    violation here to check that the test rejects it."""
    settings.validate()
    _check_prompt(prompt_ids, settings, target, getattr(drafter, "backend", None))
    policy = policy or FixedPolicy(4)
    sampler = sampler or Sampler(settings.temperature)
    rng = target_rng(settings.seed)
    verify = _verify_batched if settings.verify_mode == "batched" else _verify_serialized
    t0 = now()
    _prefill(target, prompt_ids)
    policy.observe_prefill(len(prompt_ids) - 1, now() - t0)
    drafter.start(list(prompt_ids))
    target.synchronize()
    t_start = now()
    stop = _Stopper(settings, target.eos_ids)
    committed_ids = list(prompt_ids)
    rounds, t_prev = [], t_start
    while stop.remaining > 0:
        k = max(0, min(policy.next_k(), stop.remaining - 1))
        td0 = now()
        prop = drafter.propose(committed_ids, k, policy.draft_stop) if k > 0 else Proposal([], None)
        draft_ns = now() - td0
        accepted, final, verify_ns, positions = verify(target, committed_ids[-1], prop, sampler, rng)
        kept = stop.emit(prop.tokens[:accepted] + [final])
        committed_ids.extend((prop.tokens[:accepted] + [final])[:kept])
        target.rollback(min(target.length, len(committed_ids) - 1))
        replay_ns = drafter.commit(committed_ids) if prop.tokens else 0
        t_end = now()
        row = RoundRecord.timed(round=len(rounds), drafted=prop.tokens, accepted=accepted,
                                committed=kept, replay_tokens=prop.replay_tokens,
                                verify_positions=positions, draft_ns=draft_ns,
                                replay_ns=replay_ns, verify_ns=verify_ns, round_ns=t_end - t_prev)
        rounds.append(row)
        policy.observe(RoundObservation(len(prop.tokens), accepted, draft_ns, verify_ns,
                                        positions, row.residual_ns))
        t_prev = t_end
    return RunResult("speculative", list(prompt_ids), stop.new, target.decode(stop.new),
                     prefill_ns=t_start - t0, decode_ns=t_prev - t_start, rounds=rounds,
                     stop_reason=stop.reason)
