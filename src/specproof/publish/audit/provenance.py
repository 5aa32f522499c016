"""Audit checks of the provenance family: a set holds the records its manifest format
promises (``catalog``), its provenance is the one it was frozen from, the seals hash the
provenance and prompts they name, and the manifest, provenance commit and config agree
with the committed checkout.
"""
from __future__ import annotations

import subprocess
from pathlib import Path


from ...catalog import FORMATS, format_records, needed_for, newer_records
from ...errors import SpecproofError
from ...records import read_json, sha256_file
from ..manifests import split_set
from .common import parsed_time
from .registry import MANIFEST, Audit, SetAudit, register


# The frozen sets written before the stages wrote their newer raw records
# (``catalog.newer_records``), by the sha256 of their manifest.json: the only sets whose
# numbers may come from stage summaries. Any other set lacking a raw record (a format-2
# set with its newer records deleted, or one of these with its summaries edited and
# re-hashed) is an error.
LEGACY_SETS = {
    "20a559fce0d94e82594450921ff0353bb586c5dfb58c94316fdd3b6113498a8e": "cpu-smollm2@xeon-avx512",
    "dd2cbd2d9e189727a6f11ae9e429882cfdb20ff02c78e60e27e7f9237d2af5e6": "cpu-smollm2@epyc-avx2",
}


def manifest_format(manifest: dict) -> tuple[int, str]:
    """(format, 'recorded' | 'inferred'): the manifest's recorded ``format``, else the
    format its listed records show: 2 when it lists any record format 2 added, else 1."""
    if "format" in manifest:
        return int(manifest["format"]), "recorded"
    return (2 if set(manifest["files"]) & set(newer_records()) else 1), "inferred"


def check_records(manifest: dict, dest: Path) -> int:
    """Every record the manifest's format holds is listed (a missing raw record is an
    error, never a silent fall-back to a summary), a set lacking any record of the current
    format is one of the legacy sets (``LEGACY_SETS``), and no record the analysis would
    read lies in the set unlisted (unhashed). Returns the format."""
    fmt, how = manifest_format(manifest)
    if fmt not in FORMATS:
        raise SpecproofError(f"{dest / 'manifest.json'}: field format: unknown manifest format {fmt!r} "
                             f"(known: {', '.join(map(str, FORMATS))})")
    listed = set(manifest["files"])
    for name in format_records(fmt):
        if name not in listed:
            raise SpecproofError(f"{dest / name}: missing from a set of manifest format {fmt} ({how}), "
                                 f"which holds it; {needed_for(name)} are computed from it")
    check_legacy(dest, fmt, [f for f in format_records() if f not in listed])
    for name in format_records():
        if name not in listed and (dest / name).exists():
            raise SpecproofError(f"{dest / name}: not listed in {dest / 'manifest.json'} (unhashed), "
                                 "yet the analysis would read it")
    return fmt


def check_legacy(dest: Path, fmt: int, lacks: list[str]) -> None:
    """A set lacking raw records (``lacks``, of manifest format ``fmt``) must be one of
    ``LEGACY_SETS``, its manifest.json unchanged since it was frozen."""
    if not lacks:
        return
    digest = sha256_file(dest / "manifest.json")
    if digest not in LEGACY_SETS:
        raise SpecproofError(
            f"{dest / 'manifest.json'}: field files lacks {lacks[0]} (manifest format {fmt}), and the "
            f"manifest (sha256 {digest[:12]}) is not one of the legacy sets frozen before the raw "
            "records were written; only those may have numbers from summaries")


def format_line(set_id: str, manifest: dict) -> str | None:
    """The report's line naming a set frozen before some raw records were written, or None."""
    fmt, how = manifest_format(manifest)
    lacks = [f for f in format_records() if f not in format_records(fmt)]
    if not lacks:
        return None
    return (f"{set_id}: manifest format {fmt} ({how}), frozen before {', '.join(lacks)} were "
            "written; the numbers computed from them come from the stage summaries")


def check_provenance(manifest: dict, dest: Path, set_id: str) -> None:
    """provenance.json is the provenance the manifest was frozen from: its git commit and
    dirty flag equal the manifest's ``git``, its sha256 the manifest's
    ``provenance_sha256``; the record does not contradict its own CPU
    (``fingerprint.cpu_contradiction``); the manifest's study (and machine, where recorded)
    is the set's."""
    prov, path = read_json(dest / "provenance.json"), dest / "provenance.json"
    for field in ("commit", "dirty"):
        have, want = (prov.get("git") or {}).get(field), (manifest.get("git") or {}).get(field)
        if have != want:
            raise SpecproofError(f"{path}: field git.{field} is {have!r}, the manifest's git.{field} "
                                 f"is {want!r} ({dest / 'manifest.json'})")
    if manifest.get("provenance_sha256") != manifest["files"]["provenance.json"]["sha256"]:
        raise SpecproofError(f"{dest / 'manifest.json'}: field provenance_sha256 is not the sha256 of "
                             f"the provenance.json it lists")
    from ...evidence.fingerprint import cpu_contradiction
    contradiction = cpu_contradiction(prov)
    if contradiction:
        raise SpecproofError(f"{path}: {contradiction}")
    study, machine = split_set(set_id)
    for field, want in (("study", study), ("machine", machine)):
        if field in manifest and manifest[field] != want:
            raise SpecproofError(f"{dest / 'manifest.json'}: field {field} is {manifest[field]!r}, "
                                 f"the record set is {set_id!r}")


def check_seal_hashes(dest: Path) -> None:
    """reference.seal.json's provenance_sha256 is the sha256 of provenance.json, and
    provenance.json's prompts_sha256 the sha256 of prompts.jsonl."""
    prov_sha = sha256_file(dest / "provenance.json")
    sealed = read_json(dest / "reference.seal.json").get("provenance_sha256")
    if sealed != prov_sha:
        raise SpecproofError(f"{dest / 'reference.seal.json'}: field provenance_sha256 is {str(sealed)[:12]}, "
                             f"the sha256 of provenance.json is {prov_sha[:12]}")
    prompts_sha = sha256_file(dest / "prompts.jsonl")
    recorded = read_json(dest / "provenance.json").get("prompts_sha256")
    if recorded != prompts_sha:
        raise SpecproofError(f"{dest / 'provenance.json'}: field prompts_sha256 is {str(recorded)[:12]}, "
                             f"the sha256 of prompts.jsonl is {prompts_sha[:12]}")


def committed_manifest_line(dest: Path, set_id: str) -> str:
    """The manifest.json against the committed one (git show HEAD:<path>): an error when
    they differ; a report line saying it matched, or why it could not be compared."""
    path = dest / "manifest.json"
    git = lambda *args: subprocess.run(["git", "-C", str(dest), *args], capture_output=True)
    try:
        tracked = git("ls-files", "--error-unmatch", "manifest.json")
    except OSError:
        return f"{set_id}: not compared with a committed manifest (git is not available)"
    if tracked.returncode != 0:
        return f"{set_id}: not compared with a committed manifest ({path} is not tracked in a git checkout)"
    committed = committed_sha256(dest, "manifest.json")
    if committed is None:
        return f"{set_id}: not compared with a committed manifest ({path} is not in HEAD)"
    if committed != sha256_file(path):
        raise SpecproofError(f"{path}: manifest.json differs from the committed one (git show HEAD:{path})")
    added = git("log", "--diff-filter=A", "--format=%H", "--", "manifest.json").stdout.decode().split()
    if added and committed_sha256(dest, "manifest.json", added[-1]) != committed:
        raise SpecproofError(f"{path}: manifest.json was changed after the commit that froze it ({added[-1][:12]}); "
                             "a frozen set is never re-frozen in place")
    return f"{set_id}: manifest.json is the committed one, unchanged since it was frozen"


def provenance_commit_line(dest: Path, set_id: str, prov: dict) -> str:
    """The provenance's git commit in the checkout of specproof's code that holds the set: it
    must be a commit of HEAD's history, no later than the provenance's captured_at, and (for
    a clean tree) hold the study config
    whose sha256 the provenance records (study.config_sha256) and which parses to its
    study.config. A report line saying so, or
    why it could not be compared (no git, or the set is not in a checkout)."""
    import hashlib
    import yaml
    commit, study = (prov.get("git") or {}).get("commit"), prov.get("study") or {}
    where = f"{dest / 'provenance.json'}: field git.commit"
    git = lambda *args: subprocess.run(["git", "-C", str(dest), *args], capture_output=True)  # noqa: E731
    try:
        inside = git("rev-parse", "--is-inside-work-tree")
    except OSError:
        return f"{set_id}: provenance's commit not checked (git is not available)"
    if inside.returncode != 0 or not commit:
        return f"{set_id}: provenance's commit not checked ({dest} is not in a git checkout, or it names none)"
    top = git("rev-parse", "--show-toplevel").stdout.decode().strip()
    if not git("ls-tree", "HEAD", "--", f"{top}/src/specproof/__init__.py").stdout.strip():
        return f"{set_id}: provenance's commit not checked (the checkout holding {dest} does not hold specproof's code)"
    if git("merge-base", "--is-ancestor", str(commit), "HEAD").returncode != 0:
        raise SpecproofError(f"{where} is {commit!r}, not a commit of this checkout's history (HEAD and its ancestors)")
    dated = parsed_time(git("show", "-s", "--format=%cI", str(commit)).stdout.decode().strip(), where)
    if dated > parsed_time(prov.get("captured_at"), f"{dest / 'provenance.json'}: field captured_at"):
        raise SpecproofError(f"{where} is {commit[:12]}, committed at {dated.isoformat()}, after the provenance's "
                             f"captured_at ({prov.get('captured_at')})")
    if (prov.get("git") or {}).get("dirty") is False and study.get("name"):
        shown = git("show", f"{commit}:config/studies/{study['name']}.yaml")
        have = hashlib.sha256(shown.stdout).hexdigest() if shown.returncode == 0 else None
        if have != study.get("config_sha256"):
            raise SpecproofError(f"{dest / 'provenance.json'}: field study.config_sha256 is "
                                 f"{str(study.get('config_sha256'))[:12]}, but config/studies/{study['name']}.yaml at "
                                 f"commit {commit[:12]} has sha256 {str(have)[:12]}")
        if yaml.safe_load(shown.stdout) != study.get("config"):
            raise SpecproofError(f"{dest / 'provenance.json'}: field study.config differs from config/studies/"
                                 f"{study['name']}.yaml at commit {commit[:12]}, whose sha256 it records")
    return f"{set_id}: provenance's commit {commit[:12]} is in this checkout's history and holds its study config"


def committed_sha256(directory: Path, name: str, commit: str = "HEAD") -> str | None:
    """The sha256 of file ``name`` of ``directory`` as committed in ``commit`` (HEAD), or
    None when it is not there."""
    import hashlib
    shown = subprocess.run(["git", "-C", str(directory), "show", f"{commit}:./{name}"], capture_output=True)
    return hashlib.sha256(shown.stdout).hexdigest() if shown.returncode == 0 else None


UNREAD_SETS = ("retired", "pending")  # config.yaml fields of frozen sets the paper does not read, with why


def check_every_set_listed(manifests: Path, cfg: dict, config: Path) -> None:
    """The paper's config must be the committed one where it is tracked, and must name
    every frozen record set under ``manifests``, in ``studies``, ``retired`` or
    ``pending`` (with why): a set left out of the paper is said so, not silently."""
    from ..manifests import all_frozen_sets
    committed = committed_sha256(config.parent, config.name)
    if committed is not None and committed != sha256_file(config):
        raise SpecproofError(f"{config}: differs from the committed one (git show HEAD:{config}): it decides "
                             "which record sets the paper reads")
    named = set(cfg["studies"]) | {e["set"] for field in UNREAD_SETS for e in cfg.get(field) or []}
    for set_id in all_frozen_sets(manifests):
        if set_id not in named:
            raise SpecproofError(f"{config}: field studies: frozen record set {set_id} is neither listed, "
                                 "retired nor pending (add it to studies, or to retired or pending with why)")


def check_machine_labels(manifests: Path) -> None:
    """Every machine label under ``manifests`` names one machine: the frozen sets that
    share a label have the same fingerprint (``evidence.fingerprint``); the first set of a
    label that differs is named beside the set it differs from."""
    from ...evidence.fingerprint import fingerprint_of, identity_differences
    from ..manifests import all_frozen_sets, set_dir, split_set
    first: dict[str, tuple[str, dict]] = {}
    for set_id in all_frozen_sets(manifests):
        label = split_set(set_id)[1]
        mine = fingerprint_of(read_json(set_dir(manifests, set_id) / "provenance.json"))
        other, theirs = first.setdefault(label, (set_id, mine))
        fields = identity_differences(mine, theirs)
        if fields:
            raise SpecproofError(f"{set_dir(manifests, set_id) / 'provenance.json'}: machine label {label!r} "
                                 f"also names {other}, a different machine (fields {', '.join(fields)} differ); "
                                 "relabel one (`specproof freeze <study> --relabel OLD --machine NEW`)")


@register("committed_manifest", (MANIFEST,), "the set's manifest.json is the one committed in HEAD and unchanged "
          "since the commit that froze it (in a git checkout), so its hashes cannot be rewritten with its records")
def _committed_manifest(s: SetAudit) -> None:
    s.lines.append(committed_manifest_line(s.dest, s.set_id))


@register("records", (MANIFEST, *format_records()), "the set holds every record its manifest format promises "
          "(a missing raw record is an error, never a fall-back to a summary, unless the set is a legacy one "
          "by its manifest's sha256) and no record the analysis would read lies in it unhashed")
def _records(s: SetAudit) -> None:
    s.fmt = check_records(s.manifest, s.dest)
    s.lines.append(format_line(s.set_id, s.manifest))


@register("provenance", (MANIFEST, "provenance.json"), "provenance.json is the provenance the set was frozen "
          "from (its git commit, dirty flag and sha256 are the manifest's), does not contradict its own CPU, "
          "and the manifest names this set's study and machine")
def _provenance(s: SetAudit) -> None:
    check_provenance(s.manifest, s.dest, s.set_id)


@register("seal_hashes", ("reference.seal.json", "provenance.json", "prompts.jsonl"), "the reference's seal "
          "holds the sha256 of provenance.json, and provenance.json that of prompts.jsonl, so neither can be "
          "swapped under the seal")
def _seal_hashes(s: SetAudit) -> None:
    check_seal_hashes(s.dest)


@register("reference_seal", ("reference.parquet", "reference.seal.json"), "the sealed reference's ids hash to "
          "its seal, so every identity checked against the reference is checked against the sealed one")
def _reference_seal(s: SetAudit) -> None:
    from ...records import check_seal
    s.reference = check_seal(s.dest / "reference.parquet", s.dest / "reference.seal.json")


@register("provenance_commit", ("provenance.json",), "the provenance's git commit is in this checkout's history, "
          "no later than its captured_at, and (for a clean tree) holds the study config the provenance records",
          scope="read set")
def _provenance_commit(s: SetAudit) -> None:
    s.lines.append(provenance_commit_line(s.dest, s.set_id, read_json(s.dest / "provenance.json")))


@register("every_set_listed", guarantees="the paper's config is the committed one and names every frozen set "
          "under manifests/ as read, retired or pending, so no set is left out silently", scope="config")
def _every_set_listed(a: Audit) -> None:
    check_every_set_listed(a.args["manifests"], a.args["cfg"], a.args["config"])


@register("machine_labels", guarantees="every machine label names one machine: the frozen sets sharing a label "
          "have the same fingerprint", scope="config")
def _machine_labels(a: Audit) -> None:
    check_machine_labels(a.args["manifests"])
