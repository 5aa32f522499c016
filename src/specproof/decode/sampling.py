"""Sampling arithmetic and the speculative acceptance rule, on the CPU in float64.

Why float64: the acceptance ratio p(x)/q(x), the residual max(0, p - q) and inverse-CDF
sampling over vocabularies of up to 262,144 entries need a cumulative sum whose rounding
error stays far below any probability we could resolve statistically. In float32 the
cumsum over 2.6e5 terms drifts by ~1e-3 relative (tested in tests/decode/test_sampling.py), enough
to bias rare tokens; float64 keeps it below 1e-10. Logits arrive as float32 from the
backends and are promoted once, per position, here.

Every random draw comes from an explicit ``numpy.random.Generator`` so a run is
bit-reproducible from its seed on a given backend.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    """p = exp(l/T - max) / sum(exp(l/T - max)), float64, along the last axis (T > 0)."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    z = z - z.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


def sample_from(probs: np.ndarray, u: float) -> int:
    """Inverse-CDF draw: the smallest x with F(x) > u * F(V-1), for u ~ U[0,1)."""
    cdf = np.cumsum(probs, dtype=np.float64)
    x = int(np.searchsorted(cdf, u * cdf[-1], side="right"))
    return min(x, probs.shape[-1] - 1)


def acceptance_probability(p: np.ndarray, q: np.ndarray, x: int) -> float:
    """a(x) = min(1, p(x) / q(x)); a drafted x always has q(x) > 0."""
    qx = q[x]
    if qx <= 0.0:  # cannot be drafted by sampling; a deterministic drafter sets q one-hot
        return 0.0
    return min(1.0, float(p[x]) / float(qx))


def residual_distribution(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """r = norm(max(0, p - q)). If p == q (the residual is empty) rejection has
    probability 0; we return p so that a numerically possible rejection stays exact."""
    r = np.maximum(p - q, 0.0)
    total = r.sum()
    if total <= 0.0:
        return p
    return r / total


def one_hot(x: int, vocab_size: int) -> np.ndarray:
    q = np.zeros(vocab_size, dtype=np.float64)
    q[x] = 1.0
    return q


@dataclass(frozen=True)
class Sampler:
    """Temperature sampling (T > 0) or greedy (T == 0) from target logits.

    Greedy takes argmax over the float32 logits exactly as target-only decoding does,
    so greedy speculative IDs equal target-only IDs whenever the logits agree.
    """

    temperature: float = 0.0

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def probs(self, logits: np.ndarray) -> np.ndarray:
        if self.greedy:
            return one_hot(int(np.argmax(logits)), logits.shape[-1])
        return softmax(logits, self.temperature)

    def sample(self, logits: np.ndarray, rng: np.random.Generator) -> int:
        """Draw the next token from target logits (target-only path, bonus token)."""
        if self.greedy:
            return int(np.argmax(logits))
        return sample_from(softmax(logits, self.temperature), rng.random())

    def verify_token(self, logits: np.ndarray, drafted: int, q: np.ndarray | None,
                     rng: np.random.Generator) -> tuple[bool, int]:
        """One position of the acceptance rule (Leviathan et al. 2023, Alg. 1).

        Accept x when u < min(1, p(x)/q(x)); otherwise return a draw from
        norm(max(0, p - q)). ``q`` is None for deterministic (one-hot) drafts.
        Greedy: accept iff x == argmax p, else return argmax p.
        Returns (accepted, token): token == drafted when accepted.
        """
        if self.greedy:
            best = int(np.argmax(logits))
            return best == drafted, best
        p = softmax(logits, self.temperature)
        if q is None:
            q = one_hot(drafted, p.shape[-1])
        u = rng.random()
        if u < acceptance_probability(p, q, drafted):
            return True, drafted
        return False, sample_from(residual_distribution(p, q), rng.random())
