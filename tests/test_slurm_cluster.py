"""The tiny mock study through the SLURM profile on a real single-node cluster
(workflow/profiles/slurm/local-cluster.sh: munged, slurmctld and slurmd on this machine),
checked from the scheduler's own records: the jobcomp/filetxt log it writes for every
finished job (state, start, end, node, CPUs) joined with the controller's job records
(`scontrol show job`: the rule in each job's comment, OverSubscribe). No slurmdbd, so no
sacct: the executor reads job states with squeue (see the script's header).

Needs root and Debian's slurm-wlm and munge: installed here with apt-get when missing
(SPECPROOF_SLURM_INSTALL=0 forbids it); skipped with one line where they cannot be
installed or the daemons cannot start."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
import yaml

from test_workflow import STUDIES, TINY_MOCK_CONFIG

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PROFILE = ROOT / "workflow" / "profiles" / "slurm"
CLUSTER = PROFILE / "local-cluster.sh"
PARTITION = "local"
# the model-running rules (not localrules) a study runs; the first three are timed
TIMED = {"runs_job", "micro_job", "advise"}
# the daemons live in /usr/sbin, which a CI runner's PATH may leave out
PATH = f"{BIN}:{os.environ['PATH']}:/usr/sbin:/sbin"

pytest.importorskip("snakemake_executor_plugin_slurm")


def _have_slurm() -> bool:
    return all(shutil.which(b, path=PATH) for b in ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue"))


def _install_slurm() -> str | None:
    """apt-get install slurm-wlm munge (about 30 s); a reason when it cannot."""
    if os.geteuid() != 0:
        return "not root"
    if os.environ.get("SPECPROOF_SLURM_INSTALL", "1") == "0" or not shutil.which("apt-get"):
        return "SPECPROOF_SLURM_INSTALL=0" if shutil.which("apt-get") else "no apt-get"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "slurm-wlm", "munge"]):
            res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
            if res.returncode != 0:
                return f"{' '.join(cmd[:2])} failed: {(res.stderr or res.stdout).strip().splitlines()[-1:]}"
    except subprocess.TimeoutExpired:
        return "apt-get timed out"
    return None if _have_slurm() else "slurm-wlm installed but its daemons are missing"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A running one-node cluster; its environment (SLURM_CONF) and state directory."""
    if not _have_slurm() and (why := _install_slurm()):
        pytest.skip(f"no SLURM cluster: slurm-wlm/munge missing and not installed ({why})")
    state = tmp_path_factory.mktemp("slurm") / "state"
    res = subprocess.run([str(CLUSTER), "up", str(state), PARTITION], capture_output=True, text=True,
                         env=dict(os.environ, PATH=PATH), timeout=120)
    if res.returncode != 0:
        pytest.skip("no SLURM cluster: daemons did not start: " + " | ".join(res.stderr.strip().splitlines()[:3]))
    env = dict(os.environ, SLURM_CONF=str(state / "slurm.conf"), PATH=PATH)
    try:
        yield env, state
    finally:
        subprocess.run([str(CLUSTER), "down", str(state)], env=dict(os.environ, PATH=PATH), timeout=120)


def slurm_cmd(base: Path, *targets, extra=()):
    """snakemake through the profile, with what a one-node cluster without accounting needs:
    its partition, no account, job states from squeue, a status check every few seconds."""
    return [str(BIN / "snakemake"), "--profile", str(PROFILE),
            "--default-resources", f"slurm_partition={PARTITION}", "runtime=30",
            "--slurm-no-account", "--slurm-status-command", "squeue",
            "--slurm-init-seconds-before-status-checks", "2", "--seconds-between-status-checks", "2",
            "--slurm-logdir", str(base / "slurm-logs"), "--latency-wait", "5", *extra,
            "--configfile", str(base / "config.yaml"),
            "--config", f"results_dir={base / 'results'}", f"manifests_dir={base}/manifests",
            f"figures_dir={base}/figures", f"paper_dir={base}/paper", f"studies_dir={base}/studies",
            "--", *targets]


def tree(base: Path) -> Path:
    """tiny-mock in its own tree; model jobs ask for 1 GB (the study's resources), not 8."""
    shutil.copytree(STUDIES, base / "studies")
    cfg = base / "studies" / "tiny-mock.yaml"
    cfg.write_text(cfg.read_text() + "resources: {mem_mb: 1000}\n")
    (base / "config.yaml").write_text(yaml.safe_dump({**TINY_MOCK_CONFIG, "paper": {"title": "slurm test"}}))
    return base


def jobcomp(state: Path) -> pd.DataFrame:
    """The jobcomp/filetxt log: one line of KEY=VALUE per finished job."""
    rows = [dict(re.findall(r"(\w+)=(\S*)", line)) for line in (state / "jobcomp.log").read_text().splitlines()]
    df = pd.DataFrame(rows)
    for col in ("StartTime", "EndTime"):
        df[col] = df[col].map(datetime.fromisoformat)
    return df.astype({"JobId": int, "ProcCnt": int})


def controller_jobs(env) -> pd.DataFrame:
    """The controller's records of the jobs it still holds (MinJobAge: an hour)."""
    out = subprocess.run(["scontrol", "show", "job", "--oneliner"], capture_output=True, text=True,
                         env=env, check=True).stdout
    rows = [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.splitlines() if line.strip()]
    df = pd.DataFrame(rows).astype({"JobId": int})
    df["rule"] = df["Comment"].str.extract(r"^rule_(\w+?)(?:_wildcards_.*)?$", expand=False)
    return df


def records(base: Path) -> pd.DataFrame:
    """A study's runs without their timings: which run, its token ids and counts."""
    runs = pd.read_parquet(base / "results" / "tiny-mock" / "runs.parquet")
    cols = ["run_id", "pair", "workload", "prompt_id", "rep", "seed", "k", "policy", "temperature", "path",
            "new_tokens", "ids", "stop_reason", "mean_accepted", "order"]
    return runs[cols].astype(str)


def test_the_study_runs_on_the_cluster_like_a_local_run(cluster, tmp_path):
    env, state = cluster
    base = tree(tmp_path / "slurm")
    # the same study's runs on this machine, without the cluster, alongside (its records only)
    local = tree(tmp_path / "local")
    local_run = subprocess.Popen(
        [str(BIN / "snakemake"), "--cores", "1", "--resources", "timed=1", "--configfile", str(local / "config.yaml"),
         "--config", f"results_dir={local / 'results'}", f"manifests_dir={local}/manifests",
         f"studies_dir={local}/studies", "--", str(local / "results" / "tiny-mock" / "runs.parquet")],
        cwd=ROOT, env=dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.monotonic()
    # 1. cancel the first runs_job the scheduler holds: Snakemake fails naming the rule
    proc = subprocess.Popen(slurm_cmd(base, "study", extra=("--retries", "0")), cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    cancelled = None
    try:
        deadline = time.monotonic() + 300
        while cancelled is None and proc.poll() is None and time.monotonic() < deadline:
            q = subprocess.run(["squeue", "-h", "-o", "%i|%k|%T"], capture_output=True, text=True, env=env).stdout
            for line in q.splitlines():
                jid, comment, st = line.split("|")
                if comment.startswith("rule_runs_job") and st == "RUNNING":
                    subprocess.run(["scancel", jid], env=env, check=True)
                    cancelled = int(jid)
                    break
            time.sleep(0.2)
        out1, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    assert cancelled is not None, out1[-4000:]
    assert proc.returncode != 0, out1[-4000:]
    assert re.search(r"Error in rule runs_job:", out1), out1[-4000:]
    assert f"SLURM-job '{cancelled}' failed" in out1 and "CANCELLED" in out1, out1[-4000:]
    # 2. --rerun-incomplete completes the study
    res = subprocess.run(slurm_cmd(base, "study", extra=("--rerun-incomplete",)), cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    out2 = res.stdout + res.stderr
    assert res.returncode == 0, out2[-4000:]
    print(f"slurm study: {time.monotonic() - t0:.0f} s")
    assert (base / "results" / "tiny-mock" / "report.pdf").stat().st_size > 10_000

    # the scheduler's accounting: every finished job, joined with the controller's records
    acct = jobcomp(state).merge(controller_jobs(env)[["JobId", "rule", "OverSubscribe"]], on="JobId")
    assert cancelled in set(acct["JobId"])
    assert acct.set_index("JobId").loc[cancelled, "JobState"] == "CANCELLED"
    done = acct[acct["JobState"] == "COMPLETED"]
    assert len(done) == len(acct) - 1, acct[["JobId", "rule", "JobState"]]
    # every model-running job Snakemake ran is a SLURM job of that rule, none a local one
    ran = {int(j): r for j, r in re.findall(
        r"has been submitted with SLURM jobid (\d+) \(log: \S*/rule_(\w+)/", out1 + out2)}
    assert ran and ran == dict(zip(acct["JobId"], acct["rule"])), (ran, acct[["JobId", "rule"]])
    # Snakemake prints "rule X:" for a job it submits and "localrule X:" for one it runs itself
    cluster_rules = set(re.findall(r"^rule (\w+):", out1 + out2, re.M))
    local_rules = set(re.findall(r"^localrule (\w+):", out1 + out2, re.M))
    assert cluster_rules == set(acct["rule"]) and not local_rules & cluster_rules, (cluster_rules, local_rules)
    assert {"reference_job", "runs_job", "micro_job", "advise", "pit", "calibration"} <= set(done["rule"])
    print(f"accounting: {len(acct)} SLURM jobs ({len(done)} completed), rules {sorted(set(acct['rule']))}")
    nodes = set(done["NodeList"])
    assert len(nodes) == 1
    cpus = int(re.search(r"CPUs=(\d+)", (state / "slurm.conf").read_text())[1])
    timed = done[done["rule"].isin(TIMED)]
    assert TIMED <= set(timed["rule"]), set(done["rule"])
    # OverSubscribe=NO is --exclusive's mark: a job without it shows OK
    assert (done.loc[~done["rule"].isin(TIMED), "OverSubscribe"] == "OK").all(), done[["rule", "OverSubscribe"]]
    for _, job in timed.iterrows():
        # the whole node: all its CPUs whatever the job asked, and no other job alongside
        assert job["ProcCnt"] == cpus and job["OverSubscribe"] == "NO", job
        others = acct[(acct["JobId"] != job["JobId"]) & (acct["NodeList"] == job["NodeList"])]
        overlap = others[(others["StartTime"] < job["EndTime"]) & (others["EndTime"] > job["StartTime"])]
        assert overlap.empty, (job["rule"], overlap[["JobId", "rule", "StartTime", "EndTime"]])

    # the same records as a local run of the same study: greedy ids and counts, not timings
    out_local, _ = local_run.communicate(timeout=900)
    assert local_run.returncode == 0, out_local[-4000:]
    slurm, local = records(base), records(local)
    assert (slurm["temperature"] == "0.0").any() and len(slurm) > 0
    pd.testing.assert_frame_equal(slurm, local)
