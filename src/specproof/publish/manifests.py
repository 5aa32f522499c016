"""Frozen manifests: freeze a finished study, audit frozen studies, report drift.

manifests/<study>/manifest.json = {study, created, files: {name: {sha256, bytes}},
provenance_sha256, software, git}. Freezing over a frozen study needs ``force`` and then
keeps the previous manifest under manifests/<study>/history/.
"""
from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from ..errors import SpecproofError
from ..records import read_json, sha256_file, write_json

RAW = ["provenance.json", "models.json", "prompts.jsonl", "reference.parquet", "reference.seal.json",
       "runs.parquet", "rounds.parquet", "micro.parquet", "pit.parquet", "batch_invariance.parquet",
       "qualification.parquet", "margins.parquet", "prediction_seal.json", "prediction.json",
       "level1.json", "level2.json", "calibration.parquet", "calibration.json", "advise.parquet"]
OPTIONAL: list[str] = []
DERIVED = ["agreement.parquet", "costs.parquet", "stats.json", "certificate.json"]


def is_frozen(manifests: Path, study: str) -> bool:
    return (Path(manifests) / study / "manifest.json").is_file()


def freeze(study: str, results: Path, manifests: Path, force: bool = False) -> Path:
    results, dest = Path(results), Path(manifests) / study
    missing = [f for f in RAW + DERIVED if not (results / f).is_file()]
    if missing:
        raise SpecproofError(f"{results}: study {study!r} is not finished (missing {', '.join(missing)})")
    manifest_path = dest / "manifest.json"
    if manifest_path.exists():
        if not force:
            raise SpecproofError(f"{manifest_path}: study {study!r} is already frozen; "
                                 "use --force to replace it (the previous manifest is kept)")
        old = read_json(manifest_path)
        hist = dest / "history"
        hist.mkdir(parents=True, exist_ok=True)
        stamp = str(old.get("created", "unknown")).replace(":", "").replace("+", "Z")
        shutil.copy2(manifest_path, hist / f"manifest-{stamp}.json")
    dest.mkdir(parents=True, exist_ok=True)
    files = {}
    for name in RAW + [f for f in OPTIONAL if (results / f).is_file()] + DERIVED:
        shutil.copy2(results / name, dest / name)
        files[name] = {"sha256": sha256_file(dest / name), "bytes": (dest / name).stat().st_size}
    prov = read_json(dest / "provenance.json")
    write_json({"study": study, "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "files": files, "provenance_sha256": files["provenance.json"]["sha256"],
                "software": prov.get("packages"), "git": prov.get("git")}, manifest_path)
    return manifest_path


def verify_hashes(manifests: Path, study: str) -> dict:
    """Re-hash every file a frozen manifest lists; error on the first mismatch."""
    dest = Path(manifests) / study
    manifest = read_json(dest / "manifest.json")
    for name, rec in sorted(manifest["files"].items()):
        path = dest / name
        if not path.is_file():
            raise SpecproofError(f"{path}: listed in {dest / 'manifest.json'} but missing")
        actual = sha256_file(path)
        if actual != rec["sha256"]:
            raise SpecproofError(f"{path}: sha256 {actual[:16]} does not match the manifest's "
                                 f"{rec['sha256'][:16]} (the frozen record was changed)")
    return manifest


def manifest_sha256(manifests: Path, study: str) -> str | None:
    path = Path(manifests) / study / "manifest.json"
    return sha256_file(path) if path.is_file() else None


def audit(studies: list[str], manifests: Path, numbers_path: Path,
          benchmarks: Path | None = None) -> list[str]:
    """Re-hash every frozen file and recompute every number from the frozen raw records
    (and the benchmark tables' numbers from their JSON, checked against their .md);
    error naming the first mismatch. Returns a line per check passed."""
    from ..analysis.analyze import analyze
    from .benchtables import bench_numbers
    from .numbers import study_numbers
    numbers = read_json(numbers_path)
    report = []
    for study in studies:
        if not is_frozen(manifests, study):
            raise SpecproofError(f"{Path(manifests) / study / 'manifest.json'}: study {study!r} is not frozen")
        manifest = verify_hashes(manifests, study)
        report.append(f"{study}: {len(manifest['files'])} frozen files match their sha256")
        recomputed = study_numbers(analyze(Path(manifests) / study), manifest_sha256(manifests, study))
        _check(numbers, recomputed, f"{study}.", numbers_path)
        report.append(f"{study}: {len(recomputed)} numbers recomputed from frozen records match {numbers_path}")
    if benchmarks is not None:
        recomputed = bench_numbers(benchmarks)
        _check(numbers, recomputed, "bench.", numbers_path)
        tables = len({v["source"] for v in recomputed.values()})
        report.append(f"benchmarks: {len(recomputed)} numbers from {tables} tables in {benchmarks} "
                      f"match {numbers_path} and their sha256")
    return report


def _check(numbers: dict, recomputed: dict, prefix: str, numbers_path: Path) -> None:
    from .numbers import compare
    bad = compare({k: v for k, v in numbers.items() if k.startswith(prefix)}, recomputed)
    if bad:
        raise SpecproofError(f"{numbers_path}: {bad}")


def _flatten(d, prefix=""):
    out = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
    else:
        out[prefix[:-1]] = d
    return out


PROVENANCE_KEYS = ("cpu", "gpus", "os", "python", "packages", "llama_cpp", "torch", "git", "models")


def drift_unfrozen(study: str, manifests: Path, out: Path) -> None:
    """drift.md for a study with no frozen manifest: says so, and how to freeze it."""
    Path(out).write_text(f"# Drift report: {study}\n\nNo frozen manifest at "
                         f"{Path(manifests) / study}; nothing to compare. Freeze this run "
                         f"with `specproof freeze {study}`.\n")


def drift(study: str, results: Path, manifests: Path, out: Path) -> None:
    """drift.md: provenance differences and headline numbers, rerun vs frozen, with CIs."""
    from ..analysis.analyze import analyze
    from .benchtables import markdown_table
    new_dir, old_dir = Path(results), Path(manifests) / study
    new, old = analyze(new_dir), analyze(old_dir)
    pn = _flatten({k: new.provenance.get(k) for k in PROVENANCE_KEYS})
    po = _flatten({k: old.provenance.get(k) for k in PROVENANCE_KEYS})
    lines = [f"# Drift report: {study}", "", f"Rerun: `{new_dir}`; frozen: `{old_dir}`.", "",
             "## Provenance differences", ""]
    diffs = [k for k in sorted(set(pn) | set(po)) if pn.get(k) != po.get(k)
             and not k.endswith(("captured_at", ".path"))]
    if diffs:
        lines += markdown_table(["field", "frozen", "rerun"],
                                [[k, str(po.get(k))[:60], str(pn.get(k))[:60]] for k in diffs])
    else:
        lines.append("None.")
    lines += ["", "## Headline numbers (geometric-mean speedup over prompts, 95% bootstrap CI)", ""]
    headline = []
    old_s = {(r["pair"], r["config"]): r for r in old.speedups if r["workload"] == "all"}
    for r in new.speedups:
        if r["workload"] != "all":
            continue
        o = old_s.get((r["pair"], r["config"]))
        fmt = lambda x: f"{x['gmean_speedup']:.2f} [{x['ci_low']:.2f}, {x['ci_high']:.2f}]"
        if o is None:
            headline.append([r["pair"], r["config"], "—", fmt(r), "—"])
            continue
        overlap = not (r["ci_high"] < o["ci_low"] or o["ci_high"] < r["ci_low"])
        headline.append([r["pair"], r["config"], fmt(o), fmt(r), "yes" if overlap else "NO"])
    lines += markdown_table(["pair", "config", "frozen", "rerun", "overlap"], headline)
    lines += ["", "## Losslessness", "",
              f"- certificate KS p-value: frozen {old.certificate['ks_pvalue']:.3g}, rerun {new.certificate['ks_pvalue']:.3g}",
              f"- sealed predictions P: frozen {old.prediction['P_matched']}/{old.prediction['P_total']}, "
              f"rerun {new.prediction['P_matched']}/{new.prediction['P_total']}"]
    from ..analysis.analyze import qualification_summary
    qo, qn = qualification_summary(old.qualification), qualification_summary(new.qualification)
    m = qo.merge(qn, on=["target", "verify_mode"], suffixes=("_frozen", "_rerun"), how="outer")
    for r in m.itertuples():
        lines.append(f"- qualification {r.target} {r.verify_mode}: frozen {r.matched_frozen}/{r.total_frozen}, "
                     f"rerun {r.matched_rerun}/{r.total_rerun}")
    Path(out).write_text("\n".join(lines) + "\n")
