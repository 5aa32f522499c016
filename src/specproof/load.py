"""Whether the machine was busy while something was timed.

Other processes' CPU time over a block = (all CPUs' busy time from /proc/stat) - (this
process's own CPU time, os.times), in seconds; its share = other CPU time / (wall time x
usable cores). A share above ``BUSY_SHARE`` means other work took a noticeable part of
the CPUs the timing assumed it had. Linux only: elsewhere the share is None (not recorded).
A stage also says it is alive (``heartbeat``) and ends with the job that started it
(``end_with_parent``).
"""
from __future__ import annotations

import os
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass

BUSY_SHARE = 0.10  # other processes above this share of the usable CPUs: the timing was not quiet


@dataclass
class Watch:
    """One watched block: wall seconds, other processes' CPU seconds and their share."""
    wall_s: float = float("nan")
    other_cpu_s: float | None = None
    share: float | None = None


def _busy_seconds() -> float | None:
    """All CPUs' non-idle time since boot in seconds (user, nice, system, irq, softirq, steal)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@contextmanager
def watch():
    """Measure other processes' CPU time while the ``with`` block runs (see module doc)."""
    w, busy0, own0, t0 = Watch(), _busy_seconds(), _own_seconds(), time.perf_counter()
    try:
        yield w
    finally:
        w.wall_s = time.perf_counter() - t0
        busy1 = _busy_seconds()
        if busy0 is not None and busy1 is not None and w.wall_s > 0:
            w.other_cpu_s = max(0.0, (busy1 - busy0) - (_own_seconds() - own0))
            w.share = w.other_cpu_s / (w.wall_s * usable_cores())


def load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def busy_warning(what: str, shares: list) -> str | None:
    """One line when any watched block of ``what`` had other processes above BUSY_SHARE of
    the CPUs, naming how many and the worst share; None when the timing was quiet."""
    known = [s for s in shares if s is not None]
    busy = [s for s in known if s > BUSY_SHARE]
    if not busy:
        return None
    return (f"specproof: warning: the machine was busy while {what} was timed: other processes used more "
            f"than {BUSY_SHARE:.0%} of the CPUs during {len(busy)} of {len(known)} timed blocks (at worst "
            f"{max(busy):.0%}); rerun on a quiet machine for timings you will report")


def warn_if_busy(what: str, shares: list) -> None:
    line = busy_warning(what, shares)
    if line:
        print(line, file=sys.stderr)


PR_SET_PDEATHSIG = 1  # prctl(2) option: the signal this process gets when its parent exits


def end_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask Linux to send ``sig`` to this process when the process that started it exits
    (prctl PR_SET_PDEATHSIG), so a stage whose job shell is killed (SIGKILL leaves no
    handler a chance) ends with it instead of decoding on, orphaned, beside the next
    run's timing. If the parent is already gone, send ``sig`` now. True where set; False
    off Linux or where prctl refuses (the stage then runs as before)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    parent = os.getppid()
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent:  # the parent exited before the request took effect
        os.kill(os.getpid(), sig)
    return True


HEARTBEAT_S = 10.0  # a long stage says it is alive at least this often (seconds)


@contextmanager
def heartbeat(label: str, every_s: float = HEARTBEAT_S, stream=None):
    """While the block runs, print '<label>: still running (<N> s)' to ``stream`` (stderr)
    every ``every_s`` seconds, so no stage is silent for long whatever its own progress
    bar does. A daemon thread that sleeps between lines: its wake-ups cost microseconds,
    nothing a timed block can see."""
    import threading
    stream = sys.stderr if stream is None else stream
    stop, t0 = threading.Event(), time.monotonic()

    def beat():
        while not stop.wait(every_s):
            print(f"{label}: still running ({time.monotonic() - t0:.0f} s)", file=stream, flush=True)

    thread = threading.Thread(target=beat, name=f"heartbeat {label}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
