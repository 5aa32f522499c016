"""The publishing subcommands: a study's figures and numbers, the paper, freezing a record
set, the audit and the replicate's drift."""
from __future__ import annotations

import sys
from pathlib import Path

from ..analysis.analyze import analyze
from ..errors import ConfigError, SpecproofError
from ..limits import output_dir, output_file
from ..publish.figures import break_even_figure, machines_verify_cost, make_all
from ..publish.audit.checks import listing, markdown
from ..publish.manifests import audit, drift, freeze, relabel, split_set
from ..publish.paper import build_numbers, compile_paper, failed_claims
from ..records import read_parquet
from ..study.config import load_config, load_study


def cmd_figures(a) -> int:
    out = output_dir(a.out, "--out")
    make_all(analyze(Path(a.records)), Path(a.records), out)
    return 0


def cmd_machines_figure(a) -> int:
    if len(a.sets) != len(a.records):
        raise SpecproofError("--records: give one record directory per --sets entry")
    out = output_dir(a.out, "--out")  # the figure's directory: verify_cost_machines.{pdf,png}
    machines_verify_cost({split_set(s)[1] or s: read_parquet(Path(r) / "micro.parquet")
                          for s, r in zip(a.sets, a.records)}, out)
    print(f"{a.out}: written")
    return 0


def cmd_break_even_figure(a) -> int:
    if len(a.sets) != len(a.records):
        raise SpecproofError("--records: give one record directory per --sets entry")
    break_even_figure(dict(zip(a.sets, map(Path, a.records))), output_dir(a.out, "--out"))
    print(f"{a.out}: written")
    return 0


def cmd_numbers(a) -> int:
    config = {"studies": a.studies, "study": a.head, "paper": {"title": a.title},
              "replicates": [{"set": r, "of": of} for r, of in a.replicate], "break_even": a.break_even}
    out = output_file(a.out, "--out")
    n = build_numbers(config, Path(a.manifests), Path(a.results), out, Path(a.benchmarks), Path(a.cited))
    print(f"{a.out}: {len(n)} numbers")
    return 0


def cmd_paper(a) -> int:
    if a.list_claims:
        failed = failed_claims(Path(a.source), numbers=Path(a.numbers), figures=Path(a.figures),
                               machine_figures=Path(a.machine_figures), cited=Path(a.cited),
                               map_figures=a.map_figures and Path(a.map_figures))
        for what in failed:
            print(f"{a.source}: claim not supported by {a.numbers}: {what}")
        print(f"{a.source}: {len(failed)} claim(s) not supported", file=sys.stderr)
        return 2 if failed else 0
    compile_paper(Path(a.source), output_file(a.out, "--out"), numbers=Path(a.numbers),
                  figures=Path(a.figures), machine_figures=Path(a.machine_figures), cited=Path(a.cited),
                  map_figures=a.map_figures and Path(a.map_figures))
    print(f"{a.out}: written")
    return 0


def cmd_freeze(a) -> int:
    load_study(a.study, a.studies_dir and Path(a.studies_dir))  # unknown study names fail here, with the known ones listed
    if a.relabel:
        if not a.machine:
            raise ConfigError("--relabel: name the new label with --machine")
        print(f"{relabel(a.study, Path(a.manifests), a.relabel, a.machine)}: relabelled from {a.relabel}")
        return 0
    path = freeze(a.study, Path(a.results) / a.study, Path(a.manifests), force=a.force, machine=a.machine)
    print(f"{path}: frozen")
    return 0


def cmd_audit(a) -> int:
    if a.list:
        print(markdown() if a.markdown else "\n".join(listing()))
        return 0
    studies = a.studies
    if not studies:
        studies = load_config(Path(a.config))["studies"]
    if a.paper_pdf is not None and a.figures is None:
        raise ConfigError("--paper-pdf: name the figures it was built with (--figures figures/<set>)")
    pdf = None if a.paper_pdf is None else {
        "pdf": Path(a.paper_pdf), "source": Path(a.paper_source), "numbers": Path(a.numbers),
        "figures": Path(a.figures), "machine_figures": Path(a.machine_figures), "cited": Path(a.cited),
        "map_figures": a.map_figures and Path(a.map_figures)}
    seeds = None if a.seeds is None else Path(a.seeds)
    for line in audit(studies, Path(a.manifests), Path(a.numbers), Path(a.benchmarks), config=Path(a.config),
                      cited=Path(a.cited), seeds=seeds, pdf=pdf):
        print(f"audit: {line}")
    print("audit: OK")
    return 0


def cmd_drift(a) -> int:
    drift(a.study, Path(a.results), Path(a.manifests), output_file(a.out, "--out"))
    print(f"{a.out}: written")
    return 0
