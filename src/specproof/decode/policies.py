"""Speculation-length policies: how many tokens to draft in the next round (0 = a
target-only step).

Cost model (per round, ms): T(K) = K * c_draft + v(K + 1) + x, with c_draft the draft
cost per drafted token, v(B) the target's cost to verify B positions in one round and
x the residual (sampling, bookkeeping). Expected committed tokens per round, with
alpha_i the acceptance probability at draft position i given positions < i accepted:

    E[C | K] = 1 + sum_{j=1..K} prod_{i=1..j} alpha_i      (the +1 is the correction/bonus)

Expected throughput: E[C | K] / T(K) tokens/ms; target-only throughput 1 / t_target.

Besides our own policies (fixed, adaptive, guard), three reimplement the rules users of
other libraries get, so the study can compare against them in one loop:
``hf_heuristic`` (transformers' num_assistant_tokens_schedule="heuristic"),
``hf_confidence`` (transformers' assistant_confidence_threshold) and ``llama_pmin``
(llama.cpp's draft p_min). ``POLICIES`` is the one list of legal names: the CLI's
--policy choices and the study schema's policy enum are read from it.
"""
from __future__ import annotations

import statistics
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass

import numpy as np

from .costmodel import expected_committed
from .drafters import DraftStop


@dataclass
class RoundObservation:
    k: int                 # tokens drafted (0 for a target-only step)
    accepted: int          # drafted tokens accepted
    draft_ns: int
    verify_ns: int         # target time for this round
    verify_positions: int  # B: positions the target scored
    residual_ns: int


class Policy(ABC):
    """``draft_stop``: a confidence rule the drafter applies within a round (see
    ``drafters.DraftStop``); None for policies that only choose K."""

    name = "policy"
    draft_stop: DraftStop | None = None

    @abstractmethod
    def next_k(self) -> int: ...

    def observe_prefill(self, positions: int, ns: int) -> None:
        """The target's prefill: one call over ``positions`` prompt positions, ``ns`` long."""

    def observe(self, obs: RoundObservation) -> None:
        """Learn from a finished round."""

    def describe(self) -> dict:
        return {"policy": self.name}


class FixedPolicy(Policy):
    name = "fixed"

    def __init__(self, k: int):
        self.k = int(k)

    def next_k(self) -> int:
        return self.k

    def describe(self) -> dict:
        return {"policy": self.name, "k": self.k}


class CostModel:
    """Online estimates of alpha_i, c_draft, v(B), x and t_target: v(B) is the median of
    the last ``window`` rounds that verified B positions (this machine's timings have
    one-off spikes of 2x, which an average carries for many rounds), the rest are
    exponential moving averages with weight ``ema``; alpha_i is shrunk towards the pooled
    acceptance rate, whose prior is Beta(prior_accept, prior_reject) (see ``alpha``)."""

    def __init__(self, k_max: int, ema: float = 0.2, prior_accept: float = 4.0,
                 prior_reject: float = 1.0, window: int = 5, shrink: float = 2.0):
        self.k_max = k_max
        self.ema = ema
        self.window = window
        self._verify_obs: dict[int, deque] = {}
        self._verify_median: dict[int, float] = {}  # per B, of _verify_obs[B]
        self.reached = np.zeros(k_max + 1)
        self.accepted = np.zeros(k_max + 1)
        self.prior = (prior_accept, prior_reject)
        self.shrink = shrink
        self.draft_ns_per_token: float | None = None
        self.residual_ns: float = 0.0
        self.target_step_ns: float | None = None
        self._target_steps: deque = deque(maxlen=window)  # the last target-only steps (ns)
        self._median_costs: np.ndarray | None = None  # T(K) from medians, until the next round

    def _avg(self, old: float | None, new: float) -> float:
        return new if old is None else (1 - self.ema) * old + self.ema * new

    def update(self, obs: RoundObservation) -> None:
        self._median_costs = None
        b = obs.verify_positions
        if b > 0:
            window = self._verify_obs.setdefault(b, deque(maxlen=self.window))
            window.append(obs.verify_ns)
            self._verify_median[b] = statistics.median(window)
        if obs.k == 0:
            self.target_step_ns = self._avg(self.target_step_ns, obs.verify_ns + obs.residual_ns)
            self._target_steps.append(obs.verify_ns + obs.residual_ns)
            return
        self.residual_ns = self._avg(self.residual_ns or None, obs.residual_ns)
        self.draft_ns_per_token = self._avg(self.draft_ns_per_token, obs.draft_ns / obs.k)
        reached = min(obs.k, obs.accepted + 1)
        self.reached[1:reached + 1] += 1
        self.accepted[1:obs.accepted + 1] += 1

    def verify_sizes(self) -> int:
        """How many distinct B the target's calls have been timed at (rounds and steps)."""
        return len(self._verify_obs)

    def pooled_alpha(self) -> float:
        """abar = (sum accepted + a) / (sum reached + a + b) over every position."""
        a, b = self.prior
        return float((self.accepted[1:].sum() + a) / (self.reached[1:].sum() + a + b))

    def alpha(self, optimistic_beyond: int | None = None) -> np.ndarray:
        """alpha_i = (accepted_i + m abar) / (reached_i + m): each position shrunk towards
        the pooled rate abar (``pooled_alpha``), so a position seen once (one rejection at
        depth 5 in a long first round) does not pin K low for the rest of the run;
        positions never reached get abar. ``optimistic_beyond`` = K: positions after K
        get at least abar, as if not seen yet."""
        pooled = self.pooled_alpha()
        alpha = (self.accepted[1:] + self.shrink * pooled) / (self.reached[1:] + self.shrink)
        if optimistic_beyond is not None:
            alpha[optimistic_beyond:] = np.maximum(alpha[optimistic_beyond:], pooled)
        return alpha

    def round_costs(self, fastest: bool = False) -> np.ndarray | None:
        """T(K) = K c_draft + v(K+1) + x (ns) for K = 1..k_max; None until both a draft
        and a verify cost are measured. v(B) is the recent median at a measured B
        (``fastest``: the fastest recent round), else the least-squares line through
        the measured B (slope >= 0, flat through one point), never below the cheapest."""
        if not self._verify_obs or self.draft_ns_per_token is None:
            return None
        if not fastest and self._median_costs is not None:
            return self._median_costs
        points = {b: min(v) for b, v in self._verify_obs.items()} if fastest else self._verify_median
        bs = np.fromiter(points, dtype=float)
        vs = np.fromiter(points.values(), dtype=float)
        slope = 0.0
        if bs.size > 1:
            db = bs - bs.mean()
            slope = max(float((db * (vs - vs.mean())).sum() / (db * db).sum()), 0.0)
        icpt = vs.mean() - slope * bs.mean()
        ks = np.arange(1, self.k_max + 1)
        v = np.array([points.get(k + 1, max(icpt + slope * (k + 1), vs.min())) for k in ks])
        costs = ks * self.draft_ns_per_token + v + self.residual_ns
        if not fastest:
            self._median_costs = costs
        return costs

    def best_k(self, optimistic_beyond: int | None = None) -> tuple[int, float | None]:
        """argmax_K E[C|K] / T(K) over 1..k_max, with its throughput (tokens/ns);
        ``optimistic_beyond``: see ``alpha``."""
        costs = self.round_costs()
        if costs is None:
            return self.k_max, None
        alpha = self.alpha(optimistic_beyond)
        rates = [expected_committed(alpha, k) / costs[k - 1] for k in range(1, self.k_max + 1)]
        best = int(np.argmax(rates))
        return best + 1, float(rates[best])

    def predicted_speedup(self) -> float | None:
        """S = rate(K*) * t_target: > 1 means speculation is predicted to pay off."""
        _, rate = self.best_k()
        if rate is None or self.target_step_ns is None:
            return None
        return rate * self.target_step_ns

    def speedup_ceiling(self) -> float | None:
        """max_K (K + 1) t_target / T(K): the speedup if every drafted token were
        accepted. Below 1, no acceptance rate can make speculation pay on this pair
        (the verify cost grows too fast with B, or drafting costs too much). T(K) uses
        the fastest recent round per B: a timing spike only slows a round, so this errs
        towards speculating rather than switching a good pair off on one slow call.
        t_target is the median of the recent target-only steps: a spike there would
        inflate the numerator, erring towards speculating on a pair that cannot pay."""
        costs = self.round_costs(fastest=True)
        if costs is None or not self._target_steps:
            return None
        t = statistics.median(self._target_steps)
        return float(((np.arange(1, self.k_max + 1) + 1) * t / costs).max())


class AdaptivePolicy(Policy):
    """Choose K* = argmax_K E[C|K] / T(K) after every round; every ``explore_every``
    rounds try K* +/- 1 so v(B) is measured around the optimum. ``make_policy`` starts
    at K_max: one long first round observes acceptance at every position it reaches,
    where a short start never sees the deep positions that decide whether long rounds pay.

    After a round that accepted all K < K_max drafts, the next round drafts at least
    K + 1 if the model would choose more than K were the positions after K as good as
    the pooled rate: a fully accepted round never reaches position K + 1, so one early
    rejection there would otherwise keep alpha_(K+1) low, and K* below it, for the rest
    of a short run (seen on the torch fp32 + Q4_1 pair: one rejection at position 15 of
    the first round held K at 14 for every later round, fully accepted each time). Where
    even that optimistic model stays at K or below, the costs hold K down, not the
    unseen positions, and stepping up anyway climbs K round by round on a well-accepted
    pair that verification makes expensive (seen on the Qwen pair on a CPU: 1, 2, ... 7).

    While the rounds have measured v(B) at one B only, the next round is a K = 1 probe:
    one point fits v(B) flat in B, which makes long rounds look free (seen on the Qwen
    pair on a CPU: K = 8 for whole runs where K = 1 was the best fixed K); v(2) and
    v(K_max + 1) interpolate it over the whole range."""

    name = "adaptive"

    def __init__(self, k_max: int = 8, k_start: int = 4, explore_every: int = 8):
        self.model = CostModel(k_max)
        self.k = min(k_start, k_max)
        self.explore_every = explore_every
        self.rounds = 0

    def next_k(self) -> int:
        return self.k

    def observe(self, obs: RoundObservation) -> None:
        self.model.update(obs)
        k_best, rate = self.model.best_k()
        if obs.k == 0:  # a target-only step: new v(1) and t_target, no exploration
            if rate is not None:
                self.k = k_best
            return
        self.rounds += 1
        if self.explore_every and self.rounds % self.explore_every == 0:
            step = 1 if (self.rounds // self.explore_every) % 2 else -1
            k_best = int(np.clip(k_best + step, 1, self.model.k_max))
        if obs.accepted == obs.k < self.model.k_max and self.model.best_k(optimistic_beyond=obs.k)[0] > obs.k:
            k_best = max(k_best, obs.k + 1)
        if self.model.verify_sizes() == 1 and obs.verify_positions > 2:
            k_best = 1  # probe v(2): one verify size says nothing of the slope of v(B)
        self.k = k_best

    def describe(self) -> dict:
        return {"policy": self.name, "k_max": self.model.k_max}


class GuardPolicy(Policy):
    """Never much slower than target-only.

    The run opens with K = 1 probes (the cheapest speculation: one draft step, v(2))
    and ``target_steps`` target-only steps (t_target, their median: one step after the
    draft's first call can be slow, and a slow t_target reads as a pair that pays). If
    the ceiling max_K (K+1) t_target / T(K) (every draft accepted; T from the fastest
    round per B) is at least 1, the adaptive policy runs (from its K_start) while its
    predicted speedup S = rate(K*) t_target is >= 1; when S < 1 it takes target-only
    steps and probes again after ``probe_interval`` tokens, doubling the interval after
    every failed probe (up to ``max_interval``). If the ceiling is below 1, speculation
    cannot pay on this pair and stays off for the rest of the run.

    A timing spike in a lone v(2) would also read as a ceiling below 1, so a second
    probe follows the first (the ceiling takes the faster) unless the prefill already
    showed serial verification: its cost per position, over at least ``min_prefill``
    positions, was at least ``serial_ratio`` x the probe's v(2) per position (batching
    bought less than 1/serial_ratio x, as on a llama.cpp target with n_ubatch=1). A spike
    cannot fake that in both calls: a slow v(2) makes the prefill look batched. The
    second probe comes straight after the first: taken after the target-only steps, its
    draft call first had to catch up on every token they committed (a batched draft
    call, costly on a steep v(B)); straight after, it feeds two."""

    name = "guard"

    def __init__(self, k_max: int = 8, k_start: int = 8, max_probes: int = 2,
                 probe_interval: int = 16, max_interval: int = 256,
                 serial_ratio: float = 0.5, min_prefill: int = 8, target_steps: int = 3):
        self.inner = AdaptivePolicy(k_max=k_max, k_start=k_start)
        self.opening = [1] + [0] * target_steps  # K of the rounds before the verdict
        self.probes_left = max_probes - 1
        self.serial_ratio, self.min_prefill = serial_ratio, min_prefill
        self.prefill_ns_per_position: float | None = None
        self.base_interval = probe_interval
        self.interval = probe_interval
        self.max_interval = max_interval
        self.target_steps_left = 0
        self.disabled = False

    @property
    def model(self) -> CostModel:
        return self.inner.model

    def next_k(self) -> int:
        if self.disabled:
            return 0
        if self.opening:
            return self.opening[0]
        return 0 if self.target_steps_left > 0 else self.inner.next_k()

    def observe_prefill(self, positions: int, ns: int) -> None:
        if positions >= self.min_prefill:
            self.prefill_ns_per_position = ns / positions

    def _prefill_was_serial(self, probe: RoundObservation) -> bool:
        per_position = probe.verify_ns / probe.verify_positions
        return (self.prefill_ns_per_position is not None
                and self.prefill_ns_per_position >= self.serial_ratio * per_position)

    def _ceiling_below_one(self) -> bool:
        ceiling = self.model.speedup_ceiling()
        return ceiling is not None and ceiling < 1.0

    def _open(self, obs: RoundObservation) -> None:
        """One opening round: measure it, queue a second probe straight after the first
        unless the prefill was serial, and give the verdict after the last."""
        self.model.update(obs)
        self.opening.pop(0)
        if obs.k > 0 and self.probes_left > 0 and not self._prefill_was_serial(obs):
            self.probes_left -= 1
            self.opening.insert(0, 1)
        if not self.opening:
            self.disabled = self._ceiling_below_one()

    def observe(self, obs: RoundObservation) -> None:
        if self.disabled:
            return
        if self.opening:  # measure only: the inner policy keeps its K_start
            self._open(obs)
            return
        self.inner.observe(obs)
        if obs.k == 0:
            self.target_steps_left = max(self.target_steps_left - 1, 0)
            self.disabled = self._ceiling_below_one()
            return
        s = self.model.predicted_speedup()
        if s is not None and s < 1.0:
            self.target_steps_left = self.interval
            self.interval = min(2 * self.interval, self.max_interval)
        else:
            self.interval = self.base_interval

    def describe(self) -> dict:
        return {"policy": self.name, "k_max": self.model.k_max,
                "probe_interval": self.base_interval}


class HFHeuristicPolicy(Policy):
    """Reimplements transformers' ``num_assistant_tokens_schedule="heuristic"``
    (generation/candidate_generator.py, ``update_candidate_strategy``; checked against
    transformers 5.23): K starts at ``k_start`` (transformers: num_assistant_tokens)
    and after every round that drafted K_r >= 1 tokens

        K <- K + 2          if all K_r drafted tokens were accepted,
        K <- max(1, K - 1)  otherwise.

    No upper bound, as in transformers (the loop still never drafts past
    max_new_tokens). The state lives for one run, i.e. transformers'
    "heuristic_transient"; its "heuristic" carries K over to the next generate call,
    which would make our runs depend on each other."""

    name = "hf_heuristic"

    def __init__(self, k_start: int):
        self.k_start = self.k = int(k_start)

    def next_k(self) -> int:
        return self.k

    def observe(self, obs: RoundObservation) -> None:
        if obs.k == 0:
            return
        self.k = self.k + 2 if obs.accepted == obs.k else max(1, self.k - 1)

    def describe(self) -> dict:
        return {"policy": self.name, "k_start": self.k_start}


class HFConfidencePolicy(FixedPolicy):
    """Reimplements transformers' ``assistant_confidence_threshold``
    (generation/stopping_criteria.py, ``ConfidenceCriteria``): up to K tokens per
    round, but the round ends after draft token d_i when q_i(d_i) < ``threshold``
    (0.4, transformers' default), q_i the draft's distribution at step i
    (softmax of its logits; of logits / T when it samples). The token that fell below
    is still proposed: transformers' stopping criterion runs after the token is
    generated. transformers also refits the threshold from an ROC curve of past draft
    probabilities when scikit-learn is installed (cost fpr + 3 fnr); without it the
    threshold stays fixed, which is what this policy reproduces. transformers' own
    default K with this threshold is num_assistant_tokens = 20, schedule "constant"."""

    name = "hf_confidence"

    def __init__(self, k: int, threshold: float = 0.4):
        super().__init__(k)
        self.draft_stop = DraftStop(threshold, top_k=None, keep_below=True)

    def describe(self) -> dict:
        return {"policy": self.name, "k": self.k, "threshold": self.draft_stop.threshold}


class LlamaPMinPolicy(FixedPolicy):
    """Reimplements llama.cpp's draft ``p_min`` (common/speculative.cpp, the draft
    loop of ``common_speculative_gen_draft`` / draft-simple): up to K tokens
    (``--spec-draft-n-max``) per round; at draft step i the draft's candidates pass a
    top-10 filter at T = 1 and the round ends *before* d_i when its probability
    p_i = exp(l_i(d_i)) / sum over the 10 largest logits of exp(l_j) is below
    ``p_min``: that token is not proposed (an empty proposal is a target-only step).

    p_min = 0.75: llama.cpp's default in common.h / common/speculative.h for most of
    its history (0.9 in the first speculative-simple) and the value the server
    documents. The llama.cpp vendored by llama-cpp-python 0.3.36 ships p_min = 0.0,
    which never stops a round; pass ``p_min=0.0`` for that (it equals ``fixed``)."""

    name = "llama_pmin"

    def __init__(self, k: int, p_min: float = 0.75):
        super().__init__(k)
        self.draft_stop = DraftStop(p_min, top_k=10, keep_below=False)

    def describe(self) -> dict:
        return {"policy": self.name, "k": self.k, "p_min": self.draft_stop.threshold}


POLICIES = ("fixed", "adaptive", "guard", "hf_heuristic", "hf_confidence", "llama_pmin")


def make_policy(name: str, k: int) -> Policy:
    """``fixed``, ``hf_confidence`` and ``llama_pmin`` draft at most K per round;
    ``adaptive`` and ``guard`` search 1..K; ``hf_heuristic`` starts at K."""
    from ..errors import ConfigError
    from ..limits import check
    check("k", k, "K")
    factories = {"fixed": FixedPolicy, "hf_heuristic": HFHeuristicPolicy,
                 "hf_confidence": HFConfidencePolicy, "llama_pmin": LlamaPMinPolicy,
                 "adaptive": lambda k: AdaptivePolicy(k_max=k, k_start=k),
                 "guard": lambda k: GuardPolicy(k_max=k, k_start=k)}
    if name not in factories:
        raise ConfigError(f"unknown policy {name!r}: choose one of {', '.join(POLICIES)}")
    return factories[name](k)
