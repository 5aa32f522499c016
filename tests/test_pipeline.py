"""End to end: snakemake on a tiny study (mock pair + a SmolLM2 slice) builds the paper;
freeze; rebuild from the manifest; audit passes, and fails on a tampered record."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.models


def snakemake(tmp, *targets, check=True, configfile="tests/data/config.yaml"):
    cmd = [str(BIN / "snakemake"), "--cores", "2", "--configfile", str(configfile),
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

    # the same records frozen under two machine labels stand in for two machines
    freeze = ("freeze", "tiny", "--results", f"{tmp}/results", "--manifests", f"{tmp}/manifests",
              "--studies-dir", "tests/data/studies")
    specproof(*freeze, "--machine", "m1")
    again = specproof(*freeze, "--machine", "m1", check=False)
    assert again.returncode == 2 and "already frozen" in again.stderr
    specproof(*freeze, "--machine", "m2")
    drift = tmp / "drift.md"
    specproof("drift", "tiny", "--results", f"{tmp}/results/tiny", "--manifests", f"{tmp}/manifests",
              "--out", str(drift))
    assert "tiny@m1" in drift.read_text()  # same CPU model: the first frozen machine of it
    shutil.rmtree(tmp / "results")  # the paper now comes from the manifests alone
    two = tmp / "two-machines.yaml"
    two.write_text((ROOT / "tests/data/config.yaml").read_text().replace("studies: [tiny]",
                                                                          "studies: [tiny@m1, tiny@m2]"))
    snakemake(tmp, "all", configfile=two)
    numbers = json.loads((tmp / "paper" / "build" / "numbers.json").read_text())
    assert numbers["machines.tiny.sets"]["value"] == ["tiny@m1", "tiny@m2"]
    assert (tmp / "figures" / "machines" / "verify_cost_machines.png").is_file()
    changed = [k for k in numbers if k.startswith("machines.tiny.") and k.endswith("changed")]
    assert changed and not any(numbers[k]["value"] for k in changed)  # identical records: nothing changed
    res = snakemake(tmp, "audit", configfile=two)
    assert "audit: OK" in res.stdout + res.stderr and "cross-machine numbers" in res.stdout + res.stderr

    runs = tmp / "manifests" / "tiny" / "m2" / "runs.parquet"
    data = bytearray(runs.read_bytes())
    data[len(data) // 2] ^= 0xFF
    runs.write_bytes(bytes(data))
    bad = specproof("audit", "--studies", "tiny@m1", "tiny@m2", "--manifests", f"{tmp}/manifests",
                    "--numbers", f"{tmp}/paper/build/numbers.json", check=False)
    assert bad.returncode == 2 and "m2/runs.parquet" in bad.stderr and "does not match" in bad.stderr
