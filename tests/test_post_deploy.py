"""environment.post-deploy.sh works from the copy Snakemake runs
(``.snakemake/conda/<hash>.post-deploy.sh``, run from the directory Snakemake runs in): it
finds the project from the working directory or an argument, never from its own path.
Checked with --dry-run, which prints the commands and installs nothing."""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "environment.post-deploy.sh"
COMMANDS = ["specproof.llama_build install --cmake-args=", "pip install -q --no-deps -e .",
            "specproof.llama_build smoke"]


def snakemake_copy(where: Path) -> Path:
    """The script where Snakemake puts it before running it: <where>/.snakemake/conda/."""
    copy = where / ".snakemake" / "conda" / "0123abcd.post-deploy.sh"
    copy.parent.mkdir(parents=True)
    shutil.copy2(SCRIPT, copy)
    return copy


def run(script: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    # as Snakemake runs it: the interpreter of its shebang, the copy's path, no cd
    return subprocess.run(["/usr/bin/env", "bash", str(script), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=30)


def fake_project(path: Path) -> Path:
    (path / "src" / "specproof").mkdir(parents=True)
    (path / "src" / "specproof" / "__init__.py").write_text("")
    (path / "pyproject.toml").write_text("[project]\nname = 'specproof'\n")
    return path.resolve()


def assert_dry_run(proc: subprocess.CompletedProcess, root: Path) -> None:
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"post-deploy: project root {root}"
    assert len(lines) == 1 + len(COMMANDS)
    for line, command in zip(lines[1:], COMMANDS):
        assert command in line


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_copy_finds_this_project_from_the_working_directory(tmp_path):
    """The copy lies outside the project's tree here: only the working directory can say."""
    assert_dry_run(run(snakemake_copy(tmp_path), ROOT, "--dry-run"), ROOT)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_copy_inside_a_project_and_from_a_subdirectory(tmp_path):
    project = fake_project(tmp_path / "proj")
    copy = snakemake_copy(project)
    assert_dry_run(run(copy, project, "--dry-run"), project)
    (project / "workflow").mkdir()
    assert_dry_run(run(copy, project / "workflow", "--dry-run"), project)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_an_explicit_root_wins_and_outside_any_project_is_one_line(tmp_path):
    project = fake_project(tmp_path / "proj")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    copy = snakemake_copy(elsewhere)
    assert_dry_run(run(copy, elsewhere, "--dry-run", str(project)), project)
    proc = run(copy, elsewhere, "--dry-run")
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and "not inside the specproof project" in proc.stderr
    proc = run(copy, elsewhere, "--dry-run", str(elsewhere))
    assert proc.returncode == 2 and "not the specproof project" in proc.stderr
    assert run(copy, project, "--bogus").returncode == 2


def test_the_script_never_uses_its_own_path():
    body = [line for line in SCRIPT.read_text().splitlines() if not line.lstrip().startswith("#")]
    assert not any("$0" in line or "BASH_SOURCE" in line for line in body)
