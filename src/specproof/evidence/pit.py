"""Randomized probability integral transform (PIT) of emitted tokens.

For token x_t emitted at step t with target next-token distribution p_t (after the same
temperature transform, vocabulary in id order, F_t its CDF):

    u_t = F_t(x_t - 1) + V_t * p_t(x_t),   V_t ~ U(0, 1) i.i.d. from a seeded generator.

If every x_t was drawn from p_t, the u_t are i.i.d. U(0, 1) whatever the dependence
between tokens (the sequential PIT argument of Diebold, Gunther & Tay 1998, randomized
for discrete outcomes; Brockwell 2007). Scoring uses the target-only execution path:
one position per call, exactly as target-only sampling scores them.

Any ordering of the vocabulary fixed before x_t is drawn keeps the null exact. We
report three: id order, probability-rank order (tokens sorted by p_t descending, ties by
id), under which a temperature error moves mass monotonically, and ratio order
(``u_ratio``), the direction in which a skipped residual resample moves mass:

- a drafted position of a model draft (a token was proposed there and verified,
  accepted or not): tokens sorted by q_t/p_t descending, ties by id, where q_t is the
  draft's distribution at the same temperature, re-scored along the emitted sequence one
  position per call (so it depends on x_<t only; it need not equal the decode's q_t
  bit for bit, since any key fixed by the past keeps the null exact);
- a drafted position of the n-gram drafter: the proposal first, then rank order (the
  proposal is a deterministic function of x_<t);
- a bonus position (all K drafts accepted, the token drawn straight from p_t), every
  position of a target-only run, and a round with no proposal: rank order.

Whether position t is drafted or a bonus depends on the acceptances before t only. The
order never uses the token drafted by a sampled model draft, nor whether it was accepted:
both depend on the draft's randomness at t, which the emitted x_t depends on too, and
ordering by them breaks the null.

``uniformity`` tests a set of u against U(0, 1) (KS and binned chi-square), for the
calibration on the mock and the certificate alike; ``score_runs`` scores a study's
sampled runs (the ``pit`` stage).
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from tqdm import tqdm

from ..decode.backend import Backend
from ..decode.sampling import softmax
from ..errors import SpecproofError
from ..models.loader import ModelPool
from ..records import seed_from, write_parquet
from ..study.config import Study
from ..study.workloads import prompt_ids


def pit_values(probs: np.ndarray, tokens: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Vectorized u = F(x - 1) + V p(x) for rows of probs (n, vocab)."""
    cdf_below = np.cumsum(probs, axis=1) - probs
    idx = np.arange(len(tokens))
    return cdf_below[idx, tokens] + v * probs[idx, tokens]


def rank_below(probs: np.ndarray, tokens: np.ndarray, key: np.ndarray | None = None) -> np.ndarray:
    """Mass ranked before x when tokens are sorted by ``key`` descending (default p
    itself), ties by id: sum of p(y) over y with key(y) > key(x), or key(y) == key(x)
    and y < x. Any key fixed before x is drawn keeps the PIT exact."""
    key = probs if key is None else key
    kx = key[np.arange(len(tokens)), tokens][:, None]
    ids = np.arange(probs.shape[1])[None, :]
    before = (key > kx) | ((key == kx) & (ids < tokens[:, None]))
    return (probs * before).sum(axis=1)


def pit_rank_values(probs: np.ndarray, tokens: np.ndarray, v: np.ndarray,
                    key: np.ndarray | None = None) -> np.ndarray:
    """PIT in the order of ``key`` descending (p itself by default)."""
    return rank_below(probs, tokens, key) + v * probs[np.arange(len(tokens)), tokens]


def pit_one(p: np.ndarray, x: int, v: float) -> tuple[float, float, float, float]:
    """(u_id, u_rank, p(x), F(x-1)) for one position, one V for both orders."""
    below = float(p[:x].sum())
    px = float(p[x])
    below_rank = float(p[(p > px)].sum() + p[:x][p[:x] == px].sum())
    return below + v * px, below_rank + v * px, px, below


def pit_ordered(p: np.ndarray, x: int, v: float, key: np.ndarray) -> float:
    """u = (mass of tokens before x when sorted by ``key`` descending, ties by id) + V p(x)."""
    kx = key[x]
    ids = np.arange(p.size)
    return float(p[(key > kx) | ((key == kx) & (ids < x))].sum() + v * p[x])


def ratio_key(p: np.ndarray, q: np.ndarray | None, proposal: int | None) -> np.ndarray:
    """The ratio-order key at one position: q/p at a model draft's drafted position,
    'proposal first, then p descending' (p + 2 * [y = proposal], p <= 1) at an n-gram
    drafted position, p itself (rank order) at a bonus position."""
    if q is not None:
        return q / np.clip(p, 1e-300, None)
    if proposal is not None:
        key = p.copy()
        key[proposal] += 2.0
        return key
    return p


def position_roles(rounds: pd.DataFrame, n_tokens: int, run_id: str = "?") -> list[int | None]:
    """Per emitted position of one speculative run, the drafted token (a drafted
    position) or None (a bonus position), from its rounds: in a round of k drafts with
    ``committed`` tokens kept, positions i < k were drafted (accepted, or the first
    rejection, resampled from the residual) and position i = k is the bonus."""
    roles: list[int | None] = []
    for r in rounds.sort_values("round").itertuples():
        drafted = [int(x) for x in r.drafted]
        roles += [drafted[i] if i < len(drafted) else None for i in range(int(r.committed))]
    if len(roles) != n_tokens:
        raise SpecproofError(f"rounds.parquet: run {run_id} commits {len(roles)} tokens in its rounds "
                             f"but runs.parquet holds {n_tokens} ids")
    return roles


def teacher_forced(target: Backend, prompt_ids: list[int], tokens: list[int], temperature: float,
                   draft: Backend | None = None) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
    """(p_t, q_t) at every emitted position, re-scored along the emitted sequence on the
    target-only path, one position per call (and the draft the same way, q_t None
    without one), both at ``temperature``."""
    for backend in (target, draft) if draft is not None else (target,):
        backend.reset()
        if len(prompt_ids) > 1:
            backend.forward(prompt_ids[:-1], last_only=True)
    pending = prompt_ids[-1]
    for x in tokens:
        p = softmax(target.forward([pending])[0], temperature)
        target.synchronize()
        q = softmax(draft.forward([pending])[0], temperature) if draft is not None else None
        yield p, q
        pending = int(x)


def score_sequence(target: Backend, prompt_ids: list[int], tokens: list[int], temperature: float,
                   seed: int, draft: Backend | None = None,
                   roles: list[int | None] | None = None) -> list[tuple[float, float, float, float, float]]:
    """Re-score emitted tokens along their own sequence (``teacher_forced``): per token
    (u_id, u_rank, p(x), F(x-1), u_ratio), one V for every order. ``roles`` (see
    ``position_roles``) marks drafted positions; without it every position is a bonus
    and u_ratio = u_rank."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 3])))
    roles = [None] * len(tokens) if roles is None else roles
    use_draft = draft is not None and any(r is not None for r in roles)
    out = []
    scored = teacher_forced(target, prompt_ids, tokens, temperature, draft if use_draft else None)
    for x, proposal, (p, q) in zip(tokens, roles, scored):
        v = rng.random()
        u, u_rank, px, below = pit_one(p, int(x), v)
        if proposal is None:  # a bonus position: rank order
            u_ratio = u_rank
        else:
            u_ratio = pit_ordered(p, int(x), v, ratio_key(p, q, None if q is not None else proposal))
        out.append((u, u_rank, px, below, u_ratio))
    return out


CHI2_BINS = 10


def uniformity(u: np.ndarray, bins: int = CHI2_BINS) -> dict:
    """KS and equal-width binned chi-square tests of u against U(0,1)."""
    u = np.asarray(u, dtype=np.float64)
    if u.size < 2:
        return {"n_tokens": int(u.size), "ks_stat": float("nan"), "ks_pvalue": float("nan"),
                "chi2_stat": float("nan"), "chi2_pvalue": float("nan")}
    ks = stats.kstest(u, "uniform")
    counts, _ = np.histogram(u, bins=bins, range=(0.0, 1.0))
    chi = stats.chisquare(counts)
    return {"n_tokens": int(u.size), "ks_stat": float(ks.statistic), "ks_pvalue": float(ks.pvalue),
            "chi2_stat": float(chi.statistic), "chi2_pvalue": float(chi.pvalue), "chi2_bins": bins}


PIT_COLUMNS = ["run_id", "pair", "target", "path", "config", "workload", "prompt_id", "t", "token",
               "p_token", "cdf_below", "u", "u_rank", "u_ratio", "ratio_order"]


# The certificate's decision rule: every test of the family, each at alpha / m.
RULE_TESTS = (("KS, id order", "ks_pvalue"), ("chi-square, id order", "chi2_pvalue"),
              ("KS, rank order", "rank_ks_pvalue"), ("chi-square, rank order", "rank_chi2_pvalue"),
              ("KS, ratio order", "ratio_ks_pvalue"), ("chi-square, ratio order", "ratio_chi2_pvalue"))


def rule_decision(pvalues: dict[str, float | None], alpha: float) -> dict:
    """The whole-family rule: reject exactness when any recorded test's p-value is below
    alpha / m, m the number of recorded tests (a test whose order a record set lacks,
    p = None, is left out and m shrinks). Bonferroni bounds the family-wise error by
    alpha whatever the dependence between the tests, which here is strong (all six read
    the same tokens and V_t); the calibration measures how far below alpha its actual size
    falls. A combination calibrated to the dependence (min-p against its simulated null)
    would be less conservative, but its threshold would itself be an estimate from the
    mock, not a guarantee on the real pairs. ``pvalues`` maps a column of RULE_TESTS to
    its p-value."""
    tests = {name: pvalues[col] for name, col in RULE_TESTS
             if pvalues.get(col) is not None and np.isfinite(pvalues[col])}
    if not tests:
        return {"tests": 0, "level": float("nan"), "min_pvalue": float("nan"),
                "min_pvalue_test": "none", "rejected": False}
    level = alpha / len(tests)
    smallest = min(tests, key=tests.get)
    return {"tests": len(tests), "level": level, "min_pvalue": float(tests[smallest]),
            "min_pvalue_test": smallest, "rejected": bool(tests[smallest] < level)}


def order_pvalues(u: np.ndarray, u_rank: np.ndarray, u_ratio: np.ndarray | None) -> dict:
    """The p-values of RULE_TESTS for one set of PIT values (ratio ones None when the
    ratio order is not recorded)."""
    res, rank = uniformity(u), uniformity(u_rank)
    ratio = uniformity(u_ratio) if u_ratio is not None else {"ks_pvalue": None, "chi2_pvalue": None}
    return {"ks_pvalue": res["ks_pvalue"], "chi2_pvalue": res["chi2_pvalue"],
            "rank_ks_pvalue": rank["ks_pvalue"], "rank_chi2_pvalue": rank["chi2_pvalue"],
            "ratio_ks_pvalue": ratio["ks_pvalue"], "ratio_chi2_pvalue": ratio["chi2_pvalue"]}


def score_runs(study: Study, prompt_set: list[dict], runs: pd.DataFrame, out: Path,
               rounds: pd.DataFrame | None = None) -> None:
    """Level 3: PIT of every token of every sampled speculative run, and of the first
    target-only run of each sampled block as a control, scored on the target-only path,
    in id, rank and (with ``rounds``) ratio order; ``ratio_order`` names the order of
    each position ('ratio', 'proposal' or 'rank')."""
    sampled = runs[runs["temperature"] > 0]
    blocks = ["pair", "prompt_id", "rep", "temperature"]
    first_control = sampled[sampled["path"] == "target"].groupby(blocks)["order"].idxmin()
    sampled = sampled[(sampled["path"] == "speculative") | sampled.index.isin(first_control)]
    by_run = {k: g for k, g in rounds.groupby("run_id")} if rounds is not None else {}
    prompts = {r["id"]: r for r in prompt_set}
    names = [t for t in study.target_names if (sampled["target"] == t).any()]
    pool, rows = ModelPool(study), []
    for tname, target in pool.each_target(names):
        sub = sampled[sampled["target"] == tname]
        for r in tqdm(list(sub.itertuples()), desc=f"pit {tname}", unit="run"):
            ids = prompt_ids(target, prompts[r.prompt_id])
            tokens = [int(x) for x in r.ids]
            roles = (position_roles(by_run[r.run_id], len(tokens), r.run_id)
                     if r.path == "speculative" and r.run_id in by_run else None)
            draft = pool.draft_backend(r.draft) if roles is not None else None
            scored = score_sequence(target, ids, tokens, r.temperature, seed=seed_from(r.run_id),
                                    draft=draft, roles=roles)
            for t, (u, u_rank, px, below, u_ratio) in enumerate(scored):
                drafted = roles is not None and roles[t] is not None
                rows.append({"run_id": r.run_id, "pair": r.pair, "target": tname, "path": r.path,
                             "config": r.config, "workload": r.workload, "prompt_id": r.prompt_id,
                             "t": t, "token": tokens[t], "p_token": px, "cdf_below": below, "u": u,
                             "u_rank": u_rank, "u_ratio": u_ratio,
                             "ratio_order": ("ratio" if draft is not None else "proposal") if drafted else "rank"})
    # a greedy-only grid has no sampled run: an empty table that still has its columns
    write_parquet(pd.DataFrame(rows, columns=PIT_COLUMNS), out)
