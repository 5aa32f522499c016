"""The benchmark scripts refuse an unknown setup name in one line, before any model loads."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script", ["ngram.py", "target_only.py"])
def test_unknown_setup_is_one_line_naming_the_known_ones(script):
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--setups", "hf_fp32,nope"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{script}: error: unknown setup(s) nope (known: hf_fp32, ")
    assert "Traceback" not in res.stderr
