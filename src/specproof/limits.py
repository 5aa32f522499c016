"""Bounds of a run's settings: one table for CLI flags and study configs alike.

Every check raises one ``ConfigError`` line ``<where>: <why>``, where ``where`` names the
flag (``--k``) or the file and field (``study.yaml: field grid.0.k.0``), so a bad value
reads the same from the command line and from a study. Also: the model context a run
needs, and output paths that must be writable before any work starts.
"""
from __future__ import annotations

import math
import numbers
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError


def _show(value) -> str:
    """A value as a message shows it: numbers plain (numpy's too), anything else as repr."""
    return str(value) if isinstance(value, numbers.Number) else repr(value)


@dataclass(frozen=True)
class Bound:
    """An integer (or, with ``integer=False``, a finite float) in [low, high]."""
    low: float
    high: float
    integer: bool = True

    def why(self, value) -> str | None:
        """Why ``value`` is out of bounds, or None."""
        if self.integer:
            ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
            if not ok or not self.low <= value <= self.high:
                return f"must be an integer from {self.low:,} to {self.high:,} (got {_show(value)})"
            return None
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or not self.low <= value <= self.high:
            return f"must be a finite number from {self.low:g} to {self.high:g} (got {_show(value)})"
        return None


# the least positive temperature: below it logits / T overflow float64 on real vocabularies
MIN_TEMPERATURE = 1e-3

LIMITS: dict[str, Bound] = {
    "k": Bound(1, 64),                   # speculation length (max K of adaptive/guard, start K of hf_heuristic)
    "max_new_tokens": Bound(1, 4096),
    "temperature": Bound(0.0, 100.0, integer=False),  # 0 is greedy; else >= MIN_TEMPERATURE
    "seed": Bound(0, 2**32 - 1),
    "threads": Bound(1, 1024),
    "repeats": Bound(1, 1000),           # A/B repetitions; a study's repetitions
    "n_ctx": Bound(64, 1 << 20),         # and at most the model's context length
    "n_batch": Bound(1, 1 << 20),
    "n_ubatch": Bound(1, 1 << 20),       # and at most n_batch (llama.cpp would clamp it)
    "n_gpu_layers": Bound(-1, 100_000),  # -1 all, 0 none
}


def check(field: str, value, where: str):
    """``value`` if it lies within ``LIMITS[field]``, else a ConfigError ``<where>: <why>``."""
    why = LIMITS[field].why(value)
    if why is None and field == "temperature" and 0 < value < MIN_TEMPERATURE:
        why = f"must be 0 (greedy) or at least {MIN_TEMPERATURE:g} (got {_show(value)})"
    if why is not None:
        raise ConfigError(f"{where}: {why}")
    return value


def check_all(values: Mapping, where: Callable[[str], str]) -> None:
    """Check every field of ``values`` that ``LIMITS`` bounds and is set (not None);
    ``where(field)`` names it. Also n_ubatch <= n_batch."""
    for field, value in values.items():
        if field in LIMITS and value is not None:
            check(field, value, where(field))
    batch, ubatch = values.get("n_batch"), values.get("n_ubatch")
    if batch is not None and ubatch is not None and ubatch > batch:
        raise ConfigError(f"{where('n_ubatch')}: must be at most n_batch ({batch}) "
                          f"(got {ubatch}; llama.cpp would silently use {batch})")


def check_context(where: str, what: str, prompt_tokens: int, new_tokens: int,
                  context: int | None, hint: str = "") -> None:
    """Refuse a run whose prompt plus new tokens would not fit ``context`` positions
    (None: unbounded); ``what`` names the limit, e.g. "the llama target's n_ctx"."""
    if context is None or prompt_tokens + new_tokens <= context:
        return
    raise ConfigError(f"{where}: prompt of {prompt_tokens:,} tokens + {new_tokens:,} new tokens = "
                      f"{prompt_tokens + new_tokens:,} positions, over the {context:,} of {what}"
                      + (f"; {hint}" if hint else ""))


def output_dir(path: Path | str, where: str) -> Path:
    """``path`` as a directory this process can write into, created if missing; else a
    ConfigError naming ``where`` (a flag) and the reason (a regular file on the way, a
    read-only or virtual file system such as /proc)."""
    path = Path(path)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise ConfigError(f"{where}: {path}: {existing} is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise ConfigError(f"{where}: {path}: cannot create files there ({exc.strerror or exc})") from None
    return path


def output_file(path: Path | str, where: str) -> Path:
    """``path`` as a file this process can write (its directory created if missing)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{where}: {path}: is a directory, expected a file")
    output_dir(path.parent, where)
    return path
