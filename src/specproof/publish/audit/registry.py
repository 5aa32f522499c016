"""The audit's checks as entries of one registry: each declares its name, its family (the
module that holds it), the records it reads (rows of ``catalog``, or the manifest) and
what it guarantees, in one sentence. ``publish.audit.checks`` runs them in its ``ORDER``;
``specproof audit --list`` and docs/audit.md print them.

A check of scope ``set`` runs on every frozen set the audit reads, ``read set`` only on
those the paper reads (not the retired or pending ones), ``benchmarks`` once on the
benchmark tables, ``config`` once on the paper's config and the manifests directory.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...catalog import BY_NAME

SCOPES = ("set", "read set", "benchmarks", "config")
MANIFEST = "manifest.json"  # a set's manifest: read by checks, not a record of the catalog


@dataclass(frozen=True)
class Check:
    name: str
    family: str
    scope: str  # one of SCOPES
    reads: tuple[str, ...]  # catalog rows (and the manifest) of a set check; none otherwise
    guarantees: str
    run: Callable = field(repr=False, compare=False)


@dataclass
class SetAudit:
    """What the checks of one frozen set share: the set, its manifest and directory, and
    what earlier checks found (the manifest format, the sealed reference, the analysis,
    the report lines)."""
    set_id: str
    manifest: dict
    dest: Path
    fmt: int | None = None
    reference: object = None
    analysis: object = None
    lines: list[str] = field(default_factory=list)


@dataclass
class Audit:
    """What a check of scope ``benchmarks`` or ``config`` is given (its arguments) and
    leaves (``found``, by check name)."""
    args: dict
    found: dict = field(default_factory=dict)


REGISTRY: dict[str, Check] = {}


def register(name: str, reads: tuple[str, ...] = (), guarantees: str = "", scope: str = "set"):
    """Decorator: register ``fn(context)`` as the check ``name`` of its module's family.
    A set check's ``reads`` must be catalog rows or the manifest."""
    def wrap(fn: Callable) -> Callable:
        unknown = [r for r in reads if r not in BY_NAME and r != MANIFEST]
        if scope not in SCOPES or unknown or not guarantees or name in REGISTRY:
            raise ValueError(f"check {name!r}: scope {scope!r}, reads unknown {unknown}, or registered twice")
        REGISTRY[name] = Check(name, fn.__module__.rpartition(".")[2], scope, tuple(reads), guarantees, fn)
        return fn
    return wrap
