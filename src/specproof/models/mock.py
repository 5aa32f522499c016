"""A deterministic synthetic language model: the ground truth for tests.

Its next-token logits are an exact, seeded function of the last ``order`` context
tokens: l(ctx) = scale * z(seed, ctx), z ~ N(0, I_V) drawn from a generator seeded by
(seed, ctx). A draft mock built with ``noise > 0`` and the same ``seed`` returns
l(ctx) + noise * z(draft_seed, ctx), so its q is close to the target's p.
``batch_variance > 0`` adds a perturbation to every position scored in a call of
more than one token (a deliberately batch-variant backend, for qualification tests).
``latency_ms`` + ``per_token_ms`` * n is slept per forward call to model cost.
"""
from __future__ import annotations

import time

import numpy as np

from ..decode.backend import Backend, BackendInfo


class MockBackend(Backend):
    name = "mock"

    def __init__(self, vocab_size: int = 64, seed: int = 0, order: int = 3, scale: float = 3.0,
                 noise: float = 0.0, noise_seed: int = 1, batch_variance: float = 0.0,
                 latency_ms: float = 0.0, per_token_ms: float = 0.0, eos_id: int | None = None):
        super().__init__()
        if vocab_size < 4:
            raise ValueError("mock vocab_size must be at least 4")
        self._vocab = int(vocab_size)
        self.seed, self.order, self.scale = int(seed), int(order), float(scale)
        self.noise, self.noise_seed = float(noise), int(noise_seed)
        self.batch_variance = float(batch_variance)
        self.latency_ms, self.per_token_ms = float(latency_ms), float(per_token_ms)
        self.eos_id = eos_id
        self._tokens: list[int] = []

    @property
    def eos_ids(self) -> frozenset[int]:
        return frozenset() if self.eos_id is None else frozenset({self.eos_id})

    def encode(self, text: str) -> list[int]:
        return [b % self._vocab for b in text.encode("utf-8")]

    def decode(self, ids: list[int]) -> str:
        return " ".join(str(i) for i in ids)

    def _gauss(self, seed: int, ctx: tuple[int, ...]) -> np.ndarray:
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, len(ctx), *ctx])))
        return rng.standard_normal(self._vocab, dtype=np.float64)

    def logits_for(self, context: list[int]) -> np.ndarray:
        """The exact next-token logits after ``context`` (float32), independent of batching."""
        ctx = tuple(context[-self.order:]) if self.order > 0 else ()
        logits = self.scale * self._gauss(self.seed, ctx)
        if self.noise:
            logits += self.noise * self._gauss(self.seed + 7919 * self.noise_seed, ctx)
        return logits.astype(np.float32)

    def _forward(self, ids: list[int], last_only: bool) -> np.ndarray:
        if self.latency_ms or self.per_token_ms:
            time.sleep((self.latency_ms + self.per_token_ms * len(ids)) / 1e3)
        out = np.empty((len(ids), self._vocab), dtype=np.float32)
        for i, tok in enumerate(ids):
            self._tokens.append(int(tok))
            out[i] = self.logits_for(self._tokens)
        if self.batch_variance and len(ids) > 1:
            rng = np.random.Generator(np.random.PCG64([self.seed, 99, len(self._tokens)]))
            out += (self.batch_variance * rng.standard_normal(out.shape)).astype(np.float32)
        return out[-1:] if last_only else out

    def _truncate(self, n: int) -> None:
        del self._tokens[n:]

    def info(self) -> BackendInfo:
        return BackendInfo(
            backend="mock", model=f"mock-v{self._vocab}-s{self.seed}-n{self.noise}",
            vocab_size=self._vocab, dtype="float64",
            settings={"seed": self.seed, "order": self.order, "scale": self.scale,
                      "noise": self.noise, "batch_variance": self.batch_variance,
                      "latency_ms": self.latency_ms, "per_token_ms": self.per_token_ms},
        )
