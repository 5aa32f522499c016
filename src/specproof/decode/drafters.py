"""Drafters: propose up to K tokens and their draft distributions q.

One narrow interface (as in transformers' candidate generators): ``propose`` and
``commit``. A model drafter runs any backend; the n-gram drafter (prompt lookup)
needs no model and proposes deterministically (q one-hot, returned as None).

``propose`` takes an optional ``DraftStop``: a confidence rule a policy hands in to end
a round before K tokens (transformers' assistant confidence threshold, llama.cpp's
p_min). Without one (the default) the drafter computes nothing extra.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from .backend import Backend
from .sampling import softmax, sample_from


@dataclass
class Proposal:
    tokens: list[int]
    q: list[np.ndarray] | None  # per drafted token, the draft distribution; None = one-hot
    replay_tokens: int = 0      # committed tokens fed back to the draft in this proposal


@dataclass(frozen=True)
class DraftStop:
    """Stop drafting within a round when the draft's confidence c_i < ``threshold``.

    c_i is the draft probability of the drafted token d_i, computed in float64 from
    the draft logits l_i at draft step i:
      - ``top_k = None``: c_i = q_i(d_i) with q_i = softmax(l_i) over the whole
        vocabulary (softmax(l_i / T) when the draft samples at temperature T: the
        distribution it drew from);
      - ``top_k = n``: c_i = exp(l_i(d_i)) / sum over the n largest logits of exp(l_j),
        the probability after a top-n filter at T = 1 (for a greedy draft d_i is the
        top token, so this is the top probability).
    ``keep_below``: the token whose c_i fell below the threshold is still proposed and
    drafting stops after it (True), or it is dropped and drafting stops before it
    (False). A deterministic drafter (n-gram, q one-hot) has c_i = 1 and never stops.
    """

    threshold: float
    top_k: int | None = None
    keep_below: bool = True

    def confidence(self, logits: np.ndarray, token: int, q: np.ndarray | None) -> float:
        """c_i as defined above (a probability in [0, 1])."""
        if self.top_k is None:
            probs = q if q is not None else softmax(logits, 1.0)
            return float(probs[token])
        z = np.asarray(logits, dtype=np.float64)
        top = np.partition(z, -self.top_k)[-self.top_k:] if self.top_k < z.shape[-1] else z
        if z[token] < top.min():
            return 0.0
        return float(1.0 / np.exp(top - z[token]).sum())


class Drafter(ABC):
    name = "drafter"

    def start(self, context: list[int]) -> None:
        """Called once per run, after the target prefill, with the prompt ids."""

    @abstractmethod
    def propose(self, context: list[int], k: int, stop: DraftStop | None = None) -> Proposal:
        """Draft up to k tokens continuing ``context`` (all committed ids so far);
        ``stop`` may end the round earlier (see ``DraftStop``)."""

    def commit(self, context: list[int]) -> int:
        """The round committed; ``context`` is every committed id. Returns the ns spent
        rolling back the draft's state (part of draft replay)."""
        return 0

    def describe(self) -> dict:
        return {"drafter": self.name}


class ModelDrafter(Drafter):
    """Autoregressive drafting with a small model on any backend.

    Cache invariant: the draft backend holds a prefix of the committed ids. At
    ``propose`` the ids it lacks (normally only the last committed token; after a
    bonus token also the last drafted one; after a target-only stretch of the guard
    policy, more) are fed in the same call as the first draft step, because one call
    of n tokens costs far less than n calls. ``replay_tokens`` counts the extra ones.
    Greedy drafts argmax q; sampled drafts x ~ q = softmax(l/T) with the draft rng.
    """

    name = "model"

    def __init__(self, backend: Backend, temperature: float = 0.0, seed: int = 0):
        self.backend = backend
        self.temperature = float(temperature)
        self.rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 2])))
        self._pushed: list[int] = []  # what the draft cache holds
        self._agreed = 0  # _pushed[:_agreed] is known to equal the committed prefix

    def start(self, context: list[int]) -> None:
        self.backend.reset()
        self._pushed, self._agreed = [], 0
        if len(context) > 1:  # prefill all but the last prompt token, like the target
            self.backend.forward(context[:-1], last_only=True)
            self._pushed = list(context[:-1])
            self._agreed = len(self._pushed)

    def _draw(self, logits: np.ndarray) -> tuple[int, np.ndarray | None]:
        if self.temperature <= 0.0:
            return int(np.argmax(logits)), None
        q = softmax(logits, self.temperature)
        return sample_from(q, self.rng.random()), q

    def propose(self, context: list[int], k: int, stop: DraftStop | None = None) -> Proposal:
        missing = context[len(self._pushed):]
        replay = len(missing) - 1
        tokens: list[int] = []
        qs: list[np.ndarray] = []
        feed = missing
        for _ in range(k):
            logits = self.backend.forward(feed, last_only=True)[0]
            self._pushed.extend(feed)
            tok, q = self._draw(logits)
            below = stop is not None and stop.confidence(logits, tok, q) < stop.threshold
            if below and not stop.keep_below:
                break
            tokens.append(tok)
            if q is not None:
                qs.append(q)
            if below:
                break
            feed = [tok]
        return Proposal(tokens, qs if self.temperature > 0 else None, max(replay, 0))

    def commit(self, context: list[int]) -> int:
        t0 = time.perf_counter_ns()
        # committed ids never change, so only the tail pushed since the last commit is compared
        keep = self._agreed
        limit = min(len(self._pushed), len(context) - 1)  # never cache the pending token
        while keep < limit and self._pushed[keep] == context[keep]:
            keep += 1
        self.backend.rollback(keep)
        del self._pushed[keep:]
        self._agreed = keep
        return time.perf_counter_ns() - t0

    def describe(self) -> dict:
        return {"drafter": self.name, "backend": self.backend.name, "model": self.backend.label}


class NGramDrafter(Drafter):
    """Prompt lookup (Saxena 2023): find the most recent earlier occurrence of the
    context's last n tokens (n from ``max_ngram`` down to ``min_ngram``) and propose
    the k tokens that followed it. Deterministic: q is one-hot."""

    name = "ngram"

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError("n-gram drafter needs 1 <= min_ngram <= max_ngram")
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def propose(self, context: list[int], k: int, stop: DraftStop | None = None) -> Proposal:
        if k <= 0:
            return Proposal([], None)
        arr = np.asarray(context, dtype=np.int64)
        n_ctx = len(arr)
        for n in range(min(self.max_ngram, n_ctx - 1), self.min_ngram - 1, -1):
            tail = arr[n_ctx - n:]
            windows = np.lib.stride_tricks.sliding_window_view(arr[:n_ctx - 1], n)
            hits = np.flatnonzero((windows == tail).all(axis=1))
            if hits.size:
                start = int(hits[-1]) + n
                cont = arr[start:start + k].tolist()
                if cont:
                    return Proposal(cont, None)
        return Proposal([], None)

    def describe(self) -> dict:
        return {"drafter": self.name, "max_ngram": self.max_ngram, "min_ngram": self.min_ngram}
