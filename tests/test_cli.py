"""Bad input gives one line naming the problem, exit code 2, no traceback."""
import json
import subprocess
import sys

import pytest

from specproof.errors import ConfigError
from specproof.models.loader import check_same_vocabulary, load_backend


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "specproof.cli", *args], capture_output=True,
                          text=True, timeout=600)


def assert_one_line_error(res, *needles):
    assert res.returncode == 2, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("specproof: error:")]
    assert len(errors) == 1, res.stderr
    assert res.stderr.strip().splitlines()[-1] == errors[0]  # progress lines may precede it
    assert "Traceback" not in res.stderr
    for n in needles:
        assert n in errors[0], errors[0]


def test_missing_model_path(tmp_path):
    assert_one_line_error(run_cli("decode", "--target-model", str(tmp_path / "nope.gguf")),
                          "nope.gguf", "does not exist")


def test_file_that_is_not_gguf(tmp_path):
    bad = tmp_path / "weights.gguf"
    bad.write_bytes(b"PK\x03\x04 not a gguf")
    assert_one_line_error(run_cli("decode", "--target-backend", "llama", "--target-model", str(bad)),
                          "weights.gguf", "not a GGUF file")


def test_hub_id_is_refused_not_downloaded():
    assert_one_line_error(run_cli("decode", "--target-model", "HuggingFaceTB/SmolLM2-135M"),
                          "HuggingFaceTB/SmolLM2-135M", "never downloads")


def test_k_below_one():
    assert_one_line_error(run_cli("decode", "--k", "0"), "--k: must be an integer from 1 to 64")


def test_empty_prompt():
    assert_one_line_error(run_cli("decode", "--prompt", "  "), "empty prompt")


def test_unknown_embedded_model():
    assert_one_line_error(run_cli("decode", "--target-model", "embedded:llama-70b"),
                          "unknown embedded model")


def test_draft_with_different_vocabulary():
    t = load_backend({"backend": "mock", "vocab_size": 100})
    d = load_backend({"backend": "mock", "vocab_size": 50})
    with pytest.raises(ConfigError, match="vocabulary 50.*100"):
        check_same_vocabulary(t, d)


@pytest.mark.models
def test_draft_with_different_vocabulary_via_cli():
    assert_one_line_error(run_cli("decode", "--target-backend", "mock", "--draft-backend", "llama"),
                          "vocabulary 49152", "shared vocabulary")


def test_decode_json_on_mock_pair():
    res = run_cli("decode", "--target-backend", "mock", "--draft-backend", "mock", "--json",
                  "--k", "3", "--max-new-tokens", "20", "--prompt", "hello")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    for key in ("target", "draft", "k", "policy", "verify_mode", "temperature", "new_tokens",
                "ids_equal_target_only", "speedup", "acceptance_by_position", "text"):
        assert key in out
    assert out["ids_equal_target_only"] is True and out["new_tokens"] == 20


def test_decode_repeats_print_each_pairs_speedup_and_json_records_them_with_the_cpu_share():
    args = ("decode", "--target-backend", "mock", "--draft-backend", "mock", "--k", "2", "--max-new-tokens", "8",
            "--prompt", "hello", "--repeats", "3")
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr
    assert "speedup of each A/B pair:" in res.stdout and "over 3 pairs" in res.stdout
    out = json.loads(run_cli(*args, "--json").stdout)
    assert len(out["pair_speedups"]) == 3 and all(x > 0 for x in out["pair_speedups"])
    assert "other_cpu_share" in out


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_temperature_must_be_finite_and_non_negative(value):
    res = run_cli("decode", "--target-backend", "mock", "--draft-backend", "mock", "--temperature", value)
    assert_one_line_error(res, "--temperature: must be a finite number from 0 to 100")
    assert "loading" not in res.stderr  # refused before any model loads


def test_repeats_below_one_is_refused_before_loading():
    res = run_cli("decode", "--target-backend", "mock", "--draft-backend", "mock", "--repeats", "0")
    assert_one_line_error(res, "--repeats: must be an integer from 1 to 1,000")
    assert "loading" not in res.stderr


def test_advise_refuses_a_non_finite_temperature():
    assert_one_line_error(run_cli("advise", "--target-backend", "mock", "--draft-backend", "mock",
                                  "--temperature", "nan"), "--temperature: must be a finite number")


def test_finite_json_turns_nan_into_null():
    from specproof.records import finite_json
    out = json.dumps(finite_json({"a": float("nan"), "b": [1.0, float("inf")], "c": 2}), allow_nan=False)
    assert json.loads(out) == {"a": None, "b": [1.0, None], "c": 2}
@pytest.mark.parametrize("policy", ["hf_heuristic", "hf_confidence", "llama_pmin"])
def test_decode_takes_the_library_policies(policy):
    res = run_cli("decode", "--target-backend", "mock", "--draft-backend", "mock", "--json",
                  "--policy", policy, "--k", "3", "--max-new-tokens", "20", "--prompt", "hello")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["policy"] == policy and out["ids_equal_target_only"] is True


def test_decode_refuses_an_unknown_policy_naming_the_choices():
    bad = run_cli("decode", "--target-backend", "mock", "--policy", "hf-heuristic")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr and "llama_pmin" in bad.stderr
