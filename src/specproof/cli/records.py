"""The subcommands the Snakemake rules run: a study's stages, its plan, figures and numbers,
the paper, freezing a record set, the audit and the replicate's drift."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ConfigError, SpecproofError
from .common import _command


def cmd_stage(a) -> int:
    from ..analysis.analyze import stage_analyze
    from ..evidence.stages import run_stage
    from ..limits import check, output_dir
    from ..load import end_with_parent
    end_with_parent()  # a killed job's stage ends with it
    results = output_dir(a.results, "--results")
    model_dir = a.model_dir and output_dir(a.model_dir, "--model-dir").resolve()
    if a.seed is not None:
        check("seed", a.seed, "--seed")
    if a.name == "analyze":  # reads only the raw records, no study config
        stage_analyze(results)
        return 0
    run_stage(a.name, results, config=a.config and Path(a.config), seed=a.seed, part=a.part,
              gather_jobs=a.gather, model_dir=model_dir, manifests=a.manifests and Path(a.manifests))
    return 0


def cmd_plan(a) -> int:
    import json

    import pandas as pd
    from ..evidence.plan import estimate, measured_plan
    from ..limits import output_dir
    from ..study.config import load_study
    if not 0 <= a.acceptance < 1:
        raise ConfigError(f"--acceptance: must be in [0, 1) (got {a.acceptance:g})")
    study = load_study(Path(a.config))
    study.model_dir = a.model_dir and output_dir(a.model_dir, "--model-dir").resolve()
    plan = measured_plan(study, a.acceptance, progress=lambda m: print(f"plan: timing {m}", file=sys.stderr))
    rows = pd.DataFrame(estimate(plan))
    if a.json:
        print(json.dumps({"study": study.name, "acceptance": a.acceptance, "stages": rows.to_dict(orient="records"),
                          "total_minutes": float(rows["minutes"].sum())}, indent=2))
        return 0
    print(f"{study.name}: estimated minutes per stage on this machine (acceptance {a.acceptance:g} assumed)")
    print(rows.to_markdown(index=False, floatfmt=".1f"))
    print(f"total: {rows['minutes'].sum():.0f} min, plus model assembly on first use, margins and the "
          "analysis (a minute or two)")
    return 0


def cmd_figures(a) -> int:
    from ..analysis.analyze import analyze
    from ..limits import output_dir
    from ..publish.figures import make_all
    out = output_dir(a.out, "--out")
    make_all(analyze(Path(a.records)), Path(a.records), out)
    return 0


def cmd_machines_figure(a) -> int:
    from ..limits import output_dir
    from ..publish.figures import machines_verify_cost
    from ..publish.manifests import split_set
    from ..records import read_parquet
    if len(a.sets) != len(a.records):
        raise SpecproofError("--records: give one record directory per --sets entry")
    out = output_dir(a.out, "--out")  # the figure's directory: verify_cost_machines.{pdf,png}
    machines_verify_cost({split_set(s)[1] or s: read_parquet(Path(r) / "micro.parquet")
                          for s, r in zip(a.sets, a.records)}, out)
    print(f"{a.out}: written")
    return 0


def cmd_break_even_figure(a) -> int:
    from ..limits import output_dir
    from ..publish.figures import break_even_figure
    if len(a.sets) != len(a.records):
        raise SpecproofError("--records: give one record directory per --sets entry")
    break_even_figure(dict(zip(a.sets, map(Path, a.records))), output_dir(a.out, "--out"))
    print(f"{a.out}: written")
    return 0


def cmd_numbers(a) -> int:
    from ..limits import output_file
    from ..publish.paper import build_numbers
    config = {"studies": a.studies, "study": a.head, "paper": {"title": a.title},
              "replicates": [{"set": r, "of": of} for r, of in a.replicate], "break_even": a.break_even}
    out = output_file(a.out, "--out")
    n = build_numbers(config, Path(a.manifests), Path(a.results), out, Path(a.benchmarks), Path(a.cited))
    print(f"{a.out}: {len(n)} numbers")
    return 0


def cmd_paper(a) -> int:
    from ..limits import output_file
    from ..publish.paper import compile_paper, failed_claims
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
    from ..publish.manifests import freeze, relabel
    from ..study.config import load_study
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
    from ..publish.manifests import audit
    if a.list:
        from ..publish.audit.checks import listing, markdown
        print(markdown() if a.markdown else "\n".join(listing()))
        return 0
    studies = a.studies
    if not studies:
        from ..study.config import load_config
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
    from ..limits import output_file
    from ..publish.manifests import drift
    drift(a.study, Path(a.results), Path(a.manifests), output_file(a.out, "--out"))
    print(f"{a.out}: written")
    return 0


def _stage_parser(sub) -> argparse.ArgumentParser:
    st = _command(sub, "stage", cmd_stage, "run one pipeline stage of a study (used by the Snakemake rules)")
    st.add_argument("name", help="stage name, e.g. reference, runs, micro")
    st.add_argument("--config", help="the study config file, e.g. config/studies/<name>.yaml")
    st.add_argument("--seed", type=int, help="the study seed (level1, level2: they read no config)")
    st.add_argument("--results", required=True, help="the study's results directory")
    st.add_argument("--part", help="one job of a split stage: a pair (runs) or a target "
                                   "(reference, micro, qualification)")
    st.add_argument("--gather", action="store_true", help="join a split stage's jobs into its files")
    st.add_argument("--model-dir", help="where derived model files go (default: ~/.cache/specproof/models)")
    st.add_argument("--manifests", help="frozen record sets the prompts stage keeps the reserved prompts "
                                        "blind to (default: not checked)")
    return st


def _plan_parser(sub) -> argparse.ArgumentParser:
    pl = _command(sub, "plan", cmd_plan, "estimate how long each stage of a study takes here, before running it",
                  "Estimate each model-running stage's minutes on this machine: the study's work counted "
                  "from its config and prompts, at step costs measured by loading each model once.")
    pl.add_argument("--config", required=True, help="the study config file, e.g. config/studies/<name>.yaml")
    pl.add_argument("--acceptance", type=float, default=0.8,
                    help="assumed acceptance at every drafted position (the study measures it)")
    pl.add_argument("--model-dir", help="where derived model files go (default: ~/.cache/specproof/models)")
    pl.add_argument("--json", action="store_true", help="print the estimate as JSON")
    return pl


def _figures_parser(sub) -> argparse.ArgumentParser:
    f = _command(sub, "figures", cmd_figures, "draw a study's figures from its records")
    f.add_argument("--records", required=True, help="results/<study> or manifests/<study>/<machine>")
    f.add_argument("--out", required=True, help="the figures' directory")
    return f


def _machines_figure_parser(sub) -> argparse.ArgumentParser:
    mf = _command(sub, "machines-figure", cmd_machines_figure, "draw the verify-cost curves of one study's machines")
    mf.add_argument("--sets", nargs="+", required=True, help="record sets, <study>@<machine>")
    mf.add_argument("--records", nargs="+", required=True, help="their record directories, in order")
    mf.add_argument("--out", required=True, help="the figure file")
    return mf


def _break_even_figure_parser(sub) -> argparse.ArgumentParser:
    be = _command(sub, "break-even-figure", cmd_break_even_figure,
                  "draw where the cost model breaks even, with every mapped configuration of these sets")
    be.add_argument("--sets", nargs="+", required=True,
                    help="record sets, <study>@<machine>; the first one's acceptance draws the contours")
    be.add_argument("--records", nargs="+", required=True, help="their record directories, in order")
    be.add_argument("--out", required=True, help="the figure's directory (break_even.pdf, break_even.png)")
    return be


def _numbers_parser(sub) -> argparse.ArgumentParser:
    n = _command(sub, "numbers", cmd_numbers, "compute paper/build/numbers.json from study records")
    n.add_argument("--studies", nargs="+", required=True, help="the record sets the paper cites")
    n.add_argument("--head", required=True, help="the study the paper reports")
    n.add_argument("--title", default="specproof", help="the paper's title")
    n.add_argument("--replicate", nargs=2, action="append", default=[], metavar=("SET", "OF"),
                   help="SET reran the blocks of OF at another time (both in --studies); repeatable")
    n.add_argument("--break-even", action="append", default=[], metavar="SET",
                   help="a record set of the break-even map (row paper.break_even), from config.yaml "
                        "break_even; repeatable, the first one's acceptance draws the contours")
    n.add_argument("--manifests", default="manifests", help="frozen record sets")
    n.add_argument("--results", default="results", help="this machine's study results")
    n.add_argument("--benchmarks", default="benchmarks/results",
                   help="benchmark tables (<name>.json beside <name>.md); none if absent")
    n.add_argument("--cited", default="paper/cited.yaml",
                   help="the cited figures, study goals and benchmark goals (rows cited.*, bench_goal.*)")
    n.add_argument("--out", default="paper/build/numbers.json", help="the numbers file")
    return n


def _paper_parser(sub) -> argparse.ArgumentParser:
    pp = _command(sub, "paper", cmd_paper, "compile the Typst paper or a study's report")
    pp.add_argument("--source", default="paper/paper.typ", help="the Typst source")
    pp.add_argument("--numbers", default="paper/build/numbers.json", help="the numbers it cites")
    pp.add_argument("--figures", required=True, help="figures/<set>")
    pp.add_argument("--machine-figures", default="figures/machines",
                    help="the figure comparing machines (used when numbers.json compares two or more)")
    pp.add_argument("--map-figures", default=None,
                    help="the break-even map's directory (break-even-figure --out; default: --figures)")
    pp.add_argument("--cited", default="paper/cited.yaml",
                    help="the figures of other work and the benchmark goals the text cites")
    pp.add_argument("--out", default="paper/paper.pdf", help="the PDF")
    pp.add_argument("--list-claims", action="store_true",
                    help="write no PDF: print every #claim the numbers do not support, one per line "
                         "(exit 2 if any), instead of stopping at the first")
    return pp


def _freeze_parser(sub) -> argparse.ArgumentParser:
    fr = _command(sub, "freeze", cmd_freeze, "copy a finished study into manifests/<study>/<machine>/ with hashes")
    fr.add_argument("study", help="the study's name")
    fr.add_argument("--machine", help="label of this machine's record set (default: from the CPU model); "
                                      "another label freezes beside the machines already frozen")
    fr.add_argument("--results", default="results", help="where the study's results are")
    fr.add_argument("--manifests", default="manifests", help="where frozen record sets go")
    fr.add_argument("--force", action="store_true", help="replace this machine's frozen set (keeps the old manifest)")
    fr.add_argument("--studies-dir", help="where study configs live (default: config/studies)")
    fr.add_argument("--relabel", metavar="OLD", help="move the frozen set <study>@OLD to --machine, records "
                                                    "unchanged (a label that named two machines)")
    return fr


def _audit_parser(sub) -> argparse.ArgumentParser:
    au = _command(sub, "audit", cmd_audit, "re-hash frozen studies and recompute every number")
    au.add_argument("--studies", nargs="*", default=None, help="the record sets (default: those of --config)")
    au.add_argument("--config", default="config/config.yaml", help="the pipeline config")
    au.add_argument("--manifests", default="manifests", help="frozen record sets")
    au.add_argument("--numbers", default="paper/build/numbers.json", help="the numbers to recompute")
    au.add_argument("--benchmarks", default="benchmarks/results", help="benchmark tables")
    au.add_argument("--cited", default="paper/cited.yaml",
                    help="the cited figures, each checked against its quoted sentence")
    au.add_argument("--seeds", default=None, metavar="DIR",
                    help="the cited sources' files, to check the quotes against (default: not checked)")
    au.add_argument("--paper-pdf", default=None, metavar="PDF",
                    help="a built paper to compare byte for byte with its rebuild (default: not compared)")
    au.add_argument("--paper-source", default="paper/paper.typ", help="the Typst source of --paper-pdf")
    au.add_argument("--figures", default=None, help="figures/<set> of --paper-pdf")
    au.add_argument("--machine-figures", default="figures/machines", help="the machines figure of --paper-pdf")
    au.add_argument("--map-figures", default=None, help="the break-even map of --paper-pdf (default: --figures)")
    au.add_argument("--list", action="store_true",
                    help="print the registry of checks (name, family, records read, guarantee) and exit")
    au.add_argument("--markdown", action="store_true", help="with --list: print it as the page docs/audit.md")
    return au


def _drift_parser(sub) -> argparse.ArgumentParser:
    dr = _command(sub, "drift", cmd_drift, "compare a rerun study with its frozen manifest")
    dr.add_argument("study", help="the study's name")
    dr.add_argument("--results", required=True, help="where the rerun's results are")
    dr.add_argument("--manifests", default="manifests", help="frozen record sets")
    dr.add_argument("--out", required=True, help="the drift report")
    return dr
