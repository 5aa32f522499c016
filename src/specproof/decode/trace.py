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

from dataclasses import asdict, dataclass, field, fields

import pandas as pd

from .costmodel import acceptance_by_position


@dataclass(frozen=True)
class RoundRecord:
    """One round (a target-only step is a round with k = 0); a row of rounds.parquet."""
    round: int                  # index within the run
    k: int                      # tokens the drafter proposed
    drafted: list[int]          # their ids
    accepted: int               # drafted tokens the target accepted
    committed: int              # C: tokens the round kept (accepted + correction/bonus, cut by a stop rule)
    replay_tokens: int          # committed tokens fed back to the draft in this round's proposal
    verify_positions: int       # positions the target scored (B)
    draft_ns: int               # D: drafting
    replay_ns: int              # draft replay after the commit
    verify_ns: int              # R: target calls, device-synchronized
    residual_ns: int            # X: the rest of the round
    round_ns: int               # wall time of the whole round

    @classmethod
    def timed(cls, *, round: int, drafted: list[int], accepted: int, committed: int,
              replay_tokens: int, verify_positions: int, draft_ns: int, replay_ns: int,
              verify_ns: int, round_ns: int) -> "RoundRecord":
        """The record of a round whose wall time is ``round_ns``: X is what D, replay
        and R leave of it."""
        return cls(round, len(drafted), list(drafted), accepted, committed, replay_tokens,
                   verify_positions, draft_ns, replay_ns, verify_ns,
                   round_ns - draft_ns - replay_ns - verify_ns, round_ns)


ROUND_COLUMNS = [f.name for f in fields(RoundRecord)]


@dataclass
class RunResult:
    path: str                   # "target" or "speculative"
    prompt_ids: list[int]
    new_ids: list[int]
    text: str
    prefill_ns: int
    decode_ns: int
    rounds: list[RoundRecord] = field(default_factory=list)
    stop_reason: str = ""

    @property
    def new_tokens(self) -> int:
        return len(self.new_ids)

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / (self.decode_ns / 1e9) if self.decode_ns else float("nan")

    def rounds_frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(r) for r in self.rounds], columns=ROUND_COLUMNS)

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
