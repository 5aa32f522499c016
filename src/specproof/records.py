"""Reading and writing records: parquet tables and canonical JSON, with hashing, and the
seal on the target-only reference that every later stage checks (``check_seal``)."""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import SpecproofError


# errno values of a write refused because the device is full (or the user's quota or
# the largest file size reached): the run can do nothing but stop, in one line
FULL_DEVICE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def write_error(path: Path, exc: OSError) -> OSError | SpecproofError:
    """The error to raise for ``exc``, raised while writing ``path``: where the device is
    full (``FULL_DEVICE``) a SpecproofError naming ``path`` (the CLI prints it as one
    line, exit 2), else ``exc`` itself."""
    if exc.errno not in FULL_DEVICE:
        return exc
    return SpecproofError(f"{path}: not written: {os.strerror(exc.errno).lower()} "
                          "(free space and run it again; the records written before are kept)")


@contextmanager
def atomic_path(path: Path):
    """A temporary path beside ``path`` to write to; renamed over ``path`` only when the
    block finishes, so an interrupted write never leaves a half-written record and a
    failed one leaves the previous ``path`` as it was. A full device is one line
    (``write_error``)."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; records are for every reader
        yield Path(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise write_error(path, exc) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False, compression="zstd")


def read_parquet(path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except FileNotFoundError:
        raise SpecproofError(f"{path}: record does not exist") from None
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise SpecproofError(f"{path}: not a readable parquet record ({type(exc).__name__})") from None


def utc_stamp() -> str:
    """Now, UTC, ISO 8601 to the microsecond (records order events by it)."""
    import datetime as dt
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


def canonical_json(obj) -> str:
    """The compact, key-sorted JSON that ids are hashed as (never written as a record; kept
    byte-for-byte as it was, so hashes recorded in frozen sets still match)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_default)


def json_scalar(v):
    """A number for numbers.json and benchmark records: numpy scalars unwrapped,
    non-finite floats as null."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def finite_json(obj):
    """``obj`` with numpy scalars and arrays unwrapped and every non-finite float (NaN,
    +-Infinity, also inside dicts, lists and arrays) replaced by None, so that
    ``json.dumps(..., allow_nan=False)`` prints strict JSON (NaN is not JSON)."""
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return finite_json(obj.tolist())
    return json_scalar(obj)


MISSING = "\u2013"  # how text output shows a value that does not exist (JSON: null)


def num(x, spec: str = ".2f") -> str:
    """``x`` formatted by ``spec`` for one-line text outputs, or ``MISSING`` where it does
    not exist (None, NaN), as ``strict_json`` writes null."""
    return MISSING if x is None or x != x else format(x, spec)


def models_by_role(models: dict) -> dict[tuple[str, str], dict]:
    """A set's models.json entries by (role, name in the study config), role ``target`` or
    ``draft``. An entry names them in its ``role`` and ``config_name`` fields; sets written
    before those fields carry them only in the entry's key, ``<role>:<name>``, which is read
    here and nowhere else."""
    out = {}
    for key, entry in models.items():
        role, name = (entry["role"], entry["config_name"]) if "role" in entry else key.split(":", 1)
        out[(role, name)] = entry
    return out


def strict_json(obj, **kwargs) -> str:
    """``obj`` as strict JSON: non-finite floats written as null (``finite_json``), and
    ``allow_nan=False`` so that one slipping past that fails loudly instead of writing a
    bare NaN that strict parsers (and Typst) refuse."""
    return json.dumps(finite_json(obj), allow_nan=False, default=_default, **kwargs)


def _default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def write_json(obj, path: Path) -> None:
    """``obj`` written as strict JSON (non-finite floats as null, see ``strict_json``):
    every JSON record of the project is written here."""
    text = strict_json(obj, indent=1, sort_keys=True) + "\n"
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def read_jsonl(path: Path) -> list[dict]:
    """The records of a JSON-lines file (blank lines skipped)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def read_json(path: Path):
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise SpecproofError(f"{path}: record does not exist") from None
    except json.JSONDecodeError as exc:
        raise SpecproofError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def seed_from(text: str) -> int:
    """A 32-bit seed from a string: the first 8 hex digits of its sha256."""
    return int(sha256_text(text)[:8], 16)


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes (hex), streamed by ``hashlib.file_digest``."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


# ---------------------------------------------------------------- the reference seal

def reference_ids_sha256(df: pd.DataFrame) -> str:
    """sha256 of the canonical (target, prompt_id, ids) rows of a reference table."""
    rows = sorted((r.target, r.prompt_id, [int(x) for x in r.ids]) for r in df.itertuples())
    return sha256_text(canonical_json(rows))


def check_seal(reference: Path, seal: Path) -> pd.DataFrame:
    """The sealed reference, or an error naming the file whose content changed."""
    sealed = read_json(seal)
    df = read_parquet(reference)
    actual = reference_ids_sha256(df)
    if actual != sealed.get("ids_sha256"):
        raise SpecproofError(f"{reference}: reference ids changed since they were sealed in {seal} "
                             f"(ids_sha256 {actual[:12]} != sealed {str(sealed.get('ids_sha256'))[:12]}); "
                             "refusing to run against a changed reference")
    return df
