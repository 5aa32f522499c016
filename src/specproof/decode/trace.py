"""Per-round cost trace and per-run records (columnar, via pandas / pyarrow).

Each speculative round is timed with ``perf_counter_ns`` at contiguous boundaries, so
the rounds tile the decode wall time exactly:

    round_ns = draft_ns (D) + replay_ns + verify_ns (R) + residual_ns (X)

D: draft forward calls and draft sampling (it includes feeding committed tokens the
draft lacks, which happens inside its first call); replay_ns: rolling the draft's
cache back to the committed prefix; R: target calls, device-synchronized; X:
everything else (acceptance arithmetic, sampling, bookkeeping). C (committed) =
accepted + 1 (the correction or bonus token), unless a stop rule cut the round.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

ROUND_COLUMNS = ["round", "k", "drafted", "accepted", "committed", "replay_tokens",
                 "verify_positions", "draft_ns", "replay_ns", "verify_ns", "residual_ns",
                 "round_ns"]


@dataclass
class RunResult:
    path: str                   # "target" or "speculative"
    prompt_ids: list[int]
    new_ids: list[int]
    text: str
    prefill_ns: int
    decode_ns: int
    rounds: list[dict] = field(default_factory=list)
    stop_reason: str = ""

    @property
    def new_tokens(self) -> int:
        return len(self.new_ids)

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / (self.decode_ns / 1e9) if self.decode_ns else float("nan")

    def rounds_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rounds, columns=ROUND_COLUMNS)

    def trace_closure(self) -> float:
        """|sum(D + replay + R + X) - decode wall| / decode wall (0 by construction
        up to the clock reads between rounds)."""
        df = self.rounds_frame()
        parts = df[["draft_ns", "replay_ns", "verify_ns", "residual_ns"]].to_numpy().sum()
        return abs(float(parts) - self.decode_ns) / self.decode_ns if self.decode_ns else 0.0

    def acceptance_by_position(self, k_max: int | None = None) -> list[float]:
        """alpha_i = P(position i accepted | positions < i accepted), pooled over rounds,
        i = 1..k_max (NaN where no round reached position i)."""
        df = self.rounds_frame()
        if not (df["k"] > 0).any():
            return []
        return acceptance_by_position(df, k_max or int(df["k"].max())).tolist()

    def mean_accepted(self) -> float:
        df = self.rounds_frame()
        df = df[df["k"] > 0]
        return float(df["accepted"].mean()) if not df.empty else float("nan")
