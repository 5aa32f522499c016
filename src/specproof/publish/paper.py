"""numbers.json for every study in config/config.yaml and every benchmark table, and the
Typst paper build.

A study with a frozen manifest is read from manifests/<study>/, otherwise from
results/<study>/. The paper (paper/paper.typ) reads paper/build/numbers.json; a key the
paper uses that numbers.json lacks fails the build.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import SpecproofError
from .manifests import is_frozen, manifest_sha256
from ..records import write_json


def records_dir(study: str, manifests: Path, results: Path) -> Path:
    return Path(manifests) / study if is_frozen(manifests, study) else Path(results) / study


def build_numbers(config: dict, manifests: Path, results: Path, out: Path,
                  benchmarks: Path | None = None) -> dict:
    """Every study's numbers, the benchmark tables' (``bench.*``, from ``benchmarks``)
    and the paper's own (title, head study, frozen or not)."""
    from ..analysis.analyze import analyze
    from .benchtables import bench_numbers
    from .numbers import study_numbers
    numbers: dict = bench_numbers(benchmarks) if benchmarks is not None else {}
    for study in config["studies"]:
        d = records_dir(study, manifests, results)
        numbers.update(study_numbers(analyze(d), manifest_sha256(manifests, study)))
    head = config.get("study", config["studies"][0])
    meta = {"paper.title": config.get("paper", {}).get("title", "specproof"), "paper.study": head,
            "paper.frozen": is_frozen(manifests, head)}
    for k, v in meta.items():
        numbers[k] = {"value": v, "unit": "text", "source": "config/config.yaml",
                      "manifest_sha256": manifest_sha256(manifests, head)}
    write_json(numbers, out)
    return numbers


def compile_paper(source: Path, pdf: Path, numbers: Path, figures: Path) -> None:
    """Compile with typst (offline); the paper reads numbers and figures through
    sys.inputs so a test build can point them elsewhere."""
    import typst
    numbers, figures = Path(numbers).resolve(), Path(figures).resolve()
    if not numbers.is_file():
        raise SpecproofError(f"{numbers}: numbers.json does not exist")
    try:
        typst.compile(str(source), output=str(pdf), root="/",
                      sys_inputs={"numbers": str(numbers), "figures": str(figures)})
    except Exception as exc:  # typst raises its own error type with the diagnostics
        first = str(exc).strip().splitlines()
        msg = " ".join(line.strip() for line in first[:3]) if first else type(exc).__name__
        raise SpecproofError(f"{source}: typst failed: {msg}") from None
