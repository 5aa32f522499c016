"""Certificate power on a real pair, by replay (issue 21, section 3).

Running hundreds of planted repetitions through the real models does not fit on two
cores; the certificate's power does not need them. Along each sampled speculative run of
a record set we re-score the target's p_t and the draft's q_t at every emitted position
(``pit.teacher_forced``, one position per call, as the PIT stage scores them), and from
them the exact law of the token a planted violation would emit there:

    null            p_t                                  (Leviathan et al. 2023, Thm. 1)
    skip_residual   min(p_t, q_t) + (1 - sum min(p_t, q_t)) p_t   at a drafted position:
                    on rejection the token is drawn from p_t, not norm(max(0, p_t - q_t))
    temperature     p_t^(1/c) / sum p_t^(1/c), c = calibration.TEMPERATURE_VIOLATION:
                    every position sampled at c T
    off_by_one      p_(t-1) at a drafted position: acceptance test and residual read the
                    target's row one position early (the rule is exact for the row it reads)

A bonus position (all drafts accepted, drawn from p_t) emits p_t except under the
temperature violation. ``n-gram`` drafts are deterministic: q_t is one-hot on the proposal.
Each simulated study draws every position's token from its law, forms the three PIT
orders with one V per position, exactly as ``pit.score_runs`` does, and applies the
certificate's whole rule (``pit.rule_decision``); the power is the share of simulated
studies it rejects. ``skip_residual``'s law is checked against the planted sampler's own
code (``calibration.SkipResidualSampler`` through ``calibration.step_distribution``) in
the tests.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from tqdm import tqdm

from ..decode.backend import Backend
from ..decode.sampling import one_hot
from ..study.workloads import prompt_ids
from .calibration import TEMPERATURE_VIOLATION
from .pit import order_pvalues, position_roles, ratio_key, rule_decision, teacher_forced

VIOLATIONS = ("null", "skip_residual", f"temperature_{TEMPERATURE_VIOLATION}", "off_by_one")


def emitted_law(violation: str, p: np.ndarray, q: np.ndarray | None,
                p_prev: np.ndarray | None) -> np.ndarray:
    """The law of the token emitted at one position under ``violation`` (see the module
    docstring); ``q`` None marks a bonus position, ``p_prev`` None the first position."""
    if violation == "null":
        return p
    if violation.startswith("temperature_"):
        z = p ** (1.0 / TEMPERATURE_VIOLATION)
        return z / z.sum()
    if q is None:
        return p
    if violation == "skip_residual":
        kept = np.minimum(p, q)
        return kept + (1.0 - kept.sum()) * p
    if violation == "off_by_one":
        return p if p_prev is None else p_prev
    raise ValueError(f"unknown violation {violation!r}")


def mass_before(p: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Per token y, the mass of the tokens ranked before y when sorted by ``key``
    descending, ties by id (``pit.rank_below`` for every y at once)."""
    order = np.lexsort((np.arange(p.size), -key))
    below = np.empty_like(p)
    below[order] = np.cumsum(p[order]) - p[order]
    return below


@dataclass
class Position:
    """One emitted position: the target's p_t, the draft's q_t (None at a bonus
    position; one-hot on the proposal for an n-gram draft), p_(t-1) (None at t = 0) and
    the ratio-order key the PIT stage uses there (``pit.ratio_key``)."""

    p: np.ndarray
    q: np.ndarray | None
    p_prev: np.ndarray | None
    key: np.ndarray


def position_draws(pos: Position, reps: int, rng: np.random.Generator) -> np.ndarray:
    """PIT values of ``reps`` independent tokens per violation at one position:
    shape (len(VIOLATIONS), reps, 3), the last axis (u id, u rank, u ratio), one V per
    draw shared by the three orders."""
    p = pos.p
    below_id = np.cumsum(p) - p
    below_rank = mass_before(p, p)
    below_ratio = below_rank if pos.q is None else mass_before(p, pos.key)
    out = np.empty((len(VIOLATIONS), reps, 3))
    for i, violation in enumerate(VIOLATIONS):
        cdf = np.cumsum(emitted_law(violation, p, pos.q, pos.p_prev))
        x = np.minimum(np.searchsorted(cdf, rng.random(reps) * cdf[-1], side="right"), p.size - 1)
        vp = rng.random(reps) * p[x]
        out[i] = np.stack([below_id[x] + vp, below_rank[x] + vp, below_ratio[x] + vp], axis=1)
    return out


def run_positions(dists: Iterable[tuple[np.ndarray, np.ndarray | None]], roles: list[int | None],
                  ) -> Iterator[Position]:
    """Positions of one run, as its (p_t, q_t) are re-scored (``pit.teacher_forced``),
    with its roles (``pit.position_roles``: the proposal at a drafted position, None at
    a bonus one); q_t None (an n-gram draft) becomes one-hot on the proposal."""
    prev = None
    for (p, q), proposal in zip(dists, roles):
        if proposal is None:
            yield Position(p, None, prev, p)
        elif q is None:
            yield Position(p, one_hot(int(proposal), p.size), prev, ratio_key(p, None, int(proposal)))
        else:
            yield Position(p, q, prev, ratio_key(p, q, None))
        prev = p


def law_distances(pos: Position) -> np.ndarray:
    """Total variation 0.5 sum_y |law(y) - p_t(y)| of each violation at one position."""
    return np.array([0.5 * np.abs(emitted_law(v, pos.p, pos.q, pos.p_prev) - pos.p).sum()
                     for v in VIOLATIONS])


def replay_runs(target: Backend, pool_draft, runs: pd.DataFrame, rounds: pd.DataFrame,
                prompts: dict[str, dict], reps: int, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Replay every sampled speculative run of one pair: (draws of every position, shape
    (positions, violations, reps, 3); per-position TV of each violation, shape
    (positions, violations); the number of drafted positions). ``pool_draft(name)`` gives
    a run's draft backend (None for an n-gram draft)."""
    rng = np.random.default_rng(seed)
    by_run = dict(tuple(rounds.groupby("run_id")))
    draws, tvs, drafted = [], [], 0
    for r in tqdm(list(runs.itertuples()), desc="replay", unit="run"):
        tokens = [int(x) for x in r.ids]
        roles = position_roles(by_run[r.run_id], len(tokens), r.run_id)
        draft = pool_draft(r.draft)
        dists = teacher_forced(target, prompt_ids(target, prompts[r.prompt_id]), tokens, r.temperature, draft)
        for pos in run_positions(dists, roles):
            draws.append(position_draws(pos, reps, rng))
            tvs.append(law_distances(pos))
            drafted += pos.q is not None
    return np.stack(draws), np.stack(tvs), drafted


def study_power(draws: np.ndarray, alpha: float, multiple: int = 1) -> pd.DataFrame:
    """The whole rule's rejections per violation over simulated studies. ``draws``: the
    stacked ``position_draws`` of every position of one pair, shape (positions,
    violations, reps, 3). A study of ``multiple`` x the positions joins ``multiple``
    disjoint repetitions (reps // multiple studies). Rows: violation, multiple, tokens,
    studies, rejections, rate, ci_low, ci_high (Clopper-Pearson, 95%)."""
    n_pos, n_viol, reps, _ = draws.shape
    studies = reps // multiple
    rows = []
    for i, violation in enumerate(VIOLATIONS):
        rejected = 0
        for s in range(studies):
            u = draws[:, i, s * multiple:(s + 1) * multiple, :].transpose(1, 0, 2).reshape(-1, 3)
            rejected += rule_decision(order_pvalues(u[:, 0], u[:, 1], u[:, 2]), alpha)["rejected"]
        ci = stats.binomtest(rejected, studies).proportion_ci(0.95, method="exact")
        rows.append({"violation": violation, "multiple": multiple, "tokens": n_pos * multiple,
                     "studies": studies, "rejections": rejected, "rate": rejected / studies,
                     "ci_low": ci.low, "ci_high": ci.high})
    return pd.DataFrame(rows)
