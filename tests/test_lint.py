"""`snakemake --lint` (and so `make lint`) exits 0: no rule hard-codes a path prefix of its
inputs or outputs in params, among the other lints. It only parses the workflow."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_snakemake_lint_passes():
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])))
    res = subprocess.run([str(BIN / "snakemake"), "--lint"], cwd=ROOT, capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
