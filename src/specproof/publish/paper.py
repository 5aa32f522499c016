"""numbers.json for every study in config/config.yaml and every benchmark table, and the
Typst paper build.

A record set '<study>@<machine>' is read from its frozen manifests/<study>/<machine>/;
a bare '<study>' from results/<study>/ (a run on this machine, not frozen). The paper (paper/paper.typ) reads paper/build/numbers.json; a key the
paper uses that numbers.json lacks fails the build.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import SpecproofError
from ..records import write_json
from .manifests import is_frozen, manifest_sha256, set_dir, split_set


def records_dir(set_id: str, manifests: Path, results: Path) -> Path:
    if is_frozen(manifests, set_id):
        return set_dir(manifests, set_id)
    study, machine = split_set(set_id)
    if machine:
        raise SpecproofError(f"{set_dir(manifests, set_id) / 'manifest.json'}: record set {set_id!r} "
                             f"is not frozen (run the study, then `specproof freeze {study} --machine {machine}`)")
    return Path(results) / study


def build_numbers(config: dict, manifests: Path, results: Path, out: Path,
                  benchmarks: Path | None = None, cited: Path | None = None) -> dict:
    """Every study's numbers, the benchmark tables' (``bench.*``, from ``benchmarks``),
    their goals' verdicts (``bench_goal.*``, the goals from ``cited``'s benchmark_goals)
    and the paper's own (title, head study, frozen or not)."""
    from ..analysis.analyze import analyze
    from .benchgoals import cited_goal_rows
    from .cited import cited_rows, read_cited
    from .benchtables import bench_numbers, read_tables
    from .numbers import machine_numbers, study_numbers
    from .replicate import config_replicate_numbers
    numbers: dict = bench_numbers(read_tables(benchmarks)) if benchmarks is not None else {}
    numbers.update(cited_goal_rows(numbers, cited))
    if cited is not None:
        numbers.update(cited_rows(read_cited(cited), str(cited)))
    analyses, shas = {}, {}
    for set_id in config["studies"]:
        analyses[set_id] = analyze(records_dir(set_id, manifests, results))
        shas[set_id] = manifest_sha256(manifests, set_id)
        numbers.update(study_numbers(analyses[set_id], shas[set_id], prefix=set_id))
    numbers.update(machine_numbers(analyses, shas))
    numbers.update(config_replicate_numbers(config, config["studies"], "config/config.yaml", analyses, shas))
    head = config.get("study", config["studies"][0])
    numbers.update(paper_rows(head, manifests, config.get("paper", {}).get("title", "specproof"),
                              config.get("break_even") or []))
    write_json(numbers, out)
    return numbers


def paper_rows(head: str, manifests: Path, title: str | None, break_even: list[str] | None = None) -> dict:
    """numbers.json's paper.* rows: the title (when given), the head record set (its study
    and machine as fields of the row), whether it is frozen, and the record sets of the
    break-even map (config ``break_even``; no row when there are none)."""
    from .numbers import Rows
    study, machine = split_set(head)
    rows = Rows(manifest_sha256=manifest_sha256(manifests, head))
    put = rows.at("paper")
    if title is not None:
        put("title", title, "text", "config/config.yaml")
    rows.at("paper", attrs={"study_name": study, **({"machine": machine} if machine else {})})(
        "study", head, "text", "config/config.yaml")
    put("frozen", is_frozen(manifests, head), "text", "config/config.yaml")
    if break_even:
        put("break_even", list(break_even), "record sets", "config/config.yaml")
    return rows.out


def paper_inputs(source: Path, numbers: Path, figures: Path, machine_figures: Path | None = None,
                 cited: Path | None = None, map_figures: Path | None = None) -> dict[str, str]:
    """The sys.inputs the paper reads: absolute paths of its numbers, figures (the head
    set's, the machines figure's and the break-even map's directories; the last two
    default to the first) and cited figures of other work (cited defaults to the source's
    cited.yaml)."""
    numbers = Path(numbers).resolve()
    if not numbers.is_file():
        raise SpecproofError(f"{numbers}: numbers.json does not exist")
    return {"numbers": str(numbers), "figures": str(Path(figures).resolve()),
            "machine_figures": str(Path(machine_figures or figures).resolve()),
            "map_figures": str(Path(map_figures or figures).resolve()),
            "cited": str(Path(cited or Path(source).resolve().parent / "cited.yaml").resolve())}


def compile_paper(source: Path, pdf: Path, numbers: Path, figures: Path,
                  machine_figures: Path | None = None, cited: Path | None = None,
                  map_figures: Path | None = None) -> None:
    """Compile with typst (offline); the paper reads numbers, figures and the cited
    figures of other work through sys.inputs so a test build can point them elsewhere."""
    import typst
    inputs = paper_inputs(source, numbers, figures, machine_figures, cited, map_figures)
    try:
        typst.compile(str(source), output=str(pdf), root="/", sys_inputs=inputs)
    except Exception as exc:  # typst raises its own error type with the diagnostics
        raise SpecproofError(f"{source}: typst failed: {_typst_message(exc)}") from None


def failed_claims(source: Path, numbers: Path, figures: Path, machine_figures: Path | None = None,
                  cited: Path | None = None, map_figures: Path | None = None) -> list[str]:
    """Every #claim of ``source`` that the numbers do not support, in document order: the
    source compiled with sys.inputs claims=list, where a failing claim is recorded as
    metadata labelled <failed-claim> instead of stopping the build at the first."""
    import typst
    inputs = paper_inputs(source, numbers, figures, machine_figures, cited, map_figures) | {"claims": "list"}
    try:
        found = typst.query(str(source), "<failed-claim>", field="value", format="json", root="/",
                            sys_inputs=inputs)
    except Exception as exc:
        raise SpecproofError(f"{source}: typst failed: {_typst_message(exc)}") from None
    return json.loads(found)


def _typst_message(exc: Exception) -> str:
    first = str(exc).strip().splitlines()
    return " ".join(line.strip() for line in first[:3]) if first else type(exc).__name__


def pdf_rebuild_error(pdf: Path, source: Path, numbers: Path, figures: Path,
                      machine_figures: Path | None = None, cited: Path | None = None,
                      map_figures: Path | None = None) -> str | None:
    """None when ``pdf`` is byte for byte what ``compile_paper`` makes of ``source`` with
    these numbers, figures and cited figures (the build is deterministic: the document has
    no date), else one line naming the PDF and what it was compared with."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        rebuilt = Path(tmp) / "rebuilt.pdf"
        compile_paper(Path(source), rebuilt, numbers=numbers, figures=figures,
                      machine_figures=machine_figures, cited=cited, map_figures=map_figures)
        if rebuilt.read_bytes() == Path(pdf).read_bytes():
            return None
    return (f"{pdf}: differs from a rebuild of {source} with {numbers}, {figures} and {cited}: "
            f"the PDF is not what its sources make")
