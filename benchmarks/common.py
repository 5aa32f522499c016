"""Shared helpers for benchmarks: prompts, timing, and writing result tables with the
machine's provenance and the exact command."""
from __future__ import annotations

import dataclasses
import functools
import json
import shlex
import sys
import time
from pathlib import Path

import pandas as pd

from specproof.errors import SpecproofError
from specproof.evidence.provenance import capture
from specproof.publish import benchtables
from specproof.publish.benchvalues import spread
from specproof.records import read_json, read_parquet
from specproof.study.config import Study, load_study

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parents[1]
CODE_PROMPTS = [
    'def is_palindrome(text: str) -> bool:\n    """Return True if text reads the same forwards and backwards."""\n',
    'def merge_sorted(a: list[int], b: list[int]) -> list[int]:\n    """Merge two sorted lists into one sorted list."""\n',
]
CHAT_PROMPTS = [
    "Give three tips for writing clear technical documentation.",
    "Explain what a hash table is to a new programmer.",
]


def sampled_runs(set_dir: Path) -> pd.DataFrame:
    """The sampled (T > 0) speculative runs of a record set."""
    runs = read_parquet(set_dir / "runs.parquet")
    return runs[(runs["temperature"] > 0) & (runs["path"] == "speculative")]


def checked_study(config: Path, set_dir: Path, model_dir: Path) -> Study:
    """The study config the set was run from: its settings and models must be the ones the
    set's provenance records (comments may have been added since), else the models
    run might not be the set's."""
    study = dataclasses.replace(load_study(config), model_dir=model_dir)
    recorded = read_json(set_dir / "provenance.json")["study"]["config"]
    if json.loads(json.dumps(study.data)) != recorded:
        raise SpecproofError(f"{config}: not the study config {set_dir}/provenance.json records "
                             "(field study.config)")
    return study


def chosen_setups(ap, value: str, known) -> list[str]:
    """The comma-separated setup names of ``value``, in order; an unknown one is the
    parser's error (one line, exit 2)."""
    names = value.split(",")
    unknown = sorted(set(names) - set(known))
    if unknown:
        ap.error(f"unknown setup(s) {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def paired_times(ours, theirs, repeats: int) -> tuple[dict[str, list[float]], dict]:
    """Wall seconds of ``repeats`` paired calls after one warm-up each, the order
    alternating within pairs (ours/theirs, theirs/ours, ...) so slow drift hits both;
    also the last return value of each."""
    fns = {"ours": ours, "theirs": theirs}
    out = {name: fn() for name, fn in fns.items()}  # warm-up
    times = {name: [] for name in fns}
    for r in range(repeats):
        for name in (("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")):
            t0 = time.perf_counter()
            out[name] = fns[name]()
            times[name].append(time.perf_counter() - t0)
    return times, out


def ratio_summary(times: dict[str, list[float]]) -> tuple[float, float, float]:
    """ours/theirs speed per pair (theirs time / ours time): (median, lower quartile,
    upper quartile). Pairing cancels the machine's slow drift."""
    return spread([t / o for o, t in zip(times["ours"], times["theirs"])])


def goal_note(rows: list[tuple[str, float, float, float]], goal: float) -> str:
    """Which (label, median, q1, q3) rows miss ``goal``, and whether each miss lies within
    the pair-to-pair spread (upper quartile >= goal) or beyond it."""
    missed = [r for r in rows if r[1] < goal]
    if not missed:
        return f"Goal >= {goal} met on all {len(rows)} rows."
    parts = [f"{label} {med:.3f} (quartiles {q1:.3f}-{q3:.3f}: "
             + ("the upper quartile reaches the goal, so the miss is within this machine's pair-to-pair noise)"
                if q3 >= goal else "even the upper quartile is below the goal: a gap beyond the noise)")
             for label, med, q1, q3 in missed]
    return f"Goal >= {goal} met on {len(rows) - len(missed)} of {len(rows)} rows; below it: " + "; ".join(parts) + "."


@functools.cache
def provenance() -> dict:
    """Captured once per run: a benchmark that writes two tables must not record the
    first table's files as a dirty tree in the second's provenance; one that writes
    records before its table calls this first, for the same reason."""
    return capture(Path(__file__).resolve().parents[1], bandwidth=True)


def write_table(name: str, title: str, header: list[str], rows: list[list], notes: list[str],
                values: dict[str, tuple], samples: tuple[str, list[dict]] | None = None) -> Path:
    """results/<name>.md and .json (specproof.publish.benchtables); ``values`` are the numbers
    the paper cites, key -> (value, unit); ``samples`` (kind, raw samples) what they are
    recomputed from."""
    command = " ".join(shlex.quote(a) for a in [sys.executable.split("/")[-1], *sys.argv])
    prov = provenance()
    out = benchtables.write_table(RESULTS, name, title, header, rows, notes, values, command, prov, samples)
    print(out.read_text())
    return out


def add_set_flags(ap) -> None:
    """--set, --config and --model-dir of a benchmark that reads a frozen record set
    (default: the paper's head set, its study config and the checkout's model files)."""
    ap.add_argument("--set", type=Path, default=ROOT / "manifests/paper-qwen-v2/epyc-avx512")
    ap.add_argument("--config", type=Path, default=ROOT / "config/studies/paper-qwen-v2.yaml")
    ap.add_argument("--model-dir", type=Path, default=ROOT / "resources/models")
