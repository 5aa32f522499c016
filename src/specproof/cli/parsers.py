"""Every subcommand's flags. ``specproof --help`` builds them all, so this module imports
only what the flags list (the policy names); each subcommand names the function that runs
it as (module, function), imported only when it runs
(``specproof.cli.main``)."""
from __future__ import annotations

import argparse

from ..decode.policies import POLICIES
from .common import DEFAULT_MODEL, _command


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("models (default: hf fp32 SmolLM2 target, llama.cpp Q4_1 SmolLM2 draft)")
    g.add_argument("--target-backend", default="hf", choices=["hf", "llama", "mock"], help="target runtime")
    g.add_argument("--target-model", default=DEFAULT_MODEL, metavar="MODEL",
                   help="embedded:<name> or a local GGUF file / HF directory")
    g.add_argument("--draft-backend", default="llama", choices=["hf", "llama", "mock", "ngram", "none"],
                   help="draft runtime; ngram: prompt lookup, none: target-only")
    g.add_argument("--draft-model", default=DEFAULT_MODEL, metavar="MODEL", help="as --target-model")
    g.add_argument("--device", default="cpu", help="hf device: cpu, cuda[:n], mps")
    g.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"], help="hf dtype")
    g.add_argument("--n-ctx", type=int, default=2048, metavar="N", help="llama context positions (at most the model's)")
    g.add_argument("--n-batch", type=int, default=512, metavar="N", help="llama logical batch size")
    g.add_argument("--n-ubatch", type=int, default=512, metavar="N", help="llama micro-batch size (at most --n-batch)")
    g.add_argument("--threads", type=int, default=None, metavar="N", help="CPU threads per model (default: all cores)")
    g.add_argument("--n-gpu-layers", type=int, default=None, metavar="N",
                   help="llama layers on the accelerator (-1 all, 0 none; default: all when the build has one)")
    g.add_argument("--flash-attn", action="store_true",
                   help="llama.cpp flash attention (off by default, as in llama-cpp-python; its own tools use auto)")


def _add_prompt_flags(p: argparse.ArgumentParser, repeatable: bool, default: str) -> None:
    """--prompt (``-``: stdin) and --prompt-file: one prompt from either (decode), or any
    number from both (advise, ``repeatable``)."""
    if repeatable:
        group, action, one, more = p, "append", "a prompt", " (repeatable)"
    else:
        group, action, one, more = p.add_mutually_exclusive_group(), "store", "the prompt", ""
    group.add_argument("--prompt", action=action, metavar="TEXT",
                       help=f"{one}{more}; - reads it from stdin (default: {default})")
    group.add_argument("--prompt-file", action=action, metavar="PATH",
                       help=f"{one} from a UTF-8 text file{more or ' (not with --prompt)'}")


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--chat", action="store_true", help="render the prompt with the target's chat template")
    p.add_argument("--temperature", type=float, default=0.0, metavar="T", help="sampling temperature; 0 = greedy")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the target's and the draft's sampling")
    p.add_argument("--json", action="store_true", help="print one JSON object (missing values: null)")


def _decode_parser(sub) -> argparse.ArgumentParser:
    d = _command(sub, "decode", ("specproof.cli.decode", "cmd_decode"), "time one prompt target-only and speculatively; report the speedup",
                 "Decode one prompt target-only and speculatively (interleaved A/B\n"
                 "runs); report tokens/s, the speedup and the acceptance by position.")
    _add_model_flags(d)
    _add_prompt_flags(d, repeatable=False, default="a Python function header to complete")
    d.add_argument("--k", type=int, default=6, metavar="K",
                   help="speculation length K (max K for adaptive/guard, start K for hf_heuristic)")
    d.add_argument("--policy", default="fixed", choices=POLICIES, help="how K is chosen each round")
    d.add_argument("--verify-mode", default="batched", choices=["batched", "serialized"],
                   help="verify the draft in one target call, or one position per call")
    d.add_argument("--max-new-tokens", type=int, default=128, metavar="N", help="tokens to generate per run")
    d.add_argument("--repeats", type=int, default=1, metavar="N", help="A/B repetitions (median tokens/s)")
    _add_run_flags(d)
    return d


def _advise_parser(sub) -> argparse.ArgumentParser:
    ad = _command(sub, "advise", ("specproof.cli.advise", "cmd_advise"), "measure the costs and acceptance; predict the speedup at each K",
                  "Measure the verify cost, the draft step cost and the acceptance by\n"
                  "position; predict the speedup at each K and advise whether to\n"
                  "enable speculation.")
    _add_model_flags(ad)
    _add_prompt_flags(ad, repeatable=True, default="one code prompt, one chat instruction")
    ad.add_argument("--k-max", type=int, default=8, metavar="K", help="the largest K measured and predicted")
    ad.add_argument("--probe-seconds", type=float, metavar="S",
                    help="stop probing new prompts after S seconds, two prompts at least (default: probe all)")
    ad.add_argument("--confirm-seconds", type=float, default=60.0, metavar="S",
                    help="then run target-only and the chosen K back to back on the prompts for S seconds, "
                         "two prompts at least, and predict their measured speedup (0: predict from the "
                         "probe's cost model; default: 60)")
    ad.add_argument("--check", action="store_true", help="also measure the realized speedup at the advised K")
    ad.add_argument("--check-prompt-file", action="append", metavar="PATH",
                    help="a prompt the check runs on and the probe never sees (repeatable; "
                         "default: the probe's prompts)")
    _add_run_flags(ad)
    return ad


def _stage_parser(sub) -> argparse.ArgumentParser:
    st = _command(sub, "stage", ("specproof.cli.study", "cmd_stage"), "run one pipeline stage of a study (used by the Snakemake rules)")
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
    pl = _command(sub, "plan", ("specproof.cli.study", "cmd_plan"), "estimate how long each stage of a study takes here, before running it",
                  "Estimate each model-running stage's minutes on this machine: the study's work counted "
                  "from its config and prompts, at step costs measured by loading each model once.")
    pl.add_argument("--config", required=True, help="the study config file, e.g. config/studies/<name>.yaml")
    pl.add_argument("--acceptance", type=float, default=0.8,
                    help="assumed acceptance at every drafted position (the study measures it)")
    pl.add_argument("--model-dir", help="where derived model files go (default: ~/.cache/specproof/models)")
    pl.add_argument("--json", action="store_true", help="print the estimate as JSON")
    return pl


def _figures_parser(sub) -> argparse.ArgumentParser:
    f = _command(sub, "figures", ("specproof.cli.records", "cmd_figures"), "draw a study's figures from its records")
    f.add_argument("--records", required=True, help="results/<study> or manifests/<study>/<machine>")
    f.add_argument("--out", required=True, help="the figures' directory")
    return f


def _machines_figure_parser(sub) -> argparse.ArgumentParser:
    mf = _command(sub, "machines-figure", ("specproof.cli.records", "cmd_machines_figure"), "draw the verify-cost curves of one study's machines")
    mf.add_argument("--sets", nargs="+", required=True, help="record sets, <study>@<machine>")
    mf.add_argument("--records", nargs="+", required=True, help="their record directories, in order")
    mf.add_argument("--out", required=True, help="the figure file")
    return mf


def _break_even_figure_parser(sub) -> argparse.ArgumentParser:
    be = _command(sub, "break-even-figure", ("specproof.cli.records", "cmd_break_even_figure"),
                  "draw where the cost model breaks even, with every mapped configuration of these sets")
    be.add_argument("--sets", nargs="+", required=True,
                    help="record sets, <study>@<machine>; the first one's acceptance draws the contours")
    be.add_argument("--records", nargs="+", required=True, help="their record directories, in order")
    be.add_argument("--out", required=True, help="the figure's directory (break_even.pdf, break_even.png)")
    return be


def _numbers_parser(sub) -> argparse.ArgumentParser:
    n = _command(sub, "numbers", ("specproof.cli.records", "cmd_numbers"), "compute paper/build/numbers.json from study records")
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
    pp = _command(sub, "paper", ("specproof.cli.records", "cmd_paper"), "compile the Typst paper or a study's report")
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
    fr = _command(sub, "freeze", ("specproof.cli.records", "cmd_freeze"), "copy a finished study into manifests/<study>/<machine>/ with hashes")
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
    au = _command(sub, "audit", ("specproof.cli.records", "cmd_audit"), "re-hash frozen studies and recompute every number")
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
    dr = _command(sub, "drift", ("specproof.cli.records", "cmd_drift"), "compare a rerun study with its frozen manifest")
    dr.add_argument("study", help="the study's name")
    dr.add_argument("--results", required=True, help="where the rerun's results are")
    dr.add_argument("--manifests", default="manifests", help="frozen record sets")
    dr.add_argument("--out", required=True, help="the drift report")
    return dr
