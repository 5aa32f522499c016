"""A stage ends with the job that started it: a SIGKILL of the job's shell leaves no stage
process decoding on, orphaned, beside the next run's timing (issue 40, faults)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHILD = ("import sys, time; from specproof.load import end_with_parent; "
         "ask = sys.argv[2] == 'yes'; assert end_with_parent() if ask else True; "
         "open(sys.argv[1], 'w').close(); time.sleep(120)")


def _state(pid: int) -> str | None:
    """The process's state letter from /proc (Z: ended, not yet reaped), None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the ppid field of /proc/<pid>/stat)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive_after_shell_killed(tmp_path: Path, ask: str) -> tuple[int, bool]:
    """Start ``bash -c 'python CHILD; echo'`` (the shell stays the child's parent), wait
    until the child is ready, SIGKILL the shell and say whether the child still runs 3 s on."""
    ready = tmp_path / f"ready-{ask}"
    shell = subprocess.Popen(["bash", "-c", f"{sys.executable} -c \"{CHILD}\" {ready} {ask}; echo ended"],
                             env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src")))
    for _ in range(300):
        if ready.exists():
            break
        time.sleep(0.1)
    child = _children(shell.pid)[0]
    shell.send_signal(signal.SIGKILL)
    shell.wait()
    time.sleep(3)
    return child, _state(child) not in (None, "Z")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_stage_ends_with_the_shell_that_started_it(tmp_path):
    child, alive = _alive_after_shell_killed(tmp_path, "yes")
    assert not alive, f"process {child} outlived its killed shell"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_without_it_the_process_is_orphaned(tmp_path):
    """The control: the same child without end_with_parent outlives its shell."""
    child, alive = _alive_after_shell_killed(tmp_path, "no")
    try:
        assert alive
    finally:
        if alive:
            os.kill(child, signal.SIGKILL)


def test_the_stage_command_asks_for_it(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr("specproof.load.end_with_parent", lambda *a: calls.append(a) or True)
    from specproof.cli import main
    assert main(["stage", "analyze", "--results", str(tmp_path / "none")]) == 2
    assert calls == [()]
