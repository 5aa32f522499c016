"""The audit's registry in the order it runs (``ORDER``, cheapest first), the runners that
apply it to a frozen set and to the benchmark tables and config, and its listing
(``specproof audit --list``, docs/audit.md).

Adding a check: write it in its family's module with ``registry.register`` (its name, the
records it reads, what it guarantees) and place its name in ``ORDER``.
"""
from __future__ import annotations

from pathlib import Path

from . import benchmarks, certificate, endpoints, identities, provenance, recomputed, timing
from ...catalog import format_records
from .registry import MANIFEST, REGISTRY, Audit, Check, SetAudit

# the families, each a module that registers its checks as it is imported
FAMILIES = tuple(m.__name__.rpartition(".")[2] for m in (provenance, timing, identities, endpoints, certificate,
                                                          recomputed, benchmarks))
ORDER = ("committed_manifest", "records", "provenance", "seal_hashes", "time_chain", "reference_seal",
         "qualification_q", "qualification_twins", "prediction_live", "run_timings", "run_identities", "margins",
         "micro_medians", "pit_bounds", "pit_draws", "pit_prefixes", "derived_files", "provenance_commit",
         "bench_tables", "bench_values", "advise_records", "committed_tables", "every_set_listed",
         "machine_labels")


def registered() -> list[Check]:
    """Every check, in the order the audit runs them."""
    return [REGISTRY[name] for name in ORDER]


def run_set_checks(set_id: str, manifest: dict, dest: Path, read_by_paper: bool = True):
    """Every check of scope ``set`` (and ``read set`` for a set the paper reads) on one
    frozen set, in ``ORDER``; the first failure raises. Returns (the set's analysis, the
    report lines the checks left)."""
    scopes = ("set", "read set") if read_by_paper else ("set",)
    s = SetAudit(set_id, manifest, Path(dest))
    for check in registered():
        if check.scope in scopes:
            check.run(s)
    return s.analysis, [line for line in s.lines if line]


def run_checks(scope: str, **args) -> dict:
    """Every check of ``scope`` ('benchmarks' or 'config') with ``args``, in ``ORDER``;
    returns what they found, by check name."""
    a = Audit(args)
    for check in registered():
        if check.scope == scope:
            check.run(a)
    return a.found


def reads_text(check: Check, quote: str = "") -> str:
    """The records a check reads, for a reader: 'every record' when it reads them all."""
    names = [r for r in check.reads if r != MANIFEST]
    shown = [MANIFEST] * (MANIFEST in check.reads) + (["every record of its format"] if set(format_records()) <= set(names)
                                                     else names)
    return ", ".join(f"{quote}{r}{quote}" if r.endswith(("json", "jsonl", "parquet")) else r for r in shown) or "—"


def listing() -> list[str]:
    """``specproof audit --list``: one block per check, in the order they run."""
    out = []
    for c in registered():
        out += [f"{c.name} ({c.family}, {c.scope})", f"  reads: {reads_text(c)}", f"  guarantees: {c.guarantees}"]
    return out


def markdown() -> str:
    """docs/audit.md: per family, what each check protects against, from the registry."""
    lines = ["# What the audit checks", "",
             "Generated from the audit's registry (`specproof.publish.audit`) by `specproof audit --list "
             "--markdown`; a test keeps this page equal to it. The checks run in this order within a family, "
             "and the families interleave cheapest first (`specproof audit --list` shows the run order). "
             "Each failure is one line naming the file and the field, exit 2.", ""]
    for family in FAMILIES:
        lines += [f"## {family}", "", "| check | scope | reads | guarantees |", "|---|---|---|---|"]
        lines += [f"| `{c.name}` | {c.scope} | {reads_text(c, '`')} | {c.guarantees} |"
                  for c in registered() if c.family == family]
        lines.append("")
    return "\n".join(lines)


def paper_numbers(studies: list[str], manifests: Path, config: Path | None) -> tuple[dict, str | None]:
    """numbers.json's paper.* rows as ``build_numbers`` writes them: the head study (the
    first listed, as the workflow's numbers rule passes it), whether it is frozen, and the
    title from ``config`` when that config lists these studies; else (rows without the
    title, a note why it was not recomputed)."""
    from ..paper import paper_rows
    from ...study.config import load_config
    head, title, note, break_even = studies[0], None, None, None
    cfg = load_config(Path(config)) if config is not None and Path(config).is_file() else None
    if cfg is not None and list(cfg["studies"]) == list(studies):
        run_checks("config", manifests=manifests, cfg=cfg, config=Path(config))
        title = cfg.get("paper", {}).get("title", "specproof")
        break_even = cfg.get("break_even")
    else:
        note = (f"paper.title not recomputed: {config} " + ("lists other studies" if cfg else "is absent")
                + " than the audited ones")
    return paper_rows(head, manifests, title, break_even), note
