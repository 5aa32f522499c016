"""Audit checks of the certificate family: every PIT row of pit.parquet within its bounds,
drawn with its run's seed, and equal to the rows that score the same token after the
same prefix.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import SpecproofError
from ...records import read_parquet
from .registry import SetAudit, register


PIT_TOL = 1e-9  # float tolerance of a PIT value's bounds


def check_pit_bounds(dest: Path) -> None:
    """Every pit.parquet row: cdf_below <= u <= cdf_below + p_token (u = F(x-1) + V p(x));
    the rank and ratio orders share V, so u_rank - V p(x) and u_ratio - V p(x) (the mass
    their order puts below x) lie in [0, 1 - p_token]; all within ``PIT_TOL``."""
    pit = read_parquet(dest / "pit.parquet")
    if pit.empty:
        return
    vp = pit["u"] - pit["cdf_below"]
    bad = (vp < -PIT_TOL) | (vp > pit["p_token"] + PIT_TOL) | vp.isna()
    _pit_error(dest, pit, bad, "u", "outside [cdf_below, cdf_below + p_token]")
    for col in ("u_rank", "u_ratio"):
        if col in pit:
            below = pit[col] - vp
            bad = pit[col].notna() & ((below < -PIT_TOL) | (below > 1 - pit["p_token"] + PIT_TOL))
            _pit_error(dest, pit, bad, col, f"{col} - (u - cdf_below) outside [0, 1 - p_token]")


def check_pit_draws(dest: Path) -> None:
    """Every pit.parquet row's V is the one its run's seed draws: the re-scoring draws V_t
    for token t = 0, 1, ... from PCG64(SeedSequence([seed_from(run_id), 3])), so
    u = cdf_below + V_t p_token within ``PIT_TOL`` (u_rank and u_ratio share V_t and are
    bound to u by ``check_pit_bounds``)."""
    from ...records import seed_from
    pit = read_parquet(dest / "pit.parquet")
    if pit.empty or "t" not in pit:
        return
    want = pd.Series(np.nan, index=pit.index)
    for run_id, rows in pit.groupby("run_id", sort=False):
        rows = rows.sort_values("t")
        v = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed_from(run_id), 3]))).random(
            int(rows["t"].max()) + 1)
        want[rows.index] = rows["cdf_below"].to_numpy() + v[rows["t"].to_numpy()] * rows["p_token"].to_numpy()
    bad = (pit["u"] - want).abs() > PIT_TOL
    _pit_error(dest, pit, bad, "u", "not cdf_below + V p_token with the V its run's seed draws")


def check_pit_prefixes(dest: Path) -> None:
    """pit.parquet rows that score the same token after the same prefix (same target,
    prompt and temperature, the run's ids up to and including position t) hold the same
    p_token and cdf_below: the scoring is deterministic (so in every frozen set), so a
    position moved in one run stands out against the runs that share its prefix."""
    pit = read_parquet(dest / "pit.parquet")
    if pit.empty:
        return
    runs = read_parquet(dest / "runs.parquet").set_index("run_id")
    ids, temp = runs["ids"], runs["temperature"]
    key = pd.Series([(r.target, r.prompt_id, float(temp[r.run_id]), tuple(int(x) for x in ids[r.run_id][:r.t + 1]))
                     for r in pit.itertuples()], index=pit.index)
    groups = key.map(hash)
    for col in ("p_token", "cdf_below"):
        off = pit[col] != pit[col].groupby(groups).transform("first")
        if off.any():
            i = off.idxmax()
            j = pit.index[(groups == groups[i]) & ~off][0]
            raise SpecproofError(f"{dest / 'pit.parquet'}: rows {j} and {i}, field {col}: {float(pit.at[j, col])!r} "
                                 f"and {float(pit.at[i, col])!r} for the same token after the same prefix (target, "
                                 "prompt, temperature, run ids up to t); the scoring is deterministic")


def _pit_error(dest: Path, pit: pd.DataFrame, bad: pd.Series, col: str, why: str) -> None:
    if bad.any():
        i = bad.idxmax()
        raise SpecproofError(f"{dest / 'pit.parquet'}: row {i}, field {col} is {float(pit.loc[i, col])!r}: {why} "
                             f"(cdf_below {float(pit.loc[i, 'cdf_below'])!r}, p_token {float(pit.loc[i, 'p_token'])!r})")


@register("pit_bounds", ("pit.parquet",), "every PIT value lies between its token's cdf_below and cdf_below + "
          "p_token, in each order")
def _pit_bounds(s: SetAudit) -> None:
    check_pit_bounds(s.dest)


@register("pit_draws", ("pit.parquet",), "every PIT value uses the uniform draw its run's seed gives, so the "
          "values cannot be chosen")
def _pit_draws(s: SetAudit) -> None:
    check_pit_draws(s.dest)


@register("pit_prefixes", ("pit.parquet", "runs.parquet"), "PIT rows scoring the same token after the same "
          "prefix hold the same p_token and cdf_below, so a position moved in one run stands out")
def _pit_prefixes(s: SetAudit) -> None:
    check_pit_prefixes(s.dest)
