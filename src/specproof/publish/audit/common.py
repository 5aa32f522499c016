"""Readers and comparisons the audit's families share: a value cut short for an error line,
the first row where a table breaks an identity, ISO times, the set's n-gram drafts, and
the comparison of a frozen file with its recomputation (floats within ``REL``).
"""
from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import SpecproofError
from ...records import read_json, read_parquet


def short(v) -> str:
    """A value for an error line: its repr (arrays as lists), cut to 60 characters."""
    text = repr(v.tolist() if hasattr(v, "tolist") else v)
    return text if len(text) <= 60 else text[:57] + "..."


def identity_error(path: Path, table: pd.DataFrame, bad: pd.Series, field: str, want: pd.Series, what: str) -> None:
    """One line naming the first row where ``bad`` holds: its ``field`` against ``want``."""
    if bad.any():
        i = bad.idxmax()
        raise SpecproofError(f"{path}: row {i}, field {field} is {short(table.loc[i, field])}; "
                             f"{what} give {short(want[i])}")


def parsed_time(value, where: str) -> dt.datetime:
    """An ISO time (UTC when it names no zone), or an error naming ``where``."""
    try:
        t = dt.datetime.fromisoformat(str(value))
    except ValueError:
        raise SpecproofError(f"{where} is {value!r}, not an ISO time") from None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def ngram_drafts(dest: Path) -> dict[str, dict]:
    """Name -> spec of the drafts in the set's config (provenance.json) that run no model
    (n-gram lookup)."""
    from ...records import read_json
    drafts = read_json(dest / "provenance.json")["study"]["config"].get("drafts") or {}
    return {name: spec for name, spec in drafts.items() if spec.get("kind") == "ngram"}


REL, ABS = 1e-9, 1e-12  # float tolerance of a recomputation, as for numbers.json


# A bootstrap interval over a few prompts has a discrete bootstrap distribution: a last-bit
# difference in the sums (another CPU's SIMD path) can pick the neighbouring resample as
# its endpoint (cpu-smollm2@epyc-avx2's stats.json, written on that machine, differs from a
# recomputation here by up to 2% in three endpoints). Endpoints are compared within
# INTERVAL_REL and must lie on the same side of 1 (the verdict); all else within REL.
INTERVAL_FIELDS, INTERVAL_REL = ("ci_low", "ci_high"), 0.05


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


def compare_file(dest: Path, name: str, record, keys: str, source: str) -> None:
    path = dest / name
    frozen = read_parquet(path) if name.endswith(".parquet") else read_json(path)
    diff = first_difference(plain(frozen), plain(record), keys)
    if diff:
        where, have, want = diff
        raise SpecproofError(f"{path}: {where} is {short(have)}; its recomputation from {source} "
                             f"gives {short(want)}")
