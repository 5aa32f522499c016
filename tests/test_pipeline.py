"""End to end: snakemake on a tiny study (mock pair + a SmolLM2 slice) builds the paper;
freeze; rebuild from the manifest; audit passes, and fails on a tampered record."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.models


def snakemake(tmp, *targets, check=True):
    cmd = [str(BIN / "snakemake"), "--cores", "2", "--configfile", "tests/data/config.yaml",
           "--config", f"results_dir={tmp}/results", f"manifests_dir={tmp}/manifests",
           f"figures_dir={tmp}/figures", f"paper_dir={tmp}/paper", "--", *targets]
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=1500)
    if check and res.returncode != 0:
        raise AssertionError(res.stdout[-3000:] + res.stderr[-3000:])
    return res


def specproof(*args, check=True):
    res = subprocess.run([str(BIN / "specproof"), *args], cwd=ROOT, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise AssertionError(res.stdout + res.stderr)
    return res


def test_end_to_end_paper_freeze_audit(tmp_path):
    tmp = tmp_path
    snakemake(tmp, "all")
    pdf = tmp / "paper" / "paper.pdf"
    assert pdf.stat().st_size > 10_000
    for name in ("speedup_vs_k", "acceptance", "verify_cost", "cost_decomposition", "agreement", "pit"):
        assert (tmp / "figures" / "tiny" / f"{name}.png").is_file()
    for name in ("runs.parquet", "rounds.parquet", "certificate.json", "qualification.parquet",
                 "prediction.json", "batch_invariance.parquet", "calibration.json"):
        assert (tmp / "results" / "tiny" / name).is_file()
    assert "Nothing to be done" in (snakemake(tmp, "all").stdout + snakemake(tmp, "all").stderr)

    freeze = ("freeze", "tiny", "--results", f"{tmp}/results", "--manifests", f"{tmp}/manifests",
              "--studies-dir", "tests/data/studies")
    specproof(*freeze)
    again = specproof(*freeze, check=False)
    assert again.returncode == 2 and "already frozen" in again.stderr
    shutil.rmtree(tmp / "results")  # the paper now comes from the manifest alone
    snakemake(tmp, "all")
    res = snakemake(tmp, "audit")
    assert "audit: OK" in res.stdout + res.stderr

    runs = tmp / "manifests" / "tiny" / "runs.parquet"
    data = bytearray(runs.read_bytes())
    data[len(data) // 2] ^= 0xFF
    runs.write_bytes(bytes(data))
    bad = specproof("audit", "--studies", "tiny", "--manifests", f"{tmp}/manifests",
                    "--numbers", f"{tmp}/paper/build/numbers.json", check=False)
    assert bad.returncode == 2 and "runs.parquet" in bad.stderr and "does not match" in bad.stderr
