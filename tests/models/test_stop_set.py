"""The stop set: every end-of-generation token ends a run, with the Qwen2.5 tokenizer's ids.

paper-qwen-v2's qwen-1b5 runs decoded past ``<|endoftext|>`` (151643) in 12 of 714 runs,
because only ``<|im_end|>`` (151645, the metadata's eos) stopped them. The test writes a
vocabulary-only GGUF with Qwen2.5's special tokens at their real ids (the 1.1 GB model is
not installed for the tests) and asks llama.cpp which ids end generation.
"""
from __future__ import annotations

import pytest

QWEN_VOCAB = 151_936
QWEN_SPECIAL = {151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>",
                151659: "<|fim_prefix|>", 151660: "<|fim_middle|>", 151661: "<|fim_suffix|>",
                151662: "<|fim_pad|>", 151663: "<|repo_name|>", 151664: "<|file_sep|>"}


def _qwen_vocab_gguf(path):
    """A GGUF holding Qwen2.5's tokenizer layout (gpt2 BPE, pre 'qwen2', eos 151645, bos and
    pad 151643, special tokens at their ids) and a one-layer qwen2 header, no tensors."""
    import gguf
    w = gguf.GGUFWriter(str(path), "qwen2")
    for key, val in (("context_length", 64), ("embedding_length", 64), ("block_count", 1),
                     ("feed_forward_length", 128), ("attention.head_count", 4),
                     ("attention.head_count_kv", 4)):
        w.add_uint32(f"qwen2.{key}", val)
    w.add_float32("qwen2.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    tokens = [QWEN_SPECIAL.get(i, f"t{i}") for i in range(QWEN_VOCAB)]
    types = [gguf.TokenType.CONTROL if i in QWEN_SPECIAL else gguf.TokenType.NORMAL for i in range(QWEN_VOCAB)]
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["t 1"])
    w.add_eos_token_id(151645)
    w.add_bos_token_id(151643)
    w.add_pad_token_id(151643)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def qwen_eog(tmp_path_factory):
    llama_cpp = pytest.importorskip("llama_cpp")
    from specproof.models.llama import end_of_generation_ids
    path = tmp_path_factory.mktemp("vocab") / "qwen-vocab.gguf"
    _qwen_vocab_gguf(path)
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    assert model, "llama.cpp could not load the vocabulary-only GGUF"
    try:
        yield end_of_generation_ids(model)
    finally:
        llama_cpp.llama_model_free(model)


def test_qwen_endoftext_and_im_end_both_end_generation(qwen_eog):
    assert {151643, 151645} <= qwen_eog
    assert 151644 not in qwen_eog  # <|im_start|> opens a turn
    assert not qwen_eog & set(range(151643))  # no ordinary token


def test_hf_stop_set_takes_the_list_the_tokenizer_and_the_end_tokens():
    from specproof.models.hf import end_of_generation_ids

    class Tokenizer:
        eos_token_id = 151645

        def get_vocab(self):
            return {v: k for k, v in QWEN_SPECIAL.items()} | {"def": 755}
    assert end_of_generation_ids([151645, 151643], Tokenizer()) == {151643, 151645}
    assert end_of_generation_ids(151645, Tokenizer()) == {151643, 151645}  # <|endoftext|> by its text
    assert end_of_generation_ids(None, Tokenizer()) == {151643, 151645}


def test_the_target_loop_and_the_speculative_loop_stop_at_any_end_token():
    """A run ends at the first token of the stop set, on the target-only loop and the
    speculative loop alike, whichever member of the set comes first."""
    from specproof.decode.decoding import DecodeSettings, decode_speculative, decode_target_only
    from specproof.decode.drafters import ModelDrafter
    from specproof.decode.policies import make_policy
    from specproof.models.mock import MockBackend

    free = decode_target_only(MockBackend(vocab_size=16, seed=3), [1, 2, 3], DecodeSettings(200, 0.0))
    first, second = list(dict.fromkeys(free.new_ids))[2:4]  # two tokens the free run emits

    class TwoStops(MockBackend):
        @property
        def eos_ids(self):
            return frozenset({first, second})
    plain = decode_target_only(TwoStops(vocab_size=16, seed=3), [1, 2, 3], DecodeSettings(200, 0.0))
    cut = min(free.new_ids.index(first), free.new_ids.index(second)) + 1
    assert plain.new_ids == free.new_ids[:cut] and plain.stop_reason == "eos"
    spec = decode_speculative(TwoStops(vocab_size=16, seed=3), ModelDrafter(MockBackend(vocab_size=16, seed=3)),
                              [1, 2, 3], DecodeSettings(200, 0.0), make_policy("fixed", 4))
    assert spec.new_ids == plain.new_ids and spec.stop_reason == "eos"
