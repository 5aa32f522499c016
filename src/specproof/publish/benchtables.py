"""Benchmark result tables: ``<dir>/<name>.md`` for people and ``<dir>/<name>.json`` for
the paper.

The JSON holds the table's header and rows, its notes, the headline ``values`` the paper
cites ({key: {value, unit}}), the machine's provenance, the exact command, and
``table_sha256``, the sha256 of the .md written with it; where the benchmark stores them,
``kind`` and the raw ``samples`` its values are recomputed from (publish/benchvalues.py). ``read_tables`` reads every table once and ``bench_numbers`` turns every
table into numbers.json entries ``bench.<name>.<key>`` whose ``sha256`` is that of the
JSON file, so the audit can tell an edited table from a rerun one.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import SpecproofError
from ..evidence.provenance import summary_line
from .benchvalues import check_values
from ..records import finite_json, json_scalar, read_json, sha256_file, sha256_text, write_json


def _cell(x) -> str:
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def markdown_table(header: list[str], rows: list[list]) -> list[str]:
    """A GitHub-flavoured markdown table (``DataFrame.to_markdown``, via tabulate), one
    line per item; cells are formatted here (floats to 3 significant digits) and kept
    as text."""
    import pandas as pd
    df = pd.DataFrame([[_cell(x) for x in r] for r in rows], columns=header, dtype=object)
    return df.to_markdown(index=False, tablefmt="github", disable_numparse=True).splitlines()


def render_markdown(title: str, command: str, machine: str, header: list[str], rows: list[list],
                    notes: list[str]) -> str:
    lines = [f"# {title}", "", f"Command: `{command}`", "", f"Machine: {machine}", ""]
    lines += markdown_table(header, rows)
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _plain(v):
    """json_scalar, refusing anything that is not a number, bool or string."""
    v = json_scalar(v)
    if v is not None and not isinstance(v, (bool, int, float, str)):
        raise TypeError(f"benchmark value {v!r} is not a number, bool or string")
    return v


def write_table(results: Path, name: str, title: str, header: list[str], rows: list[list],
                notes: list[str], values: dict[str, tuple], command: str, provenance: dict,
                samples: tuple[str, list[dict]] | None = None) -> Path:
    """Write <name>.md and <name>.json; ``values`` maps key -> (value, unit); ``samples``
    (kind, raw samples) are stored for a kind benchvalues.PRODUCERS recomputes, and the
    values are checked against that recomputation before anything is written. Returns the .md."""
    results = Path(results)
    results.mkdir(parents=True, exist_ok=True)
    md = render_markdown(title, command, summary_line(provenance), header, rows, notes)
    (results / f"{name}.md").write_text(md)
    record = {"benchmark": name, "title": title, "command": command, "header": header,
              "rows": [[_plain(x) for x in r] for r in rows], "notes": notes,
              "values": {k: {"value": _plain(v), "unit": u} for k, (v, u) in values.items()},
              "provenance": provenance, "table_sha256": sha256_text(md)}
    if samples is not None:
        record |= {"kind": samples[0], "samples": finite_json(samples[1])}
        check_values(record, results / f"{name}.json")
    write_json(record, results / f"{name}.json")
    return results / f"{name}.md"


def read_table(path: Path) -> dict:
    """A benchmark JSON, checked against its .md; one-line errors name the file and field."""
    path = Path(path)
    record = read_json(path)
    for field in ("benchmark", "values", "table_sha256"):
        if field not in record:
            raise SpecproofError(f"{path}: field {field!r} is missing")
    md = path.with_suffix(".md")
    if not md.is_file():
        raise SpecproofError(f"{md}: missing (its JSON {path.name} exists)")
    if sha256_text(md.read_text()) != record["table_sha256"]:
        raise SpecproofError(f"{md}: sha256 does not match field table_sha256 of {path.name} "
                             "(the table was changed after the benchmark wrote it)")
    for key, entry in record["values"].items():
        if not isinstance(entry, dict) or set(entry) != {"value", "unit"}:
            raise SpecproofError(f"{path}: field values.{key} must be {{value, unit}}")
    return record


def machine_of(cpu: dict) -> str | None:
    """'<CPU model> (<widest vector ISA>[, AMX])' from a provenance's cpu record, so two
    machines that share a model name (an AVX2 and an AVX-512 AMD EPYC) stay apart."""
    model = cpu.get("model")
    if not model:
        return None
    flags = set(cpu.get("simd_flags") or [])
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else None
    tags = [t for t in (isa, "AMX" if "amx_tile" in flags else None) if t]
    return f"{model} ({', '.join(tags)})" if tags else model


def read_tables(results: Path) -> dict[Path, dict]:
    """Every benchmark table in ``results`` ({} if it is absent), each JSON read once and
    checked against its .md (read_table) and its own name: what bench_numbers, the
    rendering check and the recomputation of values all read."""
    tables: dict[Path, dict] = {}
    for path in sorted(Path(results).glob("*.json")) if Path(results).is_dir() else []:
        record = read_table(path)
        if record["benchmark"] != path.stem:  # one table per name: a copy cannot shadow another
            raise SpecproofError(f"{path}: field benchmark is {record['benchmark']!r}, not the file's "
                                 f"name {path.stem!r}")
        tables[path] = record
    return tables


NAME_DOT = re.compile(r"\.(?!\d)")  # a dot between a name's parts, not a decimal point
NAME_FIELD = re.compile(r"(K|x)(\d+)")  # a part naming a K or a multiple of the tokens


def name_fields(name: str) -> dict:
    """The fields the paper selects a benchmark value by, read from the name the benchmark
    wrote: its parts (split at dots that are not decimal points, so 'temperature_1.05' is
    one part), with a part 'K<k>' given as the field k and a part 'x<m>' as multiple
    ('K4.realized' -> parts ['realized'], k 4)."""
    fields: dict = {"parts": []}
    for part in NAME_DOT.split(name):
        m = NAME_FIELD.fullmatch(part)
        if m:
            fields["k" if m.group(1) == "K" else "multiple"] = int(m.group(2))
        else:
            fields["parts"].append(part)
    return fields


def bench_numbers(tables: dict[Path, dict]) -> dict:
    """numbers.json rows for every table of ``tables`` (read_tables): group 'bench', the
    table, the value's name as the benchmark wrote it as the metric, and the fields of that
    name (name_fields) so the paper never builds a name."""
    from .numbers import Rows
    out: dict[str, dict] = {}
    for path, record in tables.items():
        cpu = machine_of((record.get("provenance") or {}).get("cpu", {}))
        values = {**record["values"], **({"machine": {"value": cpu, "unit": "text"}} if cpu else {})}
        rows = Rows(sha256=sha256_file(path))
        for name, entry in values.items():  # the metric is the name as the benchmark wrote it
            rows.at("bench", name_fields(name), table=record["benchmark"])(
                name, entry["value"], entry["unit"], str(path))
        out.update(rows.out)
    return out
