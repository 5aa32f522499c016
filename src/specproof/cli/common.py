"""What every subcommand shares: the one-line usage errors, the help format, the defaults
of a model and a prompt, and how a missing value prints.

Errors a user can fix print one line ``specproof: error: <flag or file>: <why>`` and exit
2, before any model loads where the input allows it: every setting is checked against
``limits`` (the study's bounds too), model files and contexts by ``loader.preflight``.
"""
from __future__ import annotations

import argparse
import re

DESCRIPTION = """Does speculative decoding speed up a model pair on this machine, and by how much?
`specproof decode` times one prompt target-only and speculatively; `specproof advise`
measures the costs and predicts the speedup at each K. The other commands are the
stages and publishing steps of a reproducible study, run by Snakemake (see the README)."""

DEFAULT_MODEL = "embedded:smollm2-q4_1"
DEFAULT_PROMPT = ('def is_palindrome(text: str) -> bool:\n'
                  '    """Return True if text reads the same forwards and backwards,\n'
                  '    ignoring case and non-alphanumeric characters."""\n')
MODEL_FIELDS = ("threads", "n_ctx", "n_batch", "n_ubatch", "n_gpu_layers")


class Parser(argparse.ArgumentParser):
    """Usage errors in the one-line form of every other error (``--k: invalid int value``),
    exit status 2."""

    def error(self, message: str):
        message = re.sub(r"^argument ([^:]+): ", lambda m: m[1].split("/")[-1] + ": ", message)
        self.exit(2, f"specproof: error: {message} (see {self.prog} --help)\n")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows each option's default, unless it is unset (None, off) or the help names it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


def version() -> str:
    import specproof
    return f"specproof {specproof.__version__}"


def flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _command(sub, name: str, runner: tuple[str, str], help: str,
             description: str | None = None) -> argparse.ArgumentParser:
    """The parser of subcommand ``name``, which ``runner`` runs (a module of
    ``specproof.cli`` and its function, imported when the subcommand runs): one line of
    ``help`` in ``specproof --help``, ``description`` (default: that line) atop its own
    help, every option's default shown."""
    p = sub.add_parser(name, formatter_class=HelpFormatter, help=help,
                       description=description or help[0].upper() + help[1:] + ".")
    p.set_defaults(runner=runner)
    return p
