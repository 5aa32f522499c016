"""Audit checks of the benchmarks and figures family: each benchmark table's markdown is
the table its JSON renders, an advise_check table's samples are its records', the JSON
is the committed one, and the paper's own rows.
"""
from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pandas as pd

from ...catalog import of_stage
from ...errors import SpecproofError
from ...records import read_jsonl, read_parquet, sha256_file
from .common import short
from .provenance import committed_sha256
from .registry import Audit, register


def check_bench_tables(benchmarks: Path, tables: dict[Path, dict]) -> int:
    """Every <name>.md in ``benchmarks`` has its <name>.json, and is the table rendered
    from the fields title, command, provenance, header, rows and notes of that JSON
    (``tables``, benchtables.read_tables; a JSON null cell is a NaN the strict writer
    wrote as null). Returns how many tables were checked."""
    from ...evidence.provenance import summary_line
    from ..benchtables import render_markdown
    benchmarks = Path(benchmarks)
    for md in sorted(benchmarks.glob("*.md")) if benchmarks.is_dir() else []:
        if not md.with_suffix(".json").is_file():
            raise SpecproofError(f"{md}: a benchmark table with no {md.with_suffix('.json').name} beside it")
    for path, r in tables.items():
        try:
            render = lambda rows: render_markdown(r["title"], r["command"], summary_line(r["provenance"]),
                                                  r["header"], rows, r["notes"])
            nan_rows = [[math.nan if x is None else x for x in row] for row in r["rows"]]
            candidates = {render(nan_rows), render(r["rows"])}
        except (KeyError, TypeError) as exc:
            raise SpecproofError(f"{path}: field {exc} is missing; the table cannot be rendered") from None
        if path.with_suffix(".md").read_text() not in candidates:
            raise SpecproofError(f"{path.with_suffix('.md')}: differs from the table rendered from {path.name}'s "
                                 "fields header, rows and notes (the table was edited apart from its data)")
    return len(tables)


ADVISE_RECORDS = tuple(of_stage("advise"))  # advise.parquet and the raw records it summarizes


def check_advise_records(tables: dict[Path, dict]) -> None:
    """An advise_check table's samples against the stage records beside it
    (results/<table>/): each pair's k, predicted, low, high, probe and future prompts as
    the study audit's own ``recompute_advise`` gives them from advise_micro, advise_rounds
    and advise_runs.parquet, target_ms_pred and the check's runs as ``advise_sample``
    takes them from the records. So the samples cannot move apart from the records."""
    from ...analysis.summaries import recompute_advise
    for path, record in tables.items():
        if record.get("kind") != "advise_check":
            continue
        d = path.with_suffix("")
        for name in ADVISE_RECORDS:
            if not (d / name).is_file():
                raise SpecproofError(f"{d / name}: missing; {path.name}'s samples are recomputed from it")
        summary, micro, rounds, runs = (read_parquet(d / name) for name in ADVISE_RECORDS)
        _advise_phases(d, runs)
        want = recompute_advise(summary, micro, rounds, runs).set_index("pair")
        for i, s in enumerate(record["samples"]):
            _advise_sample_check(path, i, s, want, micro, rounds, runs)


def _advise_phases(d: Path, runs: pd.DataFrame) -> None:
    """Each pair's check ran on every reserved prompt of prompts.jsonl and its confirmation
    on at most the discovery prompts (a confirmation and a check swapped cannot both hold)."""
    from ...evidence.advise import run_phases
    if "phase" not in runs or not (d / "prompts.jsonl").is_file():
        return
    splits = pd.Series([r["split"] for r in read_jsonl(d / "prompts.jsonl")]).value_counts()
    for pair, g in runs.groupby("pair", sort=False):
        confirm, check = run_phases(g)
        n = {"confirm": confirm["prompt"].nunique(), "check": check["prompt"].nunique()}
        if n["check"] != splits.get("reserved", 0) or n["confirm"] > splits.get("discovery", 0):
            raise SpecproofError(f"{d / 'advise_runs.parquet'}: field phase: {pair}'s check runs cover {n['check']} "
                                 f"prompts and its confirmation {n['confirm']}; prompts.jsonl holds "
                                 f"{splits.get('reserved', 0)} reserved and {splits.get('discovery', 0)} discovery")


def _advise_sample_check(path: Path, i: int, s: dict, want: pd.DataFrame, micro: pd.DataFrame,
                         rounds: pd.DataFrame, runs: pd.DataFrame) -> None:
    """One sample of an advise_check table against ``advise_sample`` of its pair's
    recomputed row and records."""
    from ..benchvalues import advise_sample, same_value
    pair = s.get("pair")
    if pair not in want.index:
        raise SpecproofError(f"{path}: field samples[{i}].pair {pair!r} has no records in {path.with_suffix('').name}/")
    of = lambda df: df[df["pair"] == pair]  # noqa: E731
    expect = advise_sample({**want.loc[pair].to_dict(), "pair": pair}, of(micro), of(rounds), of(runs))
    for field, value in expect.items():
        have = s.get(field)
        if not (have == value if field in ("runs", "model", "pair") else same_value(have, value)):
            raise SpecproofError(f"{path}: field samples[{i}].{field} is {short(have)}; the records in "
                                 f"{path.with_suffix('').name}/ give {short(value)}")


def committed_bench_line(benchmarks: Path) -> str:
    """Each benchmark table's JSON against the committed one, and no committed table
    missing: an error naming the file when one differs or is gone; a report line otherwise
    (or why the tables could not be compared)."""
    git = lambda *args: subprocess.run(["git", "-C", str(benchmarks), *args], capture_output=True)  # noqa: E731
    try:
        listed = git("ls-files", "--", "*.json")
    except OSError:
        return "benchmarks: not compared with the committed tables (git is not available)"
    if listed.returncode != 0 or not listed.stdout.strip():
        return f"benchmarks: not compared with committed tables ({benchmarks} holds none in a git checkout)"
    names = listed.stdout.decode().split()
    for name in names:
        path = benchmarks / name
        if not path.is_file():
            raise SpecproofError(f"{path}: a committed benchmark table is missing")
        committed = committed_sha256(benchmarks, name)
        if committed is not None and committed != sha256_file(path):
            raise SpecproofError(f"{path}: differs from the committed table (git show HEAD:{path})")
    return f"benchmarks: the {len(names)} tables' JSON are the committed ones"


@register("bench_tables", guarantees="every benchmark table's .md is the table its JSON renders",
          scope="benchmarks")
def _bench_tables(a: Audit) -> None:
    check_bench_tables(a.args["benchmarks"], a.args["tables"])


@register("bench_values", guarantees="every benchmark value a table stores samples for equals its "
          "recomputation from them", scope="benchmarks")
def _bench_values(a: Audit) -> None:
    from ..benchvalues import check_bench_values
    a.found["bench_values"] = check_bench_values(a.args["tables"])


@register("advise_records", guarantees="an advise_check table's samples are what the stage records beside it "
          "give, recomputed as the study audit recomputes advise.parquet", scope="benchmarks")
def _advise_records(a: Audit) -> None:
    check_advise_records(a.args["tables"])


@register("committed_tables", guarantees="every benchmark table's JSON is the committed one and no committed "
          "table is missing", scope="benchmarks")
def _committed_tables(a: Audit) -> None:
    a.found["committed_tables"] = committed_bench_line(a.args["benchmarks"])
