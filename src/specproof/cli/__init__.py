"""Command line: ``specproof decode``, ``advise``, and the stages and publishing steps of a
study (run by the Snakemake rules).

Errors a user can fix print one line ``specproof: error: <flag or file>: <why>`` and exit
2, before any model loads where the input allows it: every setting is checked against
``limits`` (the study's bounds too), model files and contexts by ``loader.preflight``.
"""
from __future__ import annotations

import argparse
import sys

from ..errors import SpecproofError
from .common import DESCRIPTION, MISSING, HelpFormatter, Parser, flag, num, version
from .advise import _advise_parser
from .decode import _decode_parser, print_decode
from .records import (_audit_parser, _break_even_figure_parser, _drift_parser, _figures_parser, _freeze_parser,
                      _machines_figure_parser, _numbers_parser, _paper_parser, _plan_parser, _stage_parser)

__all__ = ["MISSING", "build_parser", "flag", "main", "num", "print_decode"]

# in the order ``specproof --help`` lists them
SUBCOMMANDS = (_decode_parser, _advise_parser, _plan_parser, _stage_parser, _figures_parser, _machines_figure_parser,
               _break_even_figure_parser,
               _numbers_parser, _paper_parser, _freeze_parser, _audit_parser, _drift_parser)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="specproof", description=DESCRIPTION, formatter_class=HelpFormatter)
    p.add_argument("--version", action="version", version=version(), help="print specproof's version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SpecproofError as exc:
        print(f"specproof: error: {exc}", file=sys.stderr)
        return 2
