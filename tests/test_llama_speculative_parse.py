"""benchmarks/llama_speculative.py reads llama.cpp's own tools' logs: the parsers against
logs captured from the real tools (llama-cpp-python 0.3.36's vendored llama.cpp, built
by `make peers`; tests/data/llama_peers/), so a changed log format fails here rather
than in a half-hour benchmark. None of this needs the tools themselves."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "llama_peers"
sys.path.insert(0, str(ROOT / "benchmarks"))
ls = pytest.importorskip("llama_speculative")


# what the captured logs say (SmolLM2 F16 target, Q4_1 draft, 2 threads, greedy; the
# speculative runs at K = 6: --spec-draft-n-max 6 --spec-draft-n-min 6 --spec-draft-p-min 0)
PROMPT = ('def is_palindrome(text: str) -> bool:\n    """Return True if text reads the same forwards and '
          'backwards."""\n')
# llama-completion -n 32: "eval time = 549.96 ms / 31 runs", "prompt eval time = 81.92 ms / 27 tokens"
COMPLETION = {"new_tokens": 31, "tokens_per_s": 31 / 0.54996, "prompt_tokens": 27, "prompt_ms": 81.92,
              "text_start": "return text == text[::-1]"}
# llama-speculative-simple -n 31: "decoded 37 tokens in 1.117 seconds", n_drafted 36, n_accept 27
SPEC = {"counts": (37, 36, 27), "tokens_per_s": 37 / 1.117, "text_start": "return text == text[::-1]"}
# the same at -lv 4: "#calls(b,g,a) = 1 10 10", "dur(b,g,a) = 0.001, 427.412, 0.010 ms",
# prompt eval 611.87 ms, eval 103.98 ms, sampling 3.65 ms, decoded in 0.971 s
SPEC_LV4 = {"timers": {"rounds": 10, "draft_ms": 427.412, "prompt_eval_ms": 611.87, "eval_ms": 103.98,
                       "sampling_ms": 3.65}, "decode_ms": 971.0}


def _log(name: str) -> str:
    return (DATA / name).read_text()


def test_their_defaults_come_from_the_real_help():
    assert ls.parse_help_defaults(_log("speculative_simple_help.txt")) == {
        "--spec-draft-n-max": "3", "--spec-draft-n-min": "0", "--spec-draft-p-min": "0.00",
        "--spec-ngram-simple-size-n": "12", "--spec-ngram-simple-size-m": "48"}


def test_completion_log():
    out = ls.parse_completion(_log("completion.stdout"), _log("completion.stderr"))
    assert out["new_tokens"] == COMPLETION["new_tokens"]
    assert out["tokens_per_s"] == pytest.approx(COMPLETION["tokens_per_s"], rel=1e-9)
    assert out["prompt_tokens"] == COMPLETION["prompt_tokens"]
    assert out["prompt_ms"] == COMPLETION["prompt_ms"]
    assert out["text"].startswith(COMPLETION["text_start"]) and "[end of text]" not in out["text"]


def test_speculative_log_fixed_k():
    out = ls.parse_speculative(_log("speculative_simple.stdout"), _log("speculative_simple.stderr"), PROMPT)
    assert (out["new_tokens"], out["drafted"], out["accepted"]) == SPEC["counts"]
    assert out["tokens_per_s"] == pytest.approx(SPEC["tokens_per_s"], rel=1e-9)
    assert out["timers"] is None  # default verbosity prints no draft statistics
    assert out["text"].startswith(SPEC["text_start"]) and PROMPT not in out["text"]


def test_speculative_verbose_log_gives_the_round_timers():
    out = ls.parse_speculative(_log("speculative_simple_lv4.stdout"), _log("speculative_simple_lv4.stderr"), PROMPT)
    assert out["timers"] == SPEC_LV4["timers"]
    costs = ls.theirs_round_costs(out, prompt_ms_est=100.0)
    assert costs["rounds"] == 10 and costs["round"] == pytest.approx(97.1)
    assert costs["draft"] == pytest.approx(42.7412)
    assert costs["verify"] == pytest.approx((611.87 + 103.98 - 100.0) / 10)
    assert costs["sampling"] == pytest.approx(0.365)


def test_their_text_may_run_past_the_budget():
    ours = "return text == text[::-1]\n"
    assert ls.same_text("return text == text[::-1]\n\n# Test", ours)
    assert not ls.same_text("return text[::-1] == text", ours)


def test_a_log_without_the_decode_line_is_an_error_not_a_number():
    err = _log("speculative_simple.stderr").replace("decoded", "produced")
    with pytest.raises(ls.LogFormatError, match="llama-speculative-simple"):
        ls.parse_speculative(_log("speculative_simple.stdout"), err, PROMPT)
    with pytest.raises(ls.LogFormatError, match="does not contain the prompt"):
        ls.spec_text("something else entirely", PROMPT)


def test_skips_cleanly_without_the_tools(monkeypatch, capsys):
    monkeypatch.setattr(ls, "missing_tools", lambda: ["llama-speculative-simple", "llama-completion"])
    monkeypatch.setattr(sys, "argv", ["llama_speculative.py", "--quick"])
    assert ls.main() == 0
    assert "skipped" in capsys.readouterr().out
