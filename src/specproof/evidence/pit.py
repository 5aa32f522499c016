"""Randomized probability integral transform (PIT) of emitted tokens.

For token x_t emitted at step t with target next-token distribution p_t (after the same
temperature transform, vocabulary in id order, F_t its CDF):

    u_t = F_t(x_t - 1) + V_t * p_t(x_t),   V_t ~ U(0, 1) i.i.d. from a seeded generator.

If every x_t was drawn from p_t, the u_t are i.i.d. U(0, 1) whatever the dependence
between tokens (the sequential PIT argument of Diebold, Gunther & Tay 1998, randomized
for discrete outcomes; Brockwell 2007). Scoring uses the target-only execution path:
one position per call, exactly as target-only sampling scores them.

Any ordering of the vocabulary fixed before x_t is drawn keeps the null exact. We
report two: id order (the stated certificate) and probability-rank order (tokens sorted
by p_t descending, ties by id), under which a temperature or residual error moves mass
monotonically and is far easier to detect.

``uniformity`` tests a set of u against U(0, 1) (KS and binned chi-square), for the
calibration on the mock and the certificate alike; ``score_runs`` scores a study's
sampled runs (the ``pit`` stage).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from tqdm import tqdm

from ..decode.backend import Backend
from ..decode.sampling import softmax
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


def score_sequence(target: Backend, prompt_ids: list[int], tokens: list[int], temperature: float,
                   seed: int) -> list[tuple[float, float, float, float]]:
    """Re-score emitted tokens along their own sequence on the target-only path."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 3])))
    target.reset()
    if len(prompt_ids) > 1:
        target.forward(prompt_ids[:-1], last_only=True)
    pending, out = prompt_ids[-1], []
    for x in tokens:
        logits = target.forward([pending])[0]
        target.synchronize()
        out.append(pit_one(softmax(logits, temperature), int(x), rng.random()))
        pending = int(x)
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
               "p_token", "cdf_below", "u", "u_rank"]


def score_runs(study: Study, prompt_set: list[dict], runs: pd.DataFrame, out: Path) -> None:
    """Level 3: PIT of every token of every sampled speculative run, and of the first
    target-only run of each sampled block as a control, scored on the target-only path."""
    sampled = runs[runs["temperature"] > 0]
    blocks = ["pair", "prompt_id", "rep", "temperature"]
    first_control = sampled[sampled["path"] == "target"].groupby(blocks)["order"].idxmin()
    sampled = sampled[(sampled["path"] == "speculative") | sampled.index.isin(first_control)]
    prompts = {r["id"]: r for r in prompt_set}
    names = [t for t in study.target_names if (sampled["target"] == t).any()]
    pool, rows = ModelPool(study), []
    for tname, target in pool.each_target(names):
        sub = sampled[sampled["target"] == tname]
        for r in tqdm(list(sub.itertuples()), desc=f"pit {tname}", unit="run"):
            ids = prompt_ids(target, prompts[r.prompt_id])
            scored = score_sequence(target, ids, [int(x) for x in r.ids], r.temperature,
                                    seed=seed_from(r.run_id))
            for t, (u, u_rank, px, below) in enumerate(scored):
                rows.append({"run_id": r.run_id, "pair": r.pair, "target": tname, "path": r.path,
                             "config": r.config, "workload": r.workload, "prompt_id": r.prompt_id,
                             "t": t, "token": int(r.ids[t]), "p_token": px, "cdf_below": below, "u": u,
                             "u_rank": u_rank})
    # a greedy-only grid has no sampled run: an empty table that still has its columns
    write_parquet(pd.DataFrame(rows, columns=PIT_COLUMNS), out)
