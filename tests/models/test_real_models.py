"""Real models: hf fp32 SmolLM2 target + llama.cpp Q4_1 draft (the embedded pair)."""
import numpy as np
import pytest

from specproof.decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from specproof.decode.drafters import ModelDrafter, NGramDrafter
from specproof.models.loader import load_backend
from specproof.decode.policies import make_policy

pytestmark = pytest.mark.models

PROMPTS = [
    "def fizzbuzz(n: int) -> list[str]:\n    \"\"\"Return FizzBuzz strings for 1..n.\"\"\"\n",
    "Explain in two sentences why the sky is blue.",
    "import numpy as np\n\ndef moving_average(x, w):\n",
]


@pytest.fixture(scope="module")
def hf_target():
    return load_backend({"backend": "hf", "model": "embedded:smollm2-q4_1", "dtype": "float32",
                         "threads": 2})


@pytest.fixture(scope="module")
def llama_draft():
    return load_backend({"backend": "llama", "model": "embedded:smollm2-q4_1", "threads": 2,
                         "n_ctx": 1024})


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_speculative_ids_equal_target_only(hf_target, llama_draft, prompt):
    ids = hf_target.encode(hf_target.chat_prompt(prompt) if "Explain" in prompt else prompt)
    s = DecodeSettings(max_new_tokens=32)
    ref = decode_target_only(hf_target, ids, s)
    run = decode_speculative(hf_target, ModelDrafter(llama_draft), ids, s, make_policy("fixed", 5))
    assert run.new_ids == ref.new_ids
    assert (run.rounds_frame()["residual_ns"] >= 0).all()  # timing boundaries in order
    assert run.mean_accepted() > 1.0  # same weights: the Q4_1 draft mostly agrees


def test_ngram_drafter_on_hf_target_is_lossless(hf_target):
    ids = hf_target.encode(PROMPTS[2])
    s = DecodeSettings(max_new_tokens=24)
    assert decode_speculative(hf_target, NGramDrafter(), ids, s, make_policy("fixed", 4)).new_ids \
        == decode_target_only(hf_target, ids, s).new_ids


def _rollback_gap(backend, ids):
    backend.reset()
    fresh = backend.forward(ids)
    backend.rollback(len(ids) - 3)
    again = backend.forward(ids[-3:])
    return float(np.abs(fresh[-3:] - again).max())


def test_hf_rollback_then_refeed_matches_fresh_run(hf_target):
    ids = hf_target.encode(PROMPTS[0])
    assert _rollback_gap(hf_target, ids) < 1e-4


def test_llama_rollback_then_refeed(llama_draft, record_property):
    """llama.cpp: after rollback the re-fed logits equal a fresh run's when scored with
    the same batch shape; the gap is recorded (it is batch-shape dependent)."""
    ids = llama_draft.encode(PROMPTS[0])
    gap = _rollback_gap(llama_draft, ids)
    record_property("llama_rollback_max_abs_dlogit", gap)
    llama_draft.reset()
    llama_draft.forward(ids[:-3])
    a = llama_draft.forward(ids[-3:])
    llama_draft.rollback(len(ids) - 3)
    b = llama_draft.forward(ids[-3:])
    np.testing.assert_array_equal(a, b)  # same shape, same cache state: bit-identical
    assert gap < 1.0
    assert llama_draft.length == len(ids)


def test_hf_gguf_target_loads_from_its_converted_copy_with_identical_logits(hf_target):
    """The saved conversion must be the GGUF loader's model, tensor for tensor: same
    logits, same tokenizer, same chat template."""
    import torch
    from specproof.models.hf import _load
    from specproof.models.files import resolve
    gguf = resolve("embedded:smollm2-q4_1")
    assert hf_target.source != gguf and (hf_target.source / "model.safetensors").is_file()
    tok, model = _load(gguf.parent, torch.float32, gguf, gguf_file=gguf.name)
    text = hf_target.chat_prompt("Write a haiku about caches.")
    assert tok.apply_chat_template([{"role": "user", "content": "Write a haiku about caches."}],
                                   tokenize=False, add_generation_prompt=True) == text
    ids = tok.encode(text, add_special_tokens=False)
    assert ids == hf_target.encode(text)
    with torch.inference_mode():
        direct = model.eval()(input_ids=torch.tensor([ids])).logits[0].numpy()
    hf_target.reset()
    cached = hf_target.forward(ids)
    hf_target.reset()
    assert np.array_equal(direct, cached)


def test_llama_flash_attention_is_recorded_and_rolls_back():
    """flash_attn reaches llama.cpp (its settings record it) and KV rollback still holds."""
    backend = load_backend({"backend": "llama", "model": "embedded:smollm2-q4_1", "threads": 2,
                            "n_ctx": 256, "flash_attn": True})
    try:
        assert backend.settings["flash_attn"] is True
        ids = backend.encode(PROMPTS[0])
        backend.forward(ids[:-3])
        a = backend.forward(ids[-3:])
        backend.rollback(len(ids) - 3)
        np.testing.assert_array_equal(a, backend.forward(ids[-3:]))  # same shape, same cache state
        backend.reset()
        assert len(decode_target_only(backend, backend.encode(PROMPTS[1]),
                                      DecodeSettings(max_new_tokens=8, stop_at_eos=False)).new_ids) == 8
    finally:
        backend.close()
