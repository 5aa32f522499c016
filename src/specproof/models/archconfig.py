"""A model's architecture from its GGUF header, as a transformers ``config.json`` dict, so
that the architecture can be built with random weights where the model file cannot go
(benchmarks/gpu_check.py: a lent GPU gets the working tree, 64 MiB, not the weights).

Read from the header alone (metadata and tensor infos; no tensor data, no ``gguf``
package), so the first chunk package of an embedded chunked model is enough: the header
sits at the start of the concatenated file. Mapping for ``general.architecture`` = qwen2
(``<a>`` = the architecture):

    num_hidden_layers        = <a>.block_count
    hidden_size              = <a>.embedding_length
    intermediate_size        = <a>.feed_forward_length
    num_attention_heads      = <a>.attention.head_count
    num_key_value_heads      = <a>.attention.head_count_kv
    rope_theta               = <a>.rope.freq_base
    rms_norm_eps             = <a>.attention.layer_norm_rms_epsilon
    max_position_embeddings  = <a>.context_length
    vocab_size               = len(tokenizer.ggml.tokens) (checked against the rows of
                               token_embd.weight)
    tie_word_embeddings      = no output.weight tensor (the LM head is the embedding)
"""
from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

from ..errors import ModelFileError
from .ggufheader import ARRAY, SCALARS, STRING, HeaderCursor, header_entries

ARCHITECTURES = {"qwen2": ("Qwen2ForCausalLM", "qwen2")}
# config.json key -> the GGUF key after "<arch>."
KEYS = {"num_hidden_layers": "block_count", "hidden_size": "embedding_length",
        "intermediate_size": "feed_forward_length", "num_attention_heads": "attention.head_count",
        "num_key_value_heads": "attention.head_count_kv", "rope_theta": "rope.freq_base",
        "rms_norm_eps": "attention.layer_norm_rms_epsilon", "max_position_embeddings": "context_length"}


class _Lengths(HeaderCursor):
    """A header cursor that gives an array's length (its elements skipped) instead of None."""

    def value(self, vtype: int):
        if vtype != ARRAY:
            return super().value(vtype)
        sub, n = self.take("I"), self.take("Q")
        if sub in SCALARS:
            self.skip(n * struct.calcsize("<" + SCALARS[sub]))
        elif sub == STRING:
            for _ in range(n):
                self.skip(self.take("Q"))
        else:
            for _ in range(n):
                self.value(sub)
        return ("array", n)


def parse_header(buf) -> tuple[dict, dict[str, list[int]]]:
    """(metadata, tensor dims by name) of a GGUF's leading bytes ``buf``; an array's value
    is ("array", its length). struct.error where ``buf`` ends inside the header."""
    if bytes(buf[:4]) != b"GGUF":
        raise ValueError(f"not a GGUF file (magic bytes {bytes(buf[:4])!r})")
    _, metadata, infos = header_entries(_Lengths(buf))
    tensors = {name: dims for name, dims, _, _ in infos}
    return metadata, tensors


def first_chunk_bytes(name: str) -> tuple[bytes, dict]:
    """The bytes of the first chunk package of embedded chunked model ``name``
    (``files.CHUNKED``; its files in the order ``files`` assembles them) and where they
    came from: the package, its version and files. Enough for the header of a GGUF whose
    metadata (the vocabulary included) fits in that package."""
    from importlib import metadata as md
    from .files import CHUNKED
    model = CHUNKED[name]
    pip_name = model.packages()[0]
    spec = importlib.util.find_spec(pip_name.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(f"{pip_name}=={model.version} is not installed (the first chunk of "
                             f"embedded:{name}; `pip install {pip_name}=={model.version}`)")
    files = sorted((Path(list(spec.submodule_search_locations)[0]) / "data").glob(model.pattern))
    if not files:
        raise ModelFileError(f"{pip_name} holds no {model.pattern} file")
    data = b"".join(f.read_bytes() for f in files)
    return data, {"embedded": name, "file": model.file, "package": pip_name,
                  "version": md.version(pip_name), "chunk_files": [f.name for f in files],
                  "bytes_read": len(data)}


def hf_config(metadata: dict, tensors: dict[str, list[int]]) -> dict:
    """The transformers config.json dict of a header (see the module docstring)."""
    arch = metadata.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise ModelFileError(f"architecture {arch!r} has no mapping (known: {', '.join(ARCHITECTURES)})")
    cls, model_type = ARCHITECTURES[arch]
    missing = [f"{arch}.{k}" for k in KEYS.values() if f"{arch}.{k}" not in metadata]
    if missing:
        raise ModelFileError(f"GGUF header lacks {', '.join(missing)}")
    out = {"architectures": [cls], "model_type": model_type,
           **{key: metadata[f"{arch}.{g}"] for key, g in KEYS.items()}}
    out["rope_theta"] = float(out["rope_theta"])
    out["rms_norm_eps"] = float(out["rms_norm_eps"])
    tokens = metadata.get("tokenizer.ggml.tokens")
    rows = tensors.get("token_embd.weight", [None, None])[-1]  # GGUF dims: [hidden, vocab]
    if not (isinstance(tokens, tuple) and tokens[1] == rows):
        raise ModelFileError(f"vocabulary: {tokens and tokens[1]} tokens but token_embd.weight has "
                             f"{rows} rows")
    out["vocab_size"] = int(rows)
    out["tie_word_embeddings"] = "output.weight" not in tensors
    out["hidden_act"] = "silu"
    for key, gguf_key in (("bos_token_id", "tokenizer.ggml.bos_token_id"),
                          ("eos_token_id", "tokenizer.ggml.eos_token_id")):
        if isinstance(metadata.get(gguf_key), int):
            out[key] = metadata[gguf_key]
    return out


def embedded_config(name: str) -> dict:
    """config.json dict of embedded chunked model ``name`` from its first chunk package,
    with ``_source`` (where the header came from) and ``_gguf`` (the header keys used)."""
    data, source = first_chunk_bytes(name)
    try:
        metadata, tensors = parse_header(memoryview(data))
    except struct.error:
        raise ModelFileError(f"embedded:{name}: the header runs past the first chunk package "
                             f"({len(data):,} bytes)") from None
    arch = metadata.get("general.architecture")
    used = {k: v for k, v in metadata.items()
            if k.startswith(f"{arch}.") or k in ("general.architecture", "general.name")}
    used["tokenizer.ggml.tokens (length)"] = metadata["tokenizer.ggml.tokens"][1]
    used["token_embd.weight (dims)"] = tensors["token_embd.weight"]
    used["output.weight present"] = "output.weight" in tensors
    used["tensors"] = len(tensors)
    return {**hf_config(metadata, tensors), "_source": source, "_gguf": used}
