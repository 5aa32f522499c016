"""The SLURM profile plans the paper and a study (dry run; no cluster needed)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PROFILE = ROOT / "workflow" / "profiles" / "slurm"

pytest.importorskip("snakemake_executor_plugin_slurm")


@pytest.mark.parametrize("target", ["all", "study"])
def test_the_slurm_profile_plans(target, tmp_path):
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    res = subprocess.run([str(BIN / "snakemake"), "--profile", str(PROFILE), "-n", target,
                          "--config", f"results_dir={tmp_path}/results"],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "Job stats" in out or "Nothing to be done" in out
    if target == "study":  # the timed jobs of a study are there to be serialized
        assert "runs_job" in out and "micro_job" in out


def test_timed_jobs_take_a_whole_node_and_never_overlap():
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert "timed=1" in profile["resources"]
    assert "mem_mb" not in profile["default-resources"]  # the study config sets it
    for rule in ("runs_job", "micro_job", "advise"):
        assert "--exclusive" in profile["set-resources"][rule]["slurm_extra"]
    rules = (ROOT / "workflow" / "rules" / "runs.smk").read_text()
    for rule in ("runs_job", "micro_job", "advise"):
        body = rules[rules.index(f"rule {rule}:"):].split("\nrule ")[0]
        assert "timed=1" in body, rule
    assert "--resources timed=1" in (ROOT / "Makefile").read_text()
