"""Audit checks of the recomputed family: every frozen derived file and stage summary
equals its recomputation from the raw records.
"""
from __future__ import annotations

from pathlib import Path


from ...catalog import MANIFEST_FORMAT, computed_from, format_records
from .common import compare_file
from .registry import SetAudit, register


def check_derived(dest: Path, a, fmt: int) -> None:
    """Every frozen derived file (agreement, costs, stats, certificate) and stage summary
    (calibration.json, level1.json, level2.json, prediction.json, advise.parquet) equals
    its recomputation from the raw records, floats within a relative 1e-9. A format-2 set
    must hold exactly the recomputed fields (a summary may hold more: its stage's
    settings); a format-1 set, written by earlier code, is compared on the fields both have."""
    from ...analysis.analyze import derived_records
    current = fmt == MANIFEST_FORMAT
    for name, record in derived_records(a).items():
        compare_file(dest, name, record, "both" if current else "common", computed_from(name))
    for name, record, source in summaries_of(a):
        if record is not None:
            compare_file(dest, name, record, "recomputed" if current else "common", source)


def summaries_of(a) -> list[tuple[str, object, str]]:
    """(summary file, its recomputation, the raw records it comes from) for a set's analysis."""
    s = a.sources
    p_from = "qualification.parquet and predictions.json" if s["prediction.P"] == "prediction_live.parquet" \
        else s["prediction.P"]
    return [("calibration.json", a.calibration, f"{s['calibration']} and {s['power']}"),
            ("level1.json", a.level1, s["level1"]), ("level2.json", a.level2, s["level2"]),
            ("prediction.json", a.prediction, p_from),
            ("advise.parquet", a.advise, f"{s['advise.predicted']} and {s['advise.realized']}")]


@register("derived_files", tuple(format_records()), "every derived file and stage summary equals its "
          "recomputation from the raw records the set holds (floats within a relative 1e-9), so a consistent "
          "edit of a summary and numbers.json still fails")
def _derived_files(s: SetAudit) -> None:
    from ...analysis.analyze import analyze
    s.analysis = analyze(s.dest)
    check_derived(s.dest, s.analysis, s.fmt)
