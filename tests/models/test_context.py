"""A model's context, checked before a run: a GGUF's header read without loading it (a
file cut short refused in one line), the context length of a GGUF or an HF directory, a
prompt that would run past a backend's positions refused before decoding, and (with the
real models) the CLI naming the flag to change."""
import json
import subprocess
import sys

import numpy as np
import pytest

from specproof.decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from specproof.decode.drafters import ModelDrafter
from specproof.errors import ConfigError, ModelFileError
from specproof.models.files import check_gguf, context_length
from specproof.models.mock import MockBackend


def write_gguf(path, context: int = 4096, floats: int = 1000):
    import gguf
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_context_length(context)
    writer.add_tensor("w", np.arange(floats, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_header_gives_the_context_length(tmp_path):
    header = check_gguf(write_gguf(tmp_path / "m.gguf", context=4096))
    assert header.architecture == "llama" and header.context_length == 4096
    assert header.data_end <= header.size
    assert context_length(tmp_path / "m.gguf") == 4096


@pytest.mark.parametrize("keep,why", [(0.9, "truncated GGUF file"), (40, "not a readable GGUF file")])
def test_a_file_cut_short_is_refused_in_one_line(tmp_path, keep, why):
    whole = write_gguf(tmp_path / "m.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[:int(keep * len(whole)) if keep < 1 else keep])
    with pytest.raises(ModelFileError, match=why) as exc:
        check_gguf(cut)
    assert str(cut) in str(exc.value) and "\n" not in str(exc.value)


def test_an_hf_directory_gives_its_position_count(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    assert context_length(tmp_path) == 8192
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"max_position_embeddings": 512}}))
    assert context_length(tmp_path) == 512


class Short(MockBackend):
    """A mock with 16 positions."""

    @property
    def max_context(self):
        return 16


def test_a_forward_past_the_context_is_refused_without_study_advice():
    b = Short(vocab_size=32)
    b.forward(list(range(10)))
    with pytest.raises(ConfigError) as exc:
        b.forward(list(range(7)))
    assert "context of 17 positions exceeds its 16" in str(exc.value)
    assert "study config" not in str(exc.value)


def test_a_run_that_cannot_fit_is_refused_before_it_starts():
    target, draft = Short(vocab_size=32), MockBackend(vocab_size=32)
    with pytest.raises(ConfigError, match=r"prompt of 10 tokens \+ 8 new tokens = 18 positions, over the 16"):
        decode_target_only(target, list(range(10)), DecodeSettings(8))
    assert target.length == 0  # nothing was run
    with pytest.raises(ConfigError, match="over the 16"):
        decode_speculative(MockBackend(vocab_size=32), ModelDrafter(Short(vocab_size=32)), list(range(10)),
                           DecodeSettings(8))
    assert decode_target_only(target, list(range(8)), DecodeSettings(8, stop_at_eos=False)).new_tokens == 8


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "specproof.cli", *args], capture_output=True,
                          text=True, timeout=900)


def error_line(res) -> str:
    assert res.returncode == 2, res.stderr[-2000:]
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("specproof: error:")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    return lines[0]


@pytest.mark.models
def test_a_prompt_past_the_hf_targets_positions_is_refused(tmp_path):
    """120,000 characters on the default hf target (8,192 positions): refused once the
    target's tokenizer has counted them, before the draft loads or anything decodes."""
    (tmp_path / "long.txt").write_text("hello " * 20_000)
    line = error_line(run_cli("decode", "--prompt-file", str(tmp_path / "long.txt")))
    assert line.startswith("specproof: error: --prompt-file: prompt of ") and "tokens + 128 new tokens" in line
    assert "over the 8,192 of the target model's positions" in line and "shorten the prompt" in line


@pytest.mark.models
@pytest.mark.parametrize("args,where,hint", [
    (["--n-ctx", "64", "--prompt", "word " * 100], "--prompt: prompt of", "over the 64 of the llama target's n_ctx"),
    (["--max-new-tokens", "4000"], "--max-new-tokens: prompt of", "over the 2,048 of the llama target's n_ctx"),
])
def test_a_llama_context_error_names_the_flag_not_the_study(args, where, hint):
    line = error_line(run_cli("decode", "--target-backend", "llama", "--draft-backend", "none", *args))
    assert line.startswith(f"specproof: error: {where}") and hint in line and "raise --n-ctx" in line
    assert "study" not in line


@pytest.mark.models
@pytest.mark.parametrize("backend", ["llama", "hf"])
def test_a_tokenizer_alone_counts_as_its_backend_does(backend):
    """``load_tokenizer`` (the study's context check, no weights) encodes raw and
    chat-rendered prompts to the very ids its backend does."""
    from specproof.models.loader import load_backend, load_tokenizer
    spec = {"backend": backend, "model": "embedded:smollm2-q4_1", "threads": 1}
    texts = ["def f(x):\n    return x  # café", "Explain a hash table.\n<|im_end|> in the text"]
    tokenizer, model = load_tokenizer(spec), load_backend(spec)
    try:
        for text in texts:
            assert tokenizer.encode(text) == model.encode(text)
            assert tokenizer.chat_prompt(text) == model.chat_prompt(text)
    finally:
        tokenizer.close()
        model.close()
