"""The record catalog: every file a study writes into ``results/<study>/`` and freeze
copies into ``manifests/<study>/<machine>/``, one row each. Freeze, the audit, the
summaries, ``numbers`` and the workflow's rules read their lists of files from here, so
adding a record is one row.

A row's ``kind`` says what the file is:

- ``raw``: written by a stage that runs models or measures (the evidence itself);
- ``summary``: written by a stage beside its raw records, and recomputed from them by
  ``analysis.summaries`` wherever the set holds them;
- ``derived``: written by ``analysis`` from the raw records (and recomputed by the audit).

``since`` is the manifest format that first holds the record: format 1 sets were frozen
before the stages wrote the raw records behind their summaries; a set of format ``f``
holds every row with ``since <= f`` (``format_records``), and a row newer than the oldest
format is optional in a frozen set that predates it. ``stage`` is the workflow rule that
writes the file; ``needed_for`` names the numbers computed from it (the audit names them
when the record is missing); ``computed_from`` names a derived file's inputs (the audit
names them when the file differs from its recomputation).

Imports nothing from the package: every room may read it.
"""
from __future__ import annotations

from dataclasses import dataclass

KINDS = ("raw", "summary", "derived")


@dataclass(frozen=True)
class Record:
    name: str
    kind: str  # one of KINDS
    stage: str  # the workflow rule that writes it
    since: int = 1  # the first manifest format holding it
    analyzed: bool = True  # read by analysis.analyze (False: provenance the audit alone reads)
    needed_for: str | None = None
    computed_from: str | None = None


# Order matters: freeze copies and the audit checks in this order, and an audit error
# names the first missing record of it.
RECORDS = (
    Record("provenance.json", "raw", "provenance"),
    Record("models.json", "raw", "models", analyzed=False),
    Record("prompts.jsonl", "raw", "prompts", needed_for="best_reserved.* (the discovery/reserved prompt split)"),
    Record("reference.parquet", "raw", "reference"),
    Record("reference.seal.json", "raw", "reference"),
    Record("runs.parquet", "raw", "runs"),
    Record("rounds.parquet", "raw", "runs"),
    Record("micro.parquet", "raw", "micro"),
    Record("pit.parquet", "raw", "pit"),
    Record("batch_invariance.parquet", "raw", "batch_invariance"),
    Record("qualification.parquet", "raw", "qualification"),
    Record("margins.parquet", "raw", "margins",
           needed_for="the top-2 margins at divergences (agreement.parquet's top2_margin)"),
    Record("prediction_seal.json", "raw", "predict"),
    Record("prediction.json", "summary", "predicted"),
    Record("level1.json", "summary", "level1"),
    Record("level2.json", "summary", "level2"),
    Record("calibration.parquet", "raw", "calibration"),
    Record("calibration.json", "summary", "calibration"),
    Record("advise.parquet", "summary", "advise"),
    Record("calibration_power.parquet", "raw", "calibration", since=2,
           needed_for="certificate.detectable_tv_80 and calibration.rule.detectable_tv_80"),
    Record("level1.parquet", "raw", "level1", since=2, needed_for="level1.*"),
    Record("level2.parquet", "raw", "level2", since=2, needed_for="level2.*"),
    Record("predictions.json", "raw", "predict", since=2, needed_for="prediction.*"),
    Record("prediction_live.parquet", "raw", "predicted", since=2, needed_for="prediction.P_matched and P_total"),
    Record("advise_micro.parquet", "raw", "advise", since=2, needed_for="advise.<pair>.predicted"),
    Record("advise_rounds.parquet", "raw", "advise", since=2, needed_for="advise.<pair>.predicted"),
    Record("advise_runs.parquet", "raw", "advise", since=2, needed_for="advise.<pair>.realized"),
    Record("agreement.parquet", "derived", "analyze",
           computed_from="runs.parquet, qualification.parquet and reference.parquet"),
    Record("costs.parquet", "derived", "analyze", computed_from="runs.parquet and rounds.parquet"),
    Record("stats.json", "derived", "analyze", computed_from="runs.parquet and rounds.parquet"),
    Record("certificate.json", "derived", "analyze", computed_from="pit.parquet"),
)

FORMATS = tuple(sorted({r.since for r in RECORDS}))  # the manifest formats a set may have
MANIFEST_FORMAT = FORMATS[-1]  # the format freeze writes today
BY_NAME = {r.name: r for r in RECORDS}


def record(name: str) -> Record:
    """The catalog row of a record file (KeyError for a file the catalog does not hold)."""
    return BY_NAME[name]


def format_records(fmt: int = MANIFEST_FORMAT) -> list[str]:
    """The records a set of manifest format ``fmt`` holds, in catalog order."""
    return [r.name for r in RECORDS if r.since <= fmt]


def newer_records(fmt: int = FORMATS[0]) -> list[str]:
    """The records a set of format ``fmt`` predates (optional in a frozen set: a set frozen
    before them lacks them), in catalog order."""
    return [r.name for r in RECORDS if r.since > fmt]


def of_kind(*kinds: str) -> list[str]:
    """The records of the given kinds, in catalog order."""
    return [r.name for r in RECORDS if r.kind in kinds]


def of_stage(stage: str) -> list[str]:
    """The records one workflow rule writes, in catalog order."""
    return [r.name for r in RECORDS if r.stage == stage]


def analyzed_records() -> list[str]:
    """The raw records and summaries ``analysis.analyze`` reads (the analyze rule's inputs)."""
    return [r.name for r in RECORDS if r.kind != "derived" and r.analyzed]


def study_files(study_dir: str, fmt: int = FORMATS[0]) -> list[str]:
    """``<study_dir>/<record>`` for every record a set of format ``fmt`` holds: the input
    list of a rule reading a finished study (``fmt`` 1: a study run before the newer
    records is read too)."""
    return [f"{study_dir}/{name}" for name in format_records(fmt)]


def needed_for(name: str) -> str:
    """The numbers computed from a record, for the line naming it missing."""
    return BY_NAME[name].needed_for or "numbers"


def computed_from(name: str) -> str:
    """The raw records a derived file is recomputed from."""
    return BY_NAME[name].computed_from or "the raw records"
