"""specproof.load: other processes' CPU time while a block is timed, the warning, and the
heartbeat that keeps a long stage from being silent."""
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specproof.load import BUSY_SHARE, busy_warning, load_average, watch


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat is Linux's")
def test_another_process_burning_a_cpu_is_seen_and_our_own_work_is_not_counted():
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass"
    child = subprocess.Popen([sys.executable, "-c", burn])
    with watch() as w:
        time.sleep(0.5)  # the child burns a CPU meanwhile: about 0.5 s of other CPU time
        t = time.process_time()
        while time.process_time() - t < 0.3:  # our own CPU time: subtracted
            pass
    child.wait()
    assert w.other_cpu_s is not None and w.other_cpu_s > 0.2
    assert w.share > BUSY_SHARE


def test_the_warning_names_the_stage_the_count_and_the_worst_share_and_is_silent_when_quiet():
    line = busy_warning("the grid", [0.01, None, 0.5, 0.2])
    assert line.startswith("specproof: warning: the machine was busy while the grid was timed")
    assert "during 2 of 3 timed blocks (at worst 50%)" in line
    assert busy_warning("the grid", [0.01, None, 0.02]) is None
    assert busy_warning("the grid", [None]) is None


def test_provenance_records_the_load_average():
    from specproof.evidence.provenance import capture
    load = capture()["load"]
    assert load["usable_cores"] >= 1
    if sys.platform.startswith("linux"):
        assert len(load["loadavg"]) == 3 and all(x >= 0 for x in load["loadavg"])
        assert len(load_average()) == 3


def test_provenance_records_which_source_tree_ran():
    """An editable install of another checkout would run that checkout's code: the record
    names the package's own directory and its git state, beside the caller's."""
    import specproof
    from specproof.evidence.provenance import capture
    root = Path(specproof.__file__).resolve().parents[2]
    code = capture(root)["code"]
    assert code["package_dir_in_checkout"] == "src/specproof"
    assert set(code["git"]) == {"commit", "dirty"}
    assert capture(root / "tests")["code"]["package_dir_in_checkout"] is None


def test_new_provenance_holds_no_absolute_host_path():
    from specproof.evidence.provenance import capture

    def strings(d):
        if isinstance(d, dict):
            return [s for v in d.values() for s in strings(v)]
        if isinstance(d, list):
            return [s for v in d for s in strings(v)]
        return [d] if isinstance(d, str) else []
    assert not [s for s in strings(capture()) if s.startswith("/")]


def test_a_heartbeat_prints_while_its_block_runs_and_stops_after(capsys):
    import io

    from specproof.load import heartbeat
    out = io.StringIO()
    with heartbeat("stage demo", every_s=0.02, stream=out):
        time.sleep(0.2)
    lines = out.getvalue().splitlines()
    assert lines and all(re.fullmatch(r"stage demo: still running \(\d+ s\)", x) for x in lines)
    time.sleep(0.06)
    assert out.getvalue().splitlines() == lines  # no line once the block has ended


def test_every_stage_runs_under_a_heartbeat(tmp_path, capsys):
    """run_stage wraps any stage, including a seeded one, so no stage is silent for long."""
    from specproof.evidence import stages
    stages.SEEDED["_slow"] = lambda seed, d: time.sleep(0.2)
    try:
        stages.run_stage("_slow", tmp_path, seed=1, heartbeat_s=0.02)
    finally:
        del stages.SEEDED["_slow"]
    assert "stage _slow: still running" in capsys.readouterr().err
