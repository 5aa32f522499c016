"""What the audit checks in a frozen record set before it recomputes the set's numbers:
that the set holds every raw record its manifest format promises, that its provenance is
the one its manifest was frozen from, that stored verdicts and copies of ids agree with
the ids they stand for, and that every frozen summary and derived file equals its
recomputation from the raw records. A failure is one ``SpecproofError`` line naming the
file and the field (or row) at fault.

Manifest formats (``catalog``: each record's ``since``): format 1 holds the records of
sets frozen before the stages wrote the raw records behind their summaries; format 2 adds
those raw records (``catalog.newer_records``). ``freeze`` records
the format since it was introduced; an older manifest's is inferred from the records it
lists, and a format-1 set is named in the audit report with the records it predates.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..catalog import FORMATS, MANIFEST_FORMAT, computed_from, format_records, needed_for, newer_records
from ..errors import SpecproofError
from ..records import read_json, read_parquet
from .audit_anchors import (_short, check_legacy, check_micro_medians, check_pit_bounds, check_pit_draws,
                            check_pit_prefixes, check_run_identities, check_run_timings, check_seal_hashes,
                            check_time_chain)
from .manifests import split_set

REL, ABS = 1e-9, 1e-12  # float tolerance of a recomputation, as for numbers.json
# A bootstrap interval over a few prompts has a discrete bootstrap distribution: a last-bit
# difference in the sums (another CPU's SIMD path) can pick the neighbouring resample as
# its endpoint (cpu-smollm2@epyc-avx2's stats.json, written on that machine, differs from a
# recomputation here by up to 2% in three endpoints). Endpoints are compared within
# INTERVAL_REL and must lie on the same side of 1 (the verdict); all else within REL.
INTERVAL_FIELDS, INTERVAL_REL = ("ci_low", "ci_high"), 0.05


def manifest_format(manifest: dict) -> tuple[int, str]:
    """(format, 'recorded' | 'inferred'): the manifest's recorded ``format``, else the
    format its listed records show: 2 when it lists any record format 2 added, else 1."""
    if "format" in manifest:
        return int(manifest["format"]), "recorded"
    return (2 if set(manifest["files"]) & set(newer_records()) else 1), "inferred"


def check_records(manifest: dict, dest: Path) -> int:
    """Every record the manifest's format holds is listed (a missing raw record is an
    error, never a silent fall-back to a summary), a set lacking any record of the current
    format is one of the legacy sets (``audit_anchors.LEGACY_SETS``), and no record the analysis would read
    lies in the set unlisted (unhashed). Returns the format."""
    fmt, how = manifest_format(manifest)
    if fmt not in FORMATS:
        raise SpecproofError(f"{dest / 'manifest.json'}: field format: unknown manifest format {fmt!r} "
                             f"(known: {', '.join(map(str, FORMATS))})")
    listed = set(manifest["files"])
    for name in format_records(fmt):
        if name not in listed:
            raise SpecproofError(f"{dest / name}: missing from a set of manifest format {fmt} ({how}), "
                                 f"which holds it; {needed_for(name)} are computed from it")
    check_legacy(dest, fmt, [f for f in format_records() if f not in listed])
    for name in format_records():
        if name not in listed and (dest / name).exists():
            raise SpecproofError(f"{dest / name}: not listed in {dest / 'manifest.json'} (unhashed), "
                                 "yet the analysis would read it")
    return fmt


def format_line(set_id: str, manifest: dict) -> str | None:
    """The report's line naming a set frozen before some raw records were written, or None."""
    fmt, how = manifest_format(manifest)
    lacks = [f for f in format_records() if f not in format_records(fmt)]
    if not lacks:
        return None
    return (f"{set_id}: manifest format {fmt} ({how}), frozen before {', '.join(lacks)} were "
            "written; the numbers computed from them come from the stage summaries")


def check_provenance(manifest: dict, dest: Path, set_id: str) -> None:
    """provenance.json is the provenance the manifest was frozen from: its git commit and
    dirty flag equal the manifest's ``git``, its sha256 the manifest's
    ``provenance_sha256``; the record does not contradict its own CPU
    (``fingerprint.cpu_contradiction``); the manifest's study (and machine, where recorded)
    is the set's."""
    prov, path = read_json(dest / "provenance.json"), dest / "provenance.json"
    for field in ("commit", "dirty"):
        have, want = (prov.get("git") or {}).get(field), (manifest.get("git") or {}).get(field)
        if have != want:
            raise SpecproofError(f"{path}: field git.{field} is {have!r}, the manifest's git.{field} "
                                 f"is {want!r} ({dest / 'manifest.json'})")
    if manifest.get("provenance_sha256") != manifest["files"]["provenance.json"]["sha256"]:
        raise SpecproofError(f"{dest / 'manifest.json'}: field provenance_sha256 is not the sha256 of "
                             f"the provenance.json it lists")
    from ..evidence.fingerprint import cpu_contradiction
    contradiction = cpu_contradiction(prov)
    if contradiction:
        raise SpecproofError(f"{path}: {contradiction}")
    study, machine = split_set(set_id)
    for field, want in (("study", study), ("machine", machine)):
        if field in manifest and manifest[field] != want:
            raise SpecproofError(f"{dest / 'manifest.json'}: field {field} is {manifest[field]!r}, "
                                 f"the record set is {set_id!r}")


def check_qualification_q(dest: Path, reference: pd.DataFrame) -> None:
    """qualification.parquet's stored ``ids_equal`` of every run equals Q recomputed from
    the run's ids against the sealed reference (the numbers use the recomputed Q)."""
    from ..analysis.agreement import recomputed_q
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


def check_margins(dest: Path, reference: pd.DataFrame) -> None:
    """margins.parquet, where the set holds it, scores exactly the first divergences of the
    greedy runs' and the qualification's ids from the sealed reference (``divergences``):
    a run whose ids were rewritten to the reference leaves its margin row behind, and a
    divergence written in leaves none."""
    from ..evidence.reference import divergences
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


def check_prediction_live(dest: Path) -> None:
    """prediction_live.parquet, where the set holds it, is row for row the reserved
    live runs of qualification.parquet (P is computed from the latter's ids)."""
    from ..evidence.prediction import load_sealed, reserved_live
    if not (dest / "prediction_live.parquet").is_file():
        return
    doc, _ = load_sealed(dest / "predictions.json", dest / "prediction_seal.json")
    want = reserved_live(read_parquet(dest / "qualification.parquet"), doc["reserved_prompts"])
    diff = first_difference(plain(read_parquet(dest / "prediction_live.parquet")), plain(want), "both")
    if diff:
        where, have, want = diff
        raise SpecproofError(f"{dest / 'prediction_live.parquet'}: {where} is {_short(have)}, but "
                             f"{_short(want)} in the qualification.parquet run it copies; P "
                             "(prediction.P_matched) is computed from qualification.parquet's ids")


def check_derived(dest: Path, a, fmt: int) -> None:
    """Every frozen derived file (agreement, costs, stats, certificate) and stage summary
    (calibration.json, level1.json, level2.json, prediction.json, advise.parquet) equals
    its recomputation from the raw records, floats within a relative 1e-9. A format-2 set
    must hold exactly the recomputed fields (a summary may hold more: its stage's
    settings); a format-1 set, written by earlier code, is compared on the fields both have."""
    from ..analysis.analyze import derived_records
    current = fmt == MANIFEST_FORMAT
    for name, record in derived_records(a).items():
        _compare_file(dest, name, record, "both" if current else "common", computed_from(name))
    for name, record, source in summaries_of(a):
        if record is not None:
            _compare_file(dest, name, record, "recomputed" if current else "common", source)


def summaries_of(a) -> list[tuple[str, object, str]]:
    """(summary file, its recomputation, the raw records it comes from) for a set's analysis."""
    s = a.sources
    p_from = "qualification.parquet and predictions.json" if s["prediction.P"] == "prediction_live.parquet" \
        else s["prediction.P"]
    return [("calibration.json", a.calibration, f"{s['calibration']} and {s['power']}"),
            ("level1.json", a.level1, s["level1"]), ("level2.json", a.level2, s["level2"]),
            ("prediction.json", a.prediction, p_from),
            ("advise.parquet", a.advise, f"{s['advise.predicted']} and {s['advise.realized']}")]


def _compare_file(dest: Path, name: str, record, keys: str, source: str) -> None:
    path = dest / name
    frozen = read_parquet(path) if name.endswith(".parquet") else read_json(path)
    diff = first_difference(plain(frozen), plain(record), keys)
    if diff:
        where, have, want = diff
        raise SpecproofError(f"{path}: {where} is {_short(have)}; its recomputation from {source} "
                             f"gives {_short(want)}")


def plain(v):
    """``v`` as plain JSON-like values: DataFrames as lists of row dicts, numpy values
    unwrapped, arrays as lists, NaN as None (a strict JSON writer writes it as null)."""
    if isinstance(v, pd.DataFrame):
        return [plain(r) for r in v.to_dict(orient="records")]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [plain(x) for x in v]
    if hasattr(v, "item"):
        v = v.item()
    if v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


class _Absent:
    def __repr__(self) -> str:
        return "absent"


ABSENT = _Absent()


def first_difference(frozen, recomputed, keys: str = "both", where: str = "") -> tuple | None:
    """The first field where two plain values differ, as (field, frozen value, recomputed
    value) with ``ABSENT`` for a missing field, or None. ``keys``: 'both' (each dict's keys
    must agree), 'recomputed' (the recomputed keys must be present), 'common' (only keys
    both hold are compared). Lists compare entry by entry; floats within REL / ABS."""
    if isinstance(frozen, dict) and isinstance(recomputed, dict):
        return _dict_difference(frozen, recomputed, keys, where)
    if isinstance(frozen, list) and isinstance(recomputed, list):
        if len(frozen) != len(recomputed):
            return (f"{where or 'the file'}: number of entries", len(frozen), len(recomputed))
        for i, (x, y) in enumerate(zip(frozen, recomputed)):
            diff = first_difference(x, y, keys, f"{where}[{i}]" if where else f"row {i}")
            if diff:
                return diff
        return None
    return None if _same(frozen, recomputed, where) else (where or "the file", frozen, recomputed)


def _dict_difference(frozen: dict, recomputed: dict, keys: str, where: str) -> tuple | None:
    if keys == "both":
        extra = [k for k in frozen if k not in recomputed]
        if extra:
            return _join(where, extra[0]), frozen[extra[0]], ABSENT
    for k in (k for k in recomputed if k in frozen or keys != "common"):
        if k not in frozen:
            return _join(where, k), ABSENT, recomputed[k]
        diff = first_difference(frozen[k], recomputed[k], keys, _join(where, k))
        if diff:
            return diff
    return None


def _join(where: str, key: str) -> str:
    """'field a.b' at the top of a JSON file, 'row 3, field a' in a table."""
    if not where:
        return f"field {key}"
    return f"{where}, field {key}" if where.startswith("row ") and "field" not in where else f"{where}.{key}"


def _same(x, y, where: str = "") -> bool:
    if x is None or y is None:
        return x is None and y is None
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool) \
            and not isinstance(y, bool):
        if where.endswith(INTERVAL_FIELDS):
            return math.isclose(x, y, rel_tol=INTERVAL_REL) and (x > 1) == (y > 1) and (x < 1) == (y < 1)
        return math.isclose(x, y, rel_tol=REL, abs_tol=ABS)
    return x == y


def audit_records(set_id: str, manifest: dict, dest: Path):
    """Everything above for one set, cheapest first: records, provenance (and the seals'
    hashes of it and of the prompts), the chain of recorded times, Q's stored flags and P's
    copied ids (against the sealed reference and predictions), the identities of every run,
    the margins of its divergences, the PIT rows, then the analysis and the derived files. Returns (the set's analysis,
    report lines)."""
    from ..analysis.analyze import analyze
    from ..records import check_seal
    fmt = check_records(manifest, dest)
    check_provenance(manifest, dest, set_id)
    check_seal_hashes(dest)
    check_time_chain(dest, manifest)
    reference = check_seal(dest / "reference.parquet", dest / "reference.seal.json")
    check_qualification_q(dest, reference)
    twins = check_qualification_twins(dest, set_id)
    check_prediction_live(dest)
    check_run_timings(dest)
    check_run_identities(dest, reference)
    check_margins(dest, reference)
    check_micro_medians(dest)
    check_pit_bounds(dest)
    check_pit_draws(dest)
    check_pit_prefixes(dest)
    a = analyze(dest)
    check_derived(dest, a, fmt)
    lines = [format_line(set_id, manifest), twins]
    return a, [line for line in lines if line]
