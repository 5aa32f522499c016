"""Command line: ``specproof decode``, ``advise``, and the stages and publishing steps of a
study (run by the Snakemake rules).

``parsers`` holds every subcommand's flags; ``decode``, ``advise`` and ``records`` the
functions that run them, each a few lines of wiring into the room that does the work.
Those modules import numpy, pandas and the model runtimes at their top, so ``main``
imports only the one the command names, after parsing (``specproof --help`` stays fast).

Errors a user can fix print one line ``specproof: error: <flag or file>: <why>`` and exit
2, before any model loads where the input allows it: every setting is checked against
``limits`` (the study's bounds too), model files and contexts by ``loader.preflight``.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import SpecproofError
from ..records import MISSING, num
from . import parsers
from .common import DESCRIPTION, HelpFormatter, Parser, flag, version

__all__ = ["MISSING", "build_parser", "flag", "main", "num"]

# in the order ``specproof --help`` lists them
SUBCOMMANDS = (parsers._decode_parser, parsers._advise_parser, parsers._plan_parser, parsers._stage_parser,
               parsers._figures_parser, parsers._machines_figure_parser, parsers._break_even_figure_parser,
               parsers._numbers_parser, parsers._paper_parser, parsers._freeze_parser, parsers._audit_parser,
               parsers._drift_parser)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="specproof", description=DESCRIPTION, formatter_class=HelpFormatter)
    p.add_argument("--version", action="version", version=version(), help="print specproof's version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Parse, import the module that runs the command (the one deferred import), run it;
    a ``SpecproofError`` prints one line and exits 2."""
    args = build_parser().parse_args(argv)
    module, function = args.runner
    run = getattr(importlib.import_module(module), function)
    try:
        return run(args)
    except SpecproofError as exc:
        print(f"specproof: error: {exc}", file=sys.stderr)
        return 2
