"""Audit checks of the endpoints family (H, Q and P, the three agreement endpoints): stored
verdicts and copied ids against the ids they stand for, and the margins at divergences.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...errors import SpecproofError
from ...records import read_parquet
from .common import first_difference, plain, short
from .registry import SetAudit, register


def check_qualification_q(dest: Path, reference: pd.DataFrame) -> None:
    """qualification.parquet's stored ``ids_equal`` of every run equals Q recomputed from
    the run's ids against the sealed reference (the numbers use the recomputed Q)."""
    from ...analysis.agreement import recomputed_q
    qual = read_parquet(dest / "qualification.parquet")
    if "ids_equal" not in qual or qual.empty:
        return
    q = recomputed_q(qual, reference)
    bad = qual.index[qual["ids_equal"].astype(bool) != q]
    if len(bad):
        r = qual.loc[bad[0]]
        raise SpecproofError(
            f"{dest / 'qualification.parquet'}: field ids_equal of row {bad[0]} ({r['target']} "
            f"{r['verify_mode']} {r['prompt_id']} rep {r.get('rep')}) is {bool(r['ids_equal'])}, its ids "
            f"against the sealed reference.parquet give {bool(q[bad[0]])} "
            f"(qualification.{r['target']}.{r['verify_mode']}.matched)")


def check_qualification_twins(dest: Path, set_id: str) -> str | None:
    """Every batched qualification run with a twin in the timed grid (runs.parquet: the
    same target and draft, prompt and K, fixed policy, greedy, batched) decoded the twin's
    ids: one deterministic computation run twice. So Q cannot be moved by editing the
    qualification ids (and ids_equal to match) alone. Returns the report line naming how
    many batched qualification runs have no twin (those are held only by the set's seals:
    a set whose qualification K is not in its grid for that target), None when all have."""
    qual = read_parquet(dest / "qualification.parquet")
    if qual.empty or "ids" not in qual:
        return None
    runs = read_parquet(dest / "runs.parquet")
    grid = runs[(runs["path"] == "speculative") & (runs["policy"] == "fixed") & (runs["verify_mode"] == "batched")
                & (runs["temperature"] == 0)]
    keys = ["target", "draft", "prompt_id", "k"]
    batched = qual[qual["verify_mode"] == "batched"].reset_index()
    both = batched.merge(grid[keys + ["ids", "run_id"]], on=keys, suffixes=("", "_grid"))
    for r in both.itertuples():
        if list(r.ids) != list(r.ids_grid):
            raise SpecproofError(f"{dest / 'qualification.parquet'}: field ids of row {r.index} ({r.target} batched "
                                 f"{r.prompt_id} rep {r.rep}) differ from its twin's in runs.parquet ({r.run_id}), "
                                 "the same greedy batched computation (qualification."
                                 f"{r.target}.batched.matched)")
    untwinned = len(batched) - both["index"].nunique()
    if untwinned:
        return (f"{set_id}: {untwinned} of {len(batched)} batched qualification runs have no twin in the timed "
                "grid (their K is not in the grid for their target): their ids are held by the seals alone")
    return None


def check_prediction_live(dest: Path) -> None:
    """prediction_live.parquet, where the set holds it, is row for row the reserved
    live runs of qualification.parquet (P is computed from the latter's ids)."""
    from ...evidence.prediction import load_sealed, reserved_live
    if not (dest / "prediction_live.parquet").is_file():
        return
    doc, _ = load_sealed(dest / "predictions.json", dest / "prediction_seal.json")
    want = reserved_live(read_parquet(dest / "qualification.parquet"), doc["reserved_prompts"])
    diff = first_difference(plain(read_parquet(dest / "prediction_live.parquet")), plain(want), "both")
    if diff:
        where, have, want = diff
        raise SpecproofError(f"{dest / 'prediction_live.parquet'}: {where} is {short(have)}, but "
                             f"{short(want)} in the qualification.parquet run it copies; P "
                             "(prediction.P_matched) is computed from qualification.parquet's ids")


def check_margins(dest: Path, reference: pd.DataFrame) -> None:
    """margins.parquet, where the set holds it, scores exactly the first divergences of the
    greedy runs' and the qualification's ids from the sealed reference (``divergences``):
    a run whose ids were rewritten to the reference leaves its margin row behind, and a
    divergence written in leaves none."""
    from ...evidence.reference import divergences
    if not (dest / "margins.parquet").is_file():
        return
    want = divergences(read_parquet(dest / "runs.parquet"), read_parquet(dest / "qualification.parquet"), reference)
    have = read_parquet(dest / "margins.parquet")
    key = lambda df: {(r.target, r.prompt_id, int(r.index)) for r in df.itertuples()}  # noqa: E731
    extra, missing = sorted(key(have) - key(want)), sorted(key(want) - key(have))
    if extra:
        raise SpecproofError(f"{dest / 'margins.parquet'}: row {extra[0]} scores a divergence that no greedy run "
                             "or qualification run of runs.parquet and qualification.parquet has from the sealed "
                             "reference (agreement.parquet's top2_margin)")
    if missing:
        raise SpecproofError(f"{dest / 'margins.parquet'}: field top2_margin is missing for the divergence "
                             f"{missing[0]} of runs.parquet or qualification.parquet from the sealed reference")


@register("qualification_q", ("qualification.parquet", "reference.parquet"), "every qualification run's stored "
          "ids_equal is Q recomputed from its ids against the sealed reference")
def _qualification_q(s: SetAudit) -> None:
    check_qualification_q(s.dest, s.reference)


@register("qualification_twins", ("qualification.parquet", "runs.parquet"), "every batched qualification run "
          "with a twin in the timed grid decoded the twin's ids, so Q cannot be moved by editing the "
          "qualification ids alone")
def _qualification_twins(s: SetAudit) -> None:
    s.lines.append(check_qualification_twins(s.dest, s.set_id))


@register("prediction_live", ("prediction_live.parquet", "qualification.parquet", "predictions.json",
                              "prediction_seal.json"),
          "prediction_live.parquet is row for row the reserved live runs of qualification.parquet, whose ids P "
          "is computed from")
def _prediction_live(s: SetAudit) -> None:
    check_prediction_live(s.dest)


@register("margins", ("margins.parquet", "runs.parquet", "qualification.parquet", "reference.parquet"),
          "margins.parquet scores exactly the first divergences of the greedy and qualification runs from the "
          "sealed reference, so a rewritten run leaves its margin behind")
def _margins(s: SetAudit) -> None:
    check_margins(s.dest, s.reference)
