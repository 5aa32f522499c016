"""The one interface every backend implements.

A backend holds one sequence's KV state. ``length`` is the number of tokens in its
cache. ``forward(ids)`` appends ids and returns float32 logits for every appended
position, shape (len(ids), vocab_size): row i is the next-token logits after ids[i]
(``last_only=True``: only the last row, shape (1, vocab_size)).
``rollback(n)`` truncates the cache to its first n tokens, really removing the
entries past n so that a re-feed recomputes them.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError


@dataclass
class BackendInfo:
    """What provenance records about a loaded model."""

    backend: str
    model: str
    vocab_size: int
    device: str = "cpu"
    dtype: str = ""
    files: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)


class Backend(ABC):
    """Subclasses set ``_vocab`` (vocabulary size) and ``_eos`` (end-of-sequence ids)."""

    name: str = "base"
    _vocab: int = 0
    _eos: frozenset[int] = frozenset()

    def __init__(self) -> None:
        self.length = 0

    @property
    def vocab_size(self) -> int:
        return self._vocab

    @property
    def eos_ids(self) -> frozenset[int]:
        return self._eos

    @abstractmethod
    def encode(self, text: str) -> list[int]: ...

    @abstractmethod
    def decode(self, ids: list[int]) -> str: ...

    @abstractmethod
    def _forward(self, ids: list[int], last_only: bool) -> np.ndarray:
        """Append ids at positions length.. and return their logits (n, V) float32,
        or only the last position's (1, V) when ``last_only``."""

    @abstractmethod
    def _truncate(self, n: int) -> None:
        """Drop cache entries at positions >= n."""

    @abstractmethod
    def info(self) -> BackendInfo:
        """Provenance record (hashes model files: call once, not per run)."""

    @property
    def label(self) -> str:
        """A short name for messages (no file hashing)."""
        path = getattr(self, "path", None)
        return f"{self.name}:{path.name}" if path is not None else self.name

    @property
    def max_context(self) -> int | None:
        """Positions the cache can hold (llama: n_ctx; hf: the model's position count);
        None: unbounded, as the mock's."""
        return None

    def chat_prompt(self, instruction: str) -> str:
        """The instruction rendered with the model's chat template (identity if none)."""
        return instruction

    def forward(self, ids: list[int], last_only: bool = False) -> np.ndarray:
        """Append ids; logits for every appended position, or (1, V) for the last one
        (prefill and drafting need only that, and skip the other rows' LM head)."""
        if not ids:
            raise ValueError("forward() needs at least one token")
        limit = self.max_context
        if limit is not None and self.length + len(ids) > limit:
            raise ConfigError(f"{self.label}: context of {self.length + len(ids):,} positions "
                              f"exceeds its {limit:,}")
        logits = self._forward(ids, last_only)
        self.length += len(ids)
        return logits

    def rollback(self, n: int) -> None:
        if not 0 <= n <= self.length:
            raise ValueError(f"rollback to {n} outside cache of length {self.length}")
        if n < self.length:
            self._truncate(n)
            self.length = n

    def reset(self) -> None:
        self.rollback(0)

    def synchronize(self) -> None:
        """Wait for queued device work; called before every clock read."""

    def close(self) -> None:
        """Release model memory."""


def timed_forward_ms(backend: Backend, block: list[int], last_only: bool = False) -> float:
    """ms of one forward(block) on a prefilled backend, synchronised before and after
    (an accelerator's queue drained), then rolled back to the length it had."""
    base = backend.length
    backend.synchronize()
    t0 = time.perf_counter_ns()
    backend.forward(block, last_only=last_only)
    backend.synchronize()
    dt = (time.perf_counter_ns() - t0) / 1e6
    backend.rollback(base)
    return dt
