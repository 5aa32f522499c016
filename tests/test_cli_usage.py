"""What a user sees of the CLI: ``--version``, help with defaults and a first line for
users, prompts from a file or stdin, one spelling for a missing value, and provenance in
``decode --json`` (mock models: seconds)."""
import io
import json
import math
import sys

import pytest

from specproof import __version__, cli
from specproof.decode.ab import decode_lines

MOCK = ["decode", "--target-backend", "mock", "--draft-backend", "mock", "--k", "3",
        "--max-new-tokens", "12"]


def run(argv, capsys, monkeypatch, stdin: bytes = b""):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    try:
        rc = cli.main(argv)
    except SystemExit as exc:
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_version(capsys, monkeypatch):
    rc, out, _ = run(["--version"], capsys, monkeypatch)
    assert rc == 0 and out.strip() == f"specproof {__version__}"


def test_help_opens_with_a_line_for_users(capsys, monkeypatch):
    rc, out, _ = run(["--help"], capsys, monkeypatch)
    description = out.split("\n\n")[1]
    assert rc == 0 and description.startswith("Does speculative decoding speed up a model pair")
    assert "decode" in out and "advise" in out


def test_decode_help_shows_defaults(capsys, monkeypatch):
    rc, out, _ = run(["decode", "--help"], capsys, monkeypatch)
    text = " ".join(out.split())
    for shown in ("K (max K for adaptive/guard, start K for hf_heuristic) (default: 6)",
                  "tokens to generate per run (default: 128)", "(default: fixed)",
                  "(default: embedded:smollm2-q4_1)", "(default: all cores)", "(default: 2048)"):
        assert shown in text, shown
    assert "(default: None)" not in text and "(default: False)" not in text


def test_every_option_of_every_command_has_help():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():
        for action in command._actions:
            assert action.help, f"specproof {name} {action.option_strings or action.dest}: no help text"


def test_a_prompt_from_a_file_and_from_stdin(tmp_path, capsys, monkeypatch):
    long = "def f(x):\n    return x\n" * 6000  # 150,000 characters: past what argv takes in one word
    (tmp_path / "p.txt").write_text(long)
    rc, out, err = run(MOCK + ["--json", "--prompt-file", str(tmp_path / "p.txt")], capsys, monkeypatch)
    assert rc == 0, err
    from_file = json.loads(out)
    rc, out, err = run(MOCK + ["--json", "--prompt", "-"], capsys, monkeypatch, long.encode())
    assert rc == 0, err
    from_stdin = json.loads(out)
    assert from_file["prompt_tokens"] == from_stdin["prompt_tokens"] > 1000
    assert from_file["text"] == from_stdin["text"]


def test_decode_json_records_provenance(capsys, monkeypatch):
    rc, out, err = run(MOCK + ["--json", "--prompt", "hello"], capsys, monkeypatch)
    assert rc == 0, err
    prov = json.loads(out)["provenance"]
    assert prov["target"]["backend"] == "mock" and prov["draft"]["backend"] == "mock"
    assert {"cpu", "os", "python", "packages", "git"} <= set(prov["machine"])
    assert prov["machine"]["git"]["commit"] is None or len(prov["machine"]["git"]["commit"]) == 40


def test_a_missing_value_reads_the_same_everywhere(capsys):
    assert cli.num(None) == cli.num(float("nan")) == cli.MISSING
    assert cli.num(1.234) == "1.23"
    out = {"text": "x", "target_tokens_per_s": 10.0, "new_tokens": 4, "draft": {"drafter": "mock"},
           "speculative_tokens_per_s": 12.0, "speedup": 1.2, "mean_accepted": math.nan,
           "acceptance_by_position": [0.5, math.nan, None], "ids_equal_target_only": True}
    text = "\n".join(decode_lines(out))
    assert "nan" not in text and "n/a" not in text
    assert f"acceptance by position [0.50, {cli.MISSING}, {cli.MISSING}]" in text
    assert f"mean accepted per round {cli.MISSING}" in text


def test_advise_prints_unset_positions_as_missing(capsys, monkeypatch):
    rc, out, err = run(["advise", "--target-backend", "mock", "--draft-backend", "ngram", "--k-max", "3",
                        "--prompt", "hello world"], capsys, monkeypatch)
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("acceptance by position"))
    assert "n/a" not in line and "nan" not in line


@pytest.mark.parametrize("argv", [["decode", "--k", "2", "--target-backend", "mock", "--draft-backend", "mock",
                                   "--prompt-file", "{path}"]])
def test_a_prompt_file_path_with_a_space(tmp_path, argv, capsys, monkeypatch):
    path = tmp_path / "my prompts" / "p.txt"
    path.parent.mkdir()
    path.write_text("hello")
    rc, _, err = run([a.format(path=path) for a in argv] + ["--max-new-tokens", "4", "--json"], capsys, monkeypatch)
    assert rc == 0, err
