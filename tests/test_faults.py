"""Faults a study survives (issue 40, item 6; a killed stage is tests/test_stage_lifetime.py):
a freeze killed mid-copy leaves no half-frozen set; a full results filesystem is one line,
exit 2, with every earlier record kept; a second ``make study`` of the same study is
refused while the first completes; a model file truncated between stages is one line
naming it and its recorded sha256, before any model loads."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from specproof.catalog import format_records
from specproof.publish import manifests as M
from tests.test_workflow import STUDIES, TINY_MOCK_CONFIG, snakemake, snakemake_command

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PATH=f"{BIN}:{os.environ['PATH']}")
# ``specproof <argv[2:]>`` that SIGKILLs itself at argv[1]: "copy" (after the third record
# is copied into the temporary set), "swap" (the set complete, before it is renamed into
# place) or "between" (between renaming the old set aside and the new one into place)
KILLED_AT = """
import os, pathlib, shutil, signal, sys
from specproof.cli import main
from specproof.publish import manifests
point, kill = sys.argv[1], lambda: os.kill(os.getpid(), signal.SIGKILL)
copy2, rename, calls = shutil.copy2, pathlib.Path.rename, []
def copy(*a, **k):
    calls.append(a)
    copy2(*a, **k)
    len(calls) == 3 and point == "copy" and kill()
def moved(self, target):
    calls.append(self)
    len(calls) == 2 and point == "between" and kill()
    return rename(self, target)
shutil.copy2, pathlib.Path.rename = copy, moved
swap = manifests._swap_in
manifests._swap_in = lambda tmp, dest: (point == "swap" and kill(), calls.clear(), swap(tmp, dest))
sys.exit(main(sys.argv[2:]))
"""


def _finished(results: Path, content: str) -> Path:
    """A finished study's records under ``results``/tiny-mock (every raw and derived
    record, ``content`` in each); returns that directory."""
    d = results / "tiny-mock"
    d.mkdir(parents=True, exist_ok=True)
    for name in format_records():
        (d / name).write_text(json.dumps({"name": name, "c": content}) if name.endswith(".json") else content)
    (d / "provenance.json").write_text(json.dumps({"cpu": {"model": "CPU x"}, "packages": {}}))
    return d


def _freeze(tmp_path: Path, *extra: str, killed_at: str | None = None) -> subprocess.CompletedProcess:
    """``specproof freeze tiny-mock --machine m1 --force`` on the tree under ``tmp_path``,
    killed at ``killed_at`` (``KILLED_AT``) when given; returns the finished process."""
    args = ["freeze", "tiny-mock", "--machine", "m1", "--results", str(tmp_path / "results"),
            "--manifests", str(tmp_path / "manifests"), "--studies-dir", str(STUDIES), *extra]
    cmd = [sys.executable, "-c", KILLED_AT, killed_at, *args] if killed_at else [str(BIN / "specproof"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)


def _frozen_files(set_dir: Path) -> dict[str, str]:
    """Every file of the frozen set ``set_dir``, relative path -> its text."""
    return {p.relative_to(set_dir).as_posix(): p.read_text() for p in sorted(set_dir.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("point", ["copy", "swap", "between"])
def test_a_killed_freeze_leaves_the_old_set_or_none_and_the_next_one_clears(tmp_path, point):
    """A freeze --force SIGKILLed mid-copy, with the new set complete but not in place, or
    between moving the old set aside and the new one in: no reader lists a half-frozen or
    temporary set (the old set stays whole, or is absent while it is moved), and the next
    freeze clears what the killed one left and freezes, the old manifest kept once in history."""
    _finished(tmp_path / "results", "old")
    assert _freeze(tmp_path).returncode == 0
    study_dir = tmp_path / "manifests" / "tiny-mock"
    old = _frozen_files(study_dir / "m1")
    _finished(tmp_path / "results", "new")
    killed = _freeze(tmp_path, "--force", killed_at=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # the killed freeze left its temporary set (and, between the renames, the old one aside)
    assert len(list(study_dir.glob(".m1.*"))) == (2 if point == "between" else 1)
    assert M.all_frozen_sets(tmp_path / "manifests") == ([] if point == "between" else ["tiny-mock@m1"])
    if point != "between":
        assert _frozen_files(study_dir / "m1") == old and M.verify_hashes(tmp_path / "manifests", "tiny-mock@m1")
    res = _freeze(tmp_path, "--force")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in study_dir.iterdir()) == ["m1"]
    manifest = M.verify_hashes(tmp_path / "manifests", "tiny-mock@m1")
    assert (study_dir / "m1" / "runs.parquet").read_text() == "new" and manifest["machine"] == "m1"
    history = list((study_dir / "m1" / "history").iterdir())
    assert len(history) == 1 and history[0].read_text() == old["manifest.json"]


def test_a_freeze_killed_before_its_set_is_in_place_leaves_none(tmp_path):
    """A first freeze killed with its set complete beside its place (manifest.json
    written): the set is not frozen for any reader, and the next freeze without --force
    freezes it (nothing was frozen)."""
    _finished(tmp_path / "results", "new")
    assert _freeze(tmp_path, killed_at="swap").returncode == -signal.SIGKILL
    (leftover,) = (tmp_path / "manifests" / "tiny-mock").iterdir()
    assert (leftover / "manifest.json").is_file()
    assert M.frozen_sets(tmp_path / "manifests", "tiny-mock") == []
    assert not M.is_frozen(tmp_path / "manifests", "tiny-mock@m1")
    res = _freeze(tmp_path)
    assert res.returncode == 0, res.stderr
    assert M.frozen_sets(tmp_path / "manifests", "tiny-mock") == ["tiny-mock@m1"]
    assert not leftover.exists()


def test_a_second_freeze_of_the_study_at_once_is_refused(tmp_path):
    """While a freeze holds the study's directory, another freeze of that study is refused
    in one line and writes nothing."""
    _finished(tmp_path / "results", "new")
    with M._freezing(tmp_path / "manifests" / "tiny-mock"):
        res = _freeze(tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"specproof: error: {tmp_path / 'manifests' / 'tiny-mock'}: another freeze of this study is running; "
        "wait for it to end, then freeze again"]
    assert list((tmp_path / "manifests" / "tiny-mock").iterdir()) == []


@pytest.fixture
def full_fs(tmp_path):
    """A 1 MiB tmpfs mounted at ``tmp_path``/fs (unmounted after the test); skipped where
    this container may not mount one."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: the full-filesystem test mounts a small tmpfs")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount rights): {res.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def _fill(mnt: Path) -> None:
    """Write zeros to ``mnt``/filler until the filesystem is full."""
    with open(mnt / "filler", "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError as exc:
            assert exc.errno == 28, exc  # ENOSPC


def _stage(name: str, results: Path) -> subprocess.CompletedProcess:
    """``specproof stage <name>`` of tiny-mock into ``results``; returns the finished process."""
    return subprocess.run([str(BIN / "specproof"), "stage", name, "--config", str(STUDIES / "tiny-mock.yaml"),
                           "--results", str(results)], capture_output=True, text=True, env=ENV, timeout=300)


def _hashes(d: Path) -> dict[str, str]:
    """Every file under ``d``, relative path -> sha256."""
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("stage,record", [("prompts", "prompts.jsonl"), ("models", "models.json")])
def test_a_full_results_filesystem_is_one_line_and_keeps_earlier_records(full_fs, stage, record):
    """A stage rewriting its record on a full filesystem exits 2 with one line naming the
    record; the record it wrote before and every other one are byte for byte as they
    were, and no temporary file is left beside them."""
    results = full_fs / "tiny-mock"
    for earlier in ("models", "prompts"):
        assert _stage(earlier, results).returncode == 0
    before = _hashes(results)
    assert record in before
    _fill(full_fs)
    res = _stage(stage, results)
    assert res.returncode == 2, res.stderr[-2000:]
    lines = [x for x in res.stderr.splitlines() if "error" in x.lower() or "Traceback" in x]
    assert lines == [f"specproof: error: {results / record}: not written: no space left on device "
                     "(free space and run it again; the records written before are kept)"], res.stderr[-2000:]
    assert _hashes(results) == before


def test_a_full_filesystem_under_a_freeze_is_one_line_and_leaves_no_set(full_fs, tmp_path):
    """A freeze into a full filesystem exits 2 with one line naming the record it could
    not write, at its place in the set, and leaves no set and no temporary one."""
    _finished(tmp_path / "results", "x" * 20_000)
    _fill(full_fs)
    args = ["freeze", "tiny-mock", "--machine", "m1", "--results", str(tmp_path / "results"),
            "--manifests", str(full_fs / "manifests"), "--studies-dir", str(STUDIES)]
    res = subprocess.run([str(BIN / "specproof"), *args], capture_output=True, text=True, env=ENV, timeout=120)
    assert res.returncode == 2, res.stderr[-2000:]
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"specproof: error: {full_fs / 'manifests' / 'tiny-mock' / 'm1'}/") and \
        ": not written: no space left on device" in line, line
    assert list((full_fs / "manifests" / "tiny-mock").iterdir()) == []


def _lock_held(base: Path) -> bool:
    """Whether a Snakemake lock of this checkout (.snakemake/locks) names a file under
    ``base`` (a lock another run removes while it is read is skipped)."""
    for lock in (ROOT / ".snakemake" / "locks").glob("*.lock"):
        try:
            if str(base) in lock.read_text():
                return True
        except FileNotFoundError:
            continue
    return False


def test_a_second_make_study_at_once_is_refused_and_the_first_completes(tmp_path):
    """Two ``make study`` of one study at once (``snakemake --cores 1 --resources timed=1
    --rerun-incomplete study``, as the Makefile runs it): the second, started while the
    first holds its lock (the first stopped meanwhile, so the order is certain), is
    refused by Snakemake's lock, exit 1, and runs no job; the first resumes and completes
    its study to the report."""
    base = tmp_path / "tree"
    shutil.copytree(STUDIES, base / "studies")
    (base / "config.yaml").write_text(yaml.safe_dump({**TINY_MOCK_CONFIG, "paper": {"title": "faults"}}))
    cmd, env = snakemake_command(base, "--rerun-incomplete", "study", cores="1")
    first = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while not _lock_held(base) and first.poll() is None:
            time.sleep(0.05)
        first.send_signal(signal.SIGSTOP)
        second = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        first.send_signal(signal.SIGCONT)
    _, err = first.communicate(timeout=900)
    assert first.returncode == 0, err[-4000:]
    assert second.returncode == 1, second.stderr[-2000:]
    assert "Error: Directory cannot be locked." in second.stderr
    assert "rule " not in second.stdout + second.stderr  # it ran no job
    assert (base / "results" / "tiny-mock" / "report.pdf").stat().st_size > 10_000
    assert "Nothing to be done" in (r := snakemake(base, "-n", "study")).stdout + r.stderr


@pytest.fixture
def smollm2_copy(tmp_path) -> Path:
    """A copy of the embedded SmolLM2 GGUF in a temporary model directory (the test
    truncates it; the package's file is never touched); returns its path."""
    from specproof.models.files import smollm2_q4_1
    (tmp_path / "models").mkdir()
    out = tmp_path / "models" / "smollm2-copy.gguf"
    shutil.copyfile(smollm2_q4_1(), out)
    return out


def test_a_model_file_truncated_between_stages_is_one_line_before_any_model_loads(
        tmp_path, smollm2_copy, monkeypatch, capsys):
    """A study whose target is a local GGUF: the models stage records its sha256; the file
    is then truncated, and the next model-running stage exits 2 with one line naming the
    file and the sha256 the models stage recorded, before any model loads."""
    from specproof.cli import main
    from specproof.models.llama import LlamaCppBackend
    loads = []
    monkeypatch.setattr("specproof.load.end_with_parent", lambda *a: True)  # not the test runner's
    monkeypatch.setattr(LlamaCppBackend, "__init__", lambda self, *a, **k: loads.append(a) or 1 / 0)
    config = tmp_path / "tiny.yaml"
    config.write_text((STUDIES / "tiny.yaml").read_text().replace("embedded:smollm2-q4_1", str(smollm2_copy)))
    results = tmp_path / "results" / "tiny"
    args = ["--config", str(config), "--results", str(results)]
    assert main(["stage", "models", *args]) == 0
    expected = json.loads((results / "models.json").read_text())["target:smol-q4"]["files"][0]["sha256"]
    assert expected == hashlib.sha256(smollm2_copy.read_bytes()).hexdigest()
    os.truncate(smollm2_copy, smollm2_copy.stat().st_size // 2)
    capsys.readouterr()
    assert main(["stage", "reference", "--part", "smol-q4", *args]) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "error" in x]
    assert line.startswith(f"specproof: error: {smollm2_copy}: has ") and f"records sha256 {expected}" in line, line
    assert loads == []
