"""The cost model a policy or the advisor predicts with (Leviathan et al. 2023, sec. 3.1).

    alpha_i = P(position i accepted | positions < i accepted)       (acceptance by position)
    E[C|K]  = 1 + sum_{j=1..K} prod_{i<=j} alpha_i                  (tokens committed per round)
    E[T|K]  = mean_r (d_r c_draft + v(d_r + 1)) + x                  (expected round cost, ms)

It lives in ``decode`` because policies choose K with it at run time; the analysis
(``analysis.costs``) uses the same functions on a study's records.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def acceptance_by_position(rounds: pd.DataFrame, k_max: int,
                           requested: pd.Series | None = None) -> np.ndarray:
    """alpha_i = P(position i accepted | positions < i accepted), pooled rounds.

    By default a round reaches position i only if the drafter proposed i tokens.
    With ``requested`` (tokens asked of the drafter per round, aligned with ``rounds``)
    a position that was asked for but not proposed counts as rejected: the right
    alpha for predicting what a drafter that may propose fewer than K tokens (n-gram
    lookup) commits per round. For a model drafter, which always proposes K, both agree."""
    r = rounds[rounds["k"] > 0] if requested is None else rounds
    asked = r["k"] if requested is None else requested
    out = np.full(k_max, np.nan)
    for i in range(1, k_max + 1):
        at = asked >= i
        reached = (at & (r["accepted"] >= i - 1)).sum()
        if reached:
            out[i - 1] = (at & (r["accepted"] >= i)).sum() / reached
    return out


def expected_committed(alpha: np.ndarray, k: int) -> float:
    a = np.nan_to_num(alpha[:k], nan=0.0)
    return 1.0 + float(np.cumprod(a).sum())


def expected_round_ms(k: int, lengths: np.ndarray, draft_ms: float, verify_ms: dict[int, float],
                      residual_ms: float) -> float:
    """E[T|K] = mean_r (d_r c_draft + v(d_r + 1)) + x with d_r = min(K, length_r), the
    tokens a drafter whose proposals had ``lengths`` when asked for K_max proposes at K
    (ms). A model drafter always proposes K: K c_draft + v(K + 1) + x."""
    d = np.minimum(k, np.asarray(lengths))
    return float(np.mean(d * draft_ms + np.array([verify_ms[int(b) + 1] for b in d]))) + residual_ms


def fit_draft_round(k: np.ndarray, draft_ms: np.ndarray) -> tuple[float, float]:
    """(a, b) of draft time per round = a + b k, least squares over rounds that drafted
    (k > 0): a is what a round's first draft call costs beyond a draft step (in a run, the
    draft's first call after a verify call), b the cost per drafted token. With one
    distinct k, or a fit whose a or b is negative, a = 0 and b = sum(draft) / sum(k)."""
    k, y = np.asarray(k, dtype=float), np.asarray(draft_ms, dtype=float)
    keep = k > 0
    k, y = k[keep], y[keep]
    if not len(k):
        return 0.0, 0.0
    pooled = (0.0, float(y.sum() / k.sum()))
    if len(np.unique(k)) < 2:
        return pooled
    b, a = np.polyfit(k, y, 1)
    if a < 0 or b <= 0:
        return pooled
    return float(a), float(b)


def loop_round_ms(k: int, lengths: np.ndarray, draft: tuple[float, float], verify_ms: dict[int, float],
                  verify_ratio: float, residual_ms: float) -> float:
    """E[T|K] as the loop runs it: mean_r (a + b d_r [d_r > 0] + rho v(d_r + 1)) + x with
    d_r = min(K, length_r), (a, b) the in-loop draft round fit (``fit_draft_round``), v the
    isolated verify curve and rho its in-loop / isolated ratio."""
    a, b = draft
    d = np.minimum(k, np.asarray(lengths))
    cost = np.where(d > 0, a + b * d, 0.0) + verify_ratio * np.array([verify_ms[int(x) + 1] for x in d])
    return float(np.mean(cost)) + residual_ms


def replayed_rounds(drafter, context: list[int], ids: list[int], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy speculative decoding at K of a known output, replayed without a model: the
    target's greedy tokens ``ids`` after ``context``, a deterministic drafter (n-gram
    lookup). Each round the drafter proposes up to min(K, n - t - 1) tokens after
    context + ids[:t]; the longest prefix equal to ids[t:] is accepted and one more token
    committed. Returns (tokens proposed, tokens committed) per round: exact wherever the
    verify path leaves the greedy output unchanged."""
    proposed, committed, t, n = [], [], 0, len(ids)
    while t < n:
        tokens = drafter.propose(context + ids[:t], min(k, n - t - 1)).tokens
        accepted = next((i for i, tok in enumerate(tokens) if tok != ids[t + i]), len(tokens))
        proposed.append(len(tokens))
        committed.append(accepted + 1)
        t += accepted + 1
    return np.array(proposed), np.array(committed)
