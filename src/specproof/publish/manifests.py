"""Frozen manifests: freeze a finished study, audit frozen studies, report drift.

A study is frozen once per machine: ``manifests/<study>/<machine>/`` holds that machine's
records and ``manifest.json`` = {study, machine, created, files: {name: {sha256, bytes}},
provenance_sha256, software, git}. A *record set* is named ``<study>@<machine>``
(``config/config.yaml`` lists the sets the paper uses); a bare ``<study>`` names the
unfrozen results of a run on this machine. Freezing over a frozen set needs ``force``
and then keeps the previous manifest under ``<set>/history/``; the new set is written
into a temporary directory beside its place (a name starting with '.', which no reader
lists) and renamed into place last, so an interruption, a kill included, never leaves a
half-frozen set or old and new records mixed; the next freeze clears what it left.
"""
from __future__ import annotations

import datetime as dt
import fcntl
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path

from ..catalog import format_records, newer_records, record
from ..errors import SpecproofError
from ..evidence.fingerprint import context_differences, fingerprint_of, identity_differences
from ..evidence.provenance import portable
from ..records import atomic_path, read_json, sha256_file, write_error, write_json
from .benchtables import markdown_table

MACHINE_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def split_set(set_id: str) -> tuple[str, str | None]:
    """'<study>@<machine>' -> (study, machine); a bare '<study>' -> (study, None)."""
    study, _, machine = str(set_id).partition("@")
    return study, machine or None


def compared_sets(studies: list[str]) -> list[str]:
    """The record sets the paper's machines section compares: the head study's (the first
    listed) when it is listed on two or more machines, else those of the first listed study
    that is; [] when none is."""
    by_study: dict[str, list[str]] = {}
    for set_id in studies:
        study, machine = split_set(set_id)
        if machine:
            by_study.setdefault(study, []).append(set_id)
    head = split_set(studies[0])[0] if studies else None
    multi = [sets for sets in by_study.values() if len(sets) > 1]
    if head in by_study and len(by_study[head]) > 1:
        return by_study[head]
    return multi[0] if multi else []


def set_dir(manifests: Path, set_id: str) -> Path:
    study, machine = split_set(set_id)
    return Path(manifests) / study / machine if machine else Path(manifests) / study


def is_frozen(manifests: Path, set_id: str) -> bool:
    return (set_dir(manifests, set_id) / "manifest.json").is_file()


def frozen_sets(manifests: Path, study: str) -> list[str]:
    """Every frozen record set of a study, '<study>@<machine>', sorted by machine; a name
    starting with '.' is a set a freeze is writing or retiring (``freeze``), never read."""
    base = Path(manifests) / study
    return [f"{study}@{d.name}" for d in sorted(base.iterdir()) if not d.name.startswith(".")
            and (d / "manifest.json").is_file()] if base.is_dir() else []


def all_frozen_sets(manifests: Path) -> list[str]:
    """Every frozen record set under ``manifests``, of every study."""
    base = Path(manifests)
    studies = sorted(d.name for d in base.iterdir() if d.is_dir() and not d.name.startswith(".")) \
        if base.is_dir() else []
    return [s for study in studies for s in frozen_sets(base, study)]


def label_clash(manifests: Path, machine: str, prov: dict) -> str | None:
    """The error line when the machine label ``machine`` already names, in a frozen set,
    a machine whose fingerprint differs from ``prov``'s (the identity fields of
    ``evidence.fingerprint`` both records hold); None when the label is free or names
    this machine."""
    mine = fingerprint_of(prov)
    for set_id in all_frozen_sets(manifests):
        if split_set(set_id)[1] != machine:
            continue
        theirs = fingerprint_of(read_json(set_dir(manifests, set_id) / "provenance.json"))
        fields = identity_differences(mine, theirs)
        if fields:
            return (f"--machine {machine}: already names the machine of {set_id}, a different machine "
                    f"from this run's ({', '.join(f'{f} {theirs[f]!s:.16} vs {mine[f]!s:.16}' for f in fields)}); "
                    "choose another label")
    return None


def machine_label(prov: dict) -> str:
    """A default machine label from provenance: the CPU model as a slug, e.g. 'amd-epyc'."""
    model = str(prov.get("cpu", {}).get("model") or prov.get("cpu", {}).get("machine") or "machine")
    model = re.sub(r"\((r|tm)\)|cpu|@.*$", "", model.lower())
    return re.sub(r"[^a-z0-9]+", "-", model).strip("-")[:40] or "machine"


def freeze(study: str, results: Path, manifests: Path, force: bool = False,
           machine: str | None = None) -> Path:
    """Copy a finished study's records into manifests/<study>/<machine>/ with their sha256;
    returns the path of the new manifest.json. ``machine`` defaults to a label made from
    the CPU model in the study's provenance. The set is written into a temporary directory
    beside its place and renamed into it as the last step (``_swap_in``), under a lock on
    the study's directory (``_freezing``); what an interrupted freeze left there is cleared
    first (``_clear_interrupted``)."""
    results = Path(results)
    missing = [f for f in format_records(1) if not (results / f).is_file()]
    if missing:
        raise SpecproofError(f"{results}: study {study!r} is not finished (missing {', '.join(missing)})")
    prov = read_json(results / "provenance.json")
    machine = machine or machine_label(prov)
    if not MACHINE_LABEL.match(machine):
        raise SpecproofError(f"--machine {machine!r}: use letters, digits, '-' and '_' only")
    clash = label_clash(manifests, machine, prov)
    if clash:
        raise SpecproofError(clash)
    dest = set_dir(manifests, f"{study}@{machine}")
    manifest_path = dest / "manifest.json"
    fmt = results_format(results)
    with _freezing(dest.parent):
        _clear_interrupted(dest)
        if manifest_path.exists() and not force:
            raise SpecproofError(f"{manifest_path}: study {study!r} is already frozen for machine {machine!r}; "
                                 "use --force to replace it (the previous manifest is kept), or freeze "
                                 "this run beside it with another --machine label")
        tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
        try:
            _write_aside(tmp, dest, results, fmt, {"study": study, "machine": machine, "format": fmt,
                                                   "software": prov.get("packages"), "git": prov.get("git")})
            _swap_in(tmp, dest)
        except OSError as exc:  # a full device: name the record, at its place in the set
            written = Path(exc.filename2 or exc.filename or tmp)
            raise write_error(dest / written.relative_to(tmp) if tmp in written.parents else written,
                              exc) from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return manifest_path


@contextmanager
def _freezing(study_dir: Path):
    """Hold an exclusive lock (``fcntl.flock``) on ``study_dir``, created, while a freeze
    writes beside its sets: a second freeze of the same study is refused in one line. The
    lock ends with its process, a killed one too."""
    study_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(study_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SpecproofError(f"{study_dir}: another freeze of this study is running; "
                                 "wait for it to end, then freeze again") from None
        yield
    finally:
        os.close(fd)


def _clear_interrupted(dest: Path) -> None:
    """Clear what an interrupted freeze of ``dest`` left beside it (under ``_freezing``, so
    no freeze is writing it): a retired set whose replacement never came in is moved back
    to ``dest``, so the set is as it was before that freeze; a retired set already
    replaced and every temporary set are removed. Readers never read either
    (``frozen_sets`` skips names starting with '.')."""
    for retired in sorted(dest.parent.glob(f".{dest.name}.old-*")):
        if dest.exists():
            shutil.rmtree(retired)
        else:
            retired.rename(dest)
    for tmp in dest.parent.glob(f".{dest.name}.tmp-*"):
        shutil.rmtree(tmp)


def _write_aside(tmp: Path, dest: Path, results: Path, fmt: int, fields: dict) -> None:
    """Write the set that will replace ``dest`` into ``tmp``, a new directory beside it:
    the records of format ``fmt`` copied from ``results`` with their sha256, the history
    of ``dest`` with its manifest added, and manifest.json (``fields`` plus the files, the
    creation time and the provenance's sha256), written last. Returns None."""
    tmp.mkdir()
    files = {}
    for name in format_records(fmt):
        shutil.copy2(results / name, tmp / name)
        files[name] = {"sha256": sha256_file(tmp / name), "bytes": (tmp / name).stat().st_size}
    if (dest / "manifest.json").exists():
        if (dest / "history").is_dir():
            shutil.copytree(dest / "history", tmp / "history")
        _keep_in_history(dest / "manifest.json", tmp / "history")
    write_json({**fields, "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "files": files, "provenance_sha256": files["provenance.json"]["sha256"]}, tmp / "manifest.json")


def _swap_in(tmp: Path, dest: Path) -> None:
    """Rename the complete set ``tmp`` to ``dest``; an existing ``dest`` is first renamed
    aside (retired) and removed once ``tmp`` is in place. Each rename is atomic: a kill
    leaves ``dest`` whole (old or new) or, between the two, absent with the old set kept
    beside it, which the next freeze moves back (``_clear_interrupted``)."""
    if dest.exists():
        retired = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        dest.rename(retired)
        tmp.rename(dest)
        shutil.rmtree(retired)
    else:
        tmp.rename(dest)


def _keep_in_history(manifest_path: Path, history: Path) -> None:
    """Copy a manifest into ``history`` as manifest-<its created stamp>.json."""
    stamp = str(read_json(manifest_path).get("created", "unknown")).replace(":", "").replace("+", "Z")
    history.mkdir(exist_ok=True)
    shutil.copy2(manifest_path, history / f"manifest-{stamp}.json")


def relabel(study: str, manifests: Path, old: str, new: str) -> Path:
    """Move the frozen set ``<study>@<old>`` to the machine label ``new`` (a label that
    turned out to name two machines): its records are moved unchanged (every sha256
    kept), its manifest is rewritten with ``machine: new`` and ``relabelled_from: old``,
    and the old manifest is kept under ``history/``. Refused when ``new`` is taken by this
    study or names another machine."""
    src, dest = set_dir(manifests, f"{study}@{old}"), set_dir(manifests, f"{study}@{new}")
    if not (src / "manifest.json").is_file():
        raise SpecproofError(f"{src / 'manifest.json'}: no frozen set {study}@{old} to relabel")
    if not MACHINE_LABEL.match(new) or dest.exists():
        raise SpecproofError(f"--machine {new!r}: " + ("already frozen for this study" if dest.exists()
                                                       else "use letters, digits, '-' and '_' only"))
    clash = label_clash(manifests, new, read_json(src / "provenance.json"))
    if clash:
        raise SpecproofError(clash)
    manifest = verify_hashes(manifests, f"{study}@{old}")
    _keep_in_history(src / "manifest.json", src / "history")
    write_json({**manifest, "machine": new, "relabelled_from": old,
                "relabelled": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")},
               src / "manifest.json")
    src.rename(dest)
    return dest / "manifest.json"


def results_format(results: Path) -> int:
    """The manifest format a finished study's results make: the newest format whose
    records they all hold (``catalog.format_records``), 1 when they hold no newer record
    (results written before those records); results holding some of a format's records
    but not all are refused, naming the first missing record."""
    held = [f for f in newer_records() if (Path(results) / f).is_file()]
    if not held:
        return 1
    fmt = max(record(f).since for f in held)
    missing = [f for f in format_records(fmt) if not (Path(results) / f).is_file()]
    if missing:
        raise SpecproofError(f"{Path(results) / missing[0]}: missing, while the study holds {held[0]}; "
                             "a study holds all of its raw records or was run before them")
    return fmt


def verify_hashes(manifests: Path, set_id: str) -> dict:
    """Re-hash every file a frozen manifest lists; error on the first mismatch."""
    dest = set_dir(manifests, set_id)
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


def manifest_sha256(manifests: Path, set_id: str) -> str | None:
    path = set_dir(manifests, set_id) / "manifest.json"
    return sha256_file(path) if path.is_file() else None


DEFAULT_CONFIG = Path("config/config.yaml")  # the audit command's --config default


def audit(studies: list[str], manifests: Path, numbers_path: Path,
          benchmarks: Path | None = None, config: Path | None = DEFAULT_CONFIG,
          cited: Path | None = None, seeds: Path | None = None, pdf: dict | None = None) -> list[str]:
    """Re-hash every frozen file, compare each manifest with the committed one (in a git
    checkout), check each set's records (the registry of ``audit.checks``: the records its
    manifest format holds, provenance and seals, the chain of recorded times, stored Q and
    copied P ids, every summary and derived file against its recomputation), and recompute every row of
    numbers.json: each set's from its frozen raw records, the cross-machine ones, the
    benchmark tables' from their JSON (checked against their .md), the paper's from
    ``config`` (its title where that config lists these studies); a row recomputed from
    none of them is an error, as is the first mismatch. Returns a line per check passed,
    the sets frozen before some raw records were written, and per set how many numbers
    came from a stage summary because the set holds no raw record for them. ``cited``: the
    cited figures' quotes are checked (against the source files where ``seeds`` holds
    them, ``publish.cited``); ``pdf``: the arguments of ``paper.pdf_rebuild_error``, the
    PDF compared byte for byte with a rebuild."""
    from .numbers import machine_numbers
    numbers = read_json(numbers_path)
    report, analyses, shas, recomputed = [], {}, {}, {}
    for set_id in studies:
        analyses[set_id], shas[set_id], rows, lines = _audit_set(set_id, manifests, numbers, numbers_path)
        recomputed.update(rows)
        report += lines
    rows = machine_numbers(analyses, shas)
    for prefix in ("machines.", "namesake."):
        _check(numbers, {k: v for k, v in rows.items() if k.startswith(prefix)}, prefix, numbers_path)
    recomputed.update(rows)
    if rows:
        report.append(f"machines: {len(rows)} cross-machine numbers match {numbers_path}")
    rows = _audit_replicates(studies, config, analyses, shas, numbers, numbers_path)
    recomputed.update(rows)
    if rows:
        report.append(f"replicates: {len(rows)} replicate comparisons match {numbers_path}")
    if benchmarks is not None:
        rows, line = _audit_bench(Path(benchmarks), numbers, numbers_path, cited)
        recomputed.update(rows)
        report.append(line)
    rows, line = _audit_paper(studies, manifests, config, numbers, numbers_path)
    recomputed.update(rows)
    report.append(line)
    report += audit_unread_sets(studies, manifests, config)
    if cited is not None:
        rows = _audit_cited_rows(Path(cited), numbers, numbers_path)
        recomputed.update(rows)
        report.append(f"cited: {len(rows)} cited figures and goals match {numbers_path} and {cited}")
    _check_all_recomputed(numbers, recomputed, numbers_path)
    report.append(f"numbers: all {len(numbers)} rows of {numbers_path} recomputed")
    if pdf is not None:
        report += _audit_figures(studies, manifests, config, analyses[studies[0]], pdf)
    return report + _audit_paper_files(cited, seeds, pdf)


def _audit_figures(studies: list[str], manifests: Path, config: Path | None, head, pdf: dict) -> list[str]:
    """Report lines for the figures the PDF is built with: the head set's (``pdf``'s
    figures) and the break-even map (its map_figures, when ``config`` lists these studies
    and break_even sets), each redrawn from the frozen records and compared pixel by pixel
    (``figures.redraw_error``); the first difference raises."""
    from ..study.config import load_config
    from .figures import break_even_figure, make_all, redraw_error
    shown = Path(pdf["figures"])
    draws = [(shown, lambda out: make_all(head, set_dir(manifests, studies[0]), out))]
    cfg = load_config(Path(config)) if config is not None and Path(config).is_file() else None
    if cfg is not None and list(cfg["studies"]) == list(studies) and cfg.get("break_even"):
        sets = {s: set_dir(manifests, s) for s in cfg["break_even"]}
        draws.append((Path(pdf.get("map_figures") or shown), lambda out: break_even_figure(sets, out)))
    for where, draw in draws:
        error = redraw_error(where, draw)
        if error:
            raise SpecproofError(error)
    return [f"figures: {', '.join(str(w) for w, _ in draws)} match their redraw from the frozen records"]


def audit_unread_sets(studies: list[str], manifests: Path, config: Path | None) -> list[str]:
    """The frozen sets ``config`` lists as retired or pending, audited as the read ones are
    (hashes, the committed manifest, every record check and recomputation their format
    allows) but without numbers: a reader may cite any set under ``manifests``."""
    from ..study.config import load_config
    from .audit.checks import run_set_checks
    from .audit.provenance import UNREAD_SETS
    cfg = load_config(Path(config)) if config is not None and Path(config).is_file() else None
    if cfg is None or list(cfg["studies"]) != list(studies):
        return []
    report = []
    for set_id in (e["set"] for field in UNREAD_SETS for e in cfg.get(field) or []):
        if not is_frozen(manifests, set_id):
            raise SpecproofError(f"{config}: field retired/pending: {set_id} is not frozen under {manifests}")
        manifest = verify_hashes(manifests, set_id)
        _, lines = run_set_checks(set_id, manifest, set_dir(manifests, set_id), read_by_paper=False)
        report += [*lines, f"{set_id} (not read by the paper): {len(manifest['files'])} frozen files "
                   "match their sha256, and its records match their recomputation"]
    return report


def _audit_replicates(studies, config, analyses, shas, numbers: dict, numbers_path: Path) -> dict:
    """replicate.* rows recomputed from the audited sets, for the replicates ``config``
    names when it lists these studies (none otherwise: their rows then stay unrecomputed)."""
    from ..study.config import load_config
    from .replicate import config_replicate_numbers
    cfg = load_config(Path(config)) if config is not None and Path(config).is_file() else None
    if cfg is None or list(cfg["studies"]) != list(studies):
        return {}
    rows = config_replicate_numbers(cfg, studies, str(config), analyses, shas)
    _check(numbers, rows, "replicate.", numbers_path)
    return rows


def _audit_paper_files(cited: Path | None, seeds: Path | None, pdf: dict | None) -> list[str]:
    """Report lines for cited.yaml (every cited figure in its quoted sentence) and the PDF
    (equal to its rebuild); the first problem raises, naming the file and field."""
    from .cited import cited_errors, read_cited
    from .paper import pdf_rebuild_error
    lines = []
    if cited is not None:
        errors = cited_errors(read_cited(cited),
                              seeds if seeds and Path(seeds).is_dir() else None)
        if errors:
            raise SpecproofError(f"{cited}: {errors[0]}")
        lines.append(f"cited: every figure of {cited} stands in its quoted sentence"
                     + (f", each quote found in its source under {seeds}" if seeds and Path(seeds).is_dir()
                        else " (source files not at hand: quotes not compared with them)"))
    if pdf is not None:
        error = pdf_rebuild_error(**pdf)
        if error:
            raise SpecproofError(error)
        lines.append(f"paper: {pdf['pdf']} is byte for byte a rebuild of {pdf['source']}")
    return lines


def _audit_set(set_id: str, manifests: Path, numbers: dict, numbers_path: Path):
    """(analysis, manifest sha256, recomputed rows, report lines) of one frozen set."""
    from .audit.checks import run_set_checks
    from .numbers import study_numbers, summary_only
    if not is_frozen(manifests, set_id):
        raise SpecproofError(f"{set_dir(manifests, set_id) / 'manifest.json'}: record set {set_id!r} is not frozen")
    manifest = verify_hashes(manifests, set_id)
    analysis, lines = run_set_checks(set_id, manifest, set_dir(manifests, set_id))
    report = [f"{set_id}: {len(manifest['files'])} frozen files match their sha256", *lines]
    report.append(f"{set_id}: provenance, seals, recorded times, stored Q and P ids, and every summary and "
                  "derived file match their recomputation from the raw records")
    sha = manifest_sha256(manifests, set_id)
    recomputed = study_numbers(analysis, sha, prefix=set_id)
    _check(numbers, recomputed, f"{set_id}.", numbers_path)
    report.append(f"{set_id}: {len(recomputed)} numbers recomputed from frozen records match {numbers_path}")
    copied = summary_only(recomputed)
    report.append(f"{set_id}: {sum(copied.values())} of them checked only against a summary, the set "
                  "holding no raw record for them" + (": " + ", ".join(
                      f"{n} from {name}" for name, n in sorted(copied.items())) if copied else ""))
    return analysis, sha, recomputed, report


def _audit_bench(benchmarks: Path, numbers: dict, numbers_path: Path, cited: Path | None) -> tuple[dict, str]:
    """(bench.* rows recomputed from the tables' JSON and bench_goal.* rows from them and
    ``cited``'s goals, report line); each .md is the table rendered from its JSON. Each
    JSON is read once (read_tables) for all three checks."""
    from .audit.checks import run_checks
    from .benchtables import bench_numbers, read_tables
    from .benchgoals import cited_goal_rows
    tables = read_tables(benchmarks)
    rows = bench_numbers(tables)
    found = run_checks("benchmarks", benchmarks=benchmarks, tables=tables)
    recomputed, committed = found["bench_values"], found["committed_tables"]
    _check(numbers, rows, "bench.", numbers_path, check_source=False)  # paths as given
    goals = cited_goal_rows(rows, cited)
    _check(numbers, goals, "bench_goal.", numbers_path, check_source=False)
    tables = len({v["source"] for v in rows.values()})
    return rows | goals, (f"benchmarks: {len(rows)} numbers from {tables} tables in {benchmarks} and "
                          f"{len(goals)} goal verdicts match {numbers_path} and their sha256; each .md is the "
                          f"table its JSON renders; {recomputed}; {committed}")


def _audit_cited_rows(cited: Path, numbers: dict, numbers_path: Path) -> dict:
    """cited.* rows recomputed from the cited yaml, which must be the committed one where
    it is tracked (its quotes are checked apart)."""
    from .audit.provenance import committed_sha256
    from .cited import cited_rows, read_cited
    committed = committed_sha256(cited.parent, cited.name)
    if committed is not None and committed != sha256_file(cited):
        raise SpecproofError(f"{cited}: differs from the committed one (git show HEAD:{cited}): its goals and "
                             "figures decide rows the paper prints")
    rows = cited_rows(read_cited(cited), str(cited))
    _check(numbers, rows, "cited.", numbers_path, check_source=False)
    return rows


def _audit_paper(studies, manifests: Path, config, numbers: dict, numbers_path: Path) -> tuple[dict, str]:
    """(paper.* rows recomputed, report line). A title that cannot be recomputed (no
    config listing these studies) is taken as numbers.json has it, and the line says so;
    numbers.json without paper.* rows (a study's numbers alone) is named, not an error."""
    from .audit.checks import paper_numbers
    if not any(k.startswith("paper.") for k in numbers):
        return {}, f"paper: {numbers_path} holds no paper.* rows"
    rows, note = paper_numbers(studies, manifests, config)
    if note and "paper.title" in numbers:
        rows["paper.title"] = numbers["paper.title"]
    _check(numbers, rows, "paper.", numbers_path)
    return rows, f"paper: {len(rows)} rows match {numbers_path}" + (f"; {note}" if note else f" and {config}")


def _check_all_recomputed(numbers: dict, recomputed: dict, numbers_path: Path) -> None:
    extra = sorted(set(numbers) - set(recomputed))
    if extra:
        raise SpecproofError(f"{numbers_path}: {extra[0]}: in numbers.json but recomputed from no audited "
                             f"record set, benchmark table or config ({len(extra)} such rows)")


def _check(numbers: dict, recomputed: dict, prefix: str, numbers_path: Path,
           check_source: bool = True) -> None:
    from .numbers import compare
    bad = compare({k: v for k, v in numbers.items() if k.startswith(prefix)}, recomputed,
                  check_source=check_source)
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


def matching_frozen(manifests: Path, study: str, prov: dict) -> tuple[str | None, str | None, list[str]]:
    """(the frozen record set of ``study`` from the same machine as ``prov`` by fingerprint,
    or None; the nearest set otherwise, the one with the fewest differing identity fields,
    or None when the study has no frozen set; those differing fields and context fields:
    kernel, bandwidth, build flags)."""
    mine, best = fingerprint_of(prov), None
    for set_id in frozen_sets(manifests, study):
        theirs = fingerprint_of(read_json(set_dir(manifests, set_id) / "provenance.json"))
        fields = identity_differences(mine, theirs)
        if not fields:
            return set_id, set_id, context_differences(mine, theirs)
        if best is None or len(fields) < len(best[1]):
            best = (set_id, fields + context_differences(mine, theirs))
    return (None, *best) if best else (None, None, [])


def _drift_heading(study: str, new_dir: Path, manifests: Path, prov: dict) -> tuple[str | None, list[str]]:
    """(the set to compare with, the report's opening lines): the frozen set of the same
    machine, else the nearest one labelled "another machine" with every field that
    differs, else none."""
    same, nearest, fields = matching_frozen(manifests, study, prov)
    mine = fingerprint_of(prov)
    if same:
        return same, [f"# Drift report: {study}, rerun against {same} (the same machine fingerprint)", "",
                      f"The rerun `{new_dir}` and {same} come from machines with the same fingerprint "
                      f"({mine.get('model_name')})" + (f"; they differ only in context: {', '.join(fields)}"
                                                      if fields else "") + "."]
    if nearest is None:
        return None, [f"# Drift report: {study}, no frozen record set to compare with", "",
                      f"No frozen record set of {study} exists, so there is nothing to compare `{new_dir}` "
                      f"with. Freeze this run with `specproof freeze {study} --machine <label>`."]
    other = read_json(set_dir(manifests, nearest) / "provenance.json")
    theirs = fingerprint_of(other)
    simd = [set((p.get("cpu") or {}).get("simd_flags") or []) for p in (other, prov)]
    flags = (f" SIMD flags only on {nearest}'s host: {', '.join(sorted(simd[0] - simd[1])) or 'none'}; only on "
             f"this run's: {', '.join(sorted(simd[1] - simd[0])) or 'none'}." if simd[0] != simd[1] else "")
    return nearest, [f"# Another machine, not drift: no frozen record set of {study} matches this machine; "
                     f"the nearest, {nearest}, differs in {', '.join(fields)}", "",
                     "The comparison below is between two machines, not drift of one." + flags, "",
                     *markdown_table(["field", nearest, "this run"],
                                     [[f, str(theirs.get(f))[:40], str(mine.get(f))[:40]] for f in fields])]


def drift(study: str, results: Path, manifests: Path, out: Path) -> None:
    """drift.md: the rerun against the frozen record set of the same machine fingerprint
    (or, labelled "another machine", the nearest one, naming every field that differs):
    provenance differences and headline numbers with CIs."""
    from ..analysis.analyze import analyze
    new_dir = Path(results)
    set_id, opening = _drift_heading(study, new_dir, manifests, read_json(new_dir / "provenance.json"))
    if set_id is None:
        with atomic_path(Path(out)) as tmp:
            tmp.write_text("\n".join(opening) + "\n")
        return
    old_dir = set_dir(manifests, set_id)
    new, old = analyze(new_dir), analyze(old_dir)
    pn = _flatten({k: portable(new.provenance).get(k) for k in PROVENANCE_KEYS})
    po = _flatten({k: portable(old.provenance).get(k) for k in PROVENANCE_KEYS})
    lines = [*opening, "",
             f"Rerun: `{new_dir}`; frozen: `{old_dir}` ({set_id}).", "", "## Provenance differences", ""]
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
    with atomic_path(Path(out)) as tmp:
        tmp.write_text("\n".join(lines) + "\n")
