"""llama-cpp-python backend, driven through its low-level context.

We decode with our own batch (every position's logits flagged) rather than
``Llama.eval``, which copies logits into an n_ctx x vocab buffer. Rollback calls
``llama_memory_seq_rm`` so entries past the kept length are really removed (with
``swa_full`` so sliding-window models such as Gemma 3 can be rolled back too).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import ConfigError, ModelFileError
from ..decode.backend import Backend, BackendInfo
from ..llama_build import read_record, record_path
from .files import check_gguf, file_record


def build_record() -> dict:
    """llama.cpp system info, whether the build can offload to an accelerator, and the
    CMake flags (with the CPU features that chose them) this venv's llama-cpp-python was
    built with (``specproof.llama_build``), for provenance."""
    import llama_cpp
    return {"llama_cpp_python": llama_cpp.__version__,
            "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
            "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
            "build": read_record(record_path())}


def end_of_generation_ids(model) -> frozenset[int]:
    """Every token id llama.cpp's own rule marks as ending generation
    (``llama_vocab_is_eog``): the metadata's eos, eot and eom ids and the tokens its
    vocabulary loader recognises by text (for Qwen2.5: ``<|endoftext|>`` and ``<|im_end|>``
    beside the fill-in-the-middle stops). ``model`` is a llama.cpp model pointer; the
    vocabulary is scanned once (~0.1 s for 152k tokens). llama.cpp's own tools stop on
    this set, so both loops and the reference stop where ``llama-completion`` does."""
    import llama_cpp
    vocab = llama_cpp.llama_model_get_vocab(model)
    n = int(llama_cpp.llama_vocab_n_tokens(vocab))
    return frozenset(t for t in range(n) if llama_cpp.llama_vocab_is_eog(vocab, t))


def default_gpu_layers() -> int:
    """All layers on the accelerator when the build has one (CUDA, Metal, ...), else 0."""
    import llama_cpp
    return -1 if llama_cpp.llama_supports_gpu_offload() else 0


def encode(model, text: str) -> list[int]:
    """The ids of ``text`` as llama.cpp tokenizes it (special tokens parsed, no BOS added);
    ``model`` a ``Llama`` or its vocabulary alone."""
    return list(model.tokenize(text.encode("utf-8"), add_bos=False, special=True))


def chat_prompt(metadata: dict, instruction: str) -> str:
    """``instruction`` as one user turn of the chat template in the GGUF's ``metadata``
    (as is without one)."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    template = metadata.get("tokenizer.chat_template")
    if not template:
        return instruction
    fmt = Jinja2ChatFormatter(template=template, eos_token="", bos_token="")
    return fmt(messages=[{"role": "user", "content": instruction}]).prompt


class LlamaTokenizer:
    """A GGUF's vocabulary alone (llama.cpp's ``vocab_only`` model: no weights, no
    context), to count a prompt's tokens before the model loads; encodes and renders chat
    prompts as ``LlamaCppBackend`` does."""

    def __init__(self, path: Path):
        import llama_cpp
        from llama_cpp._internals import LlamaModel
        check_gguf(path)
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        try:
            self.model = LlamaModel(path_model=str(path), params=params, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelFileError(f"{path}: llama.cpp could not read its vocabulary: {exc}") from None
        self.metadata = self.model.metadata()

    def encode(self, text: str) -> list[int]:
        return encode(self.model, text)

    def chat_prompt(self, instruction: str) -> str:
        return chat_prompt(self.metadata, instruction)

    def close(self) -> None:
        self.model.close()


class LlamaCppBackend(Backend):
    name = "llama"

    def __init__(self, path: Path, n_ctx: int = 2048, n_batch: int = 512, n_ubatch: int = 512,
                 n_threads: int | None = None, n_gpu_layers: int | None = None, flash_attn: bool = False):
        super().__init__()
        from llama_cpp import Llama

        if path.is_dir():
            raise ModelFileError(f"{path}: the llama backend needs a GGUF file, not a directory")
        check_gguf(path)
        for key, val in (("n_ctx", n_ctx), ("n_batch", n_batch), ("n_ubatch", n_ubatch)):
            if int(val) < 1:
                raise ConfigError(f"llama {key} must be >= 1 (got {val})")
        threads = int(n_threads or os.cpu_count() or 1)
        gpu_layers = default_gpu_layers() if n_gpu_layers is None else int(n_gpu_layers)
        self.path = Path(path)
        self.settings = {"n_ctx": int(n_ctx), "n_batch": int(n_batch), "n_ubatch": int(n_ubatch),
                         "n_threads": threads, "n_gpu_layers": gpu_layers, "flash_attn": bool(flash_attn)}
        try:
            self.llm = Llama(model_path=str(path), n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_ubatch,
                             n_threads=threads, n_threads_batch=threads, n_gpu_layers=gpu_layers,
                             logits_all=False, flash_attn=bool(flash_attn),
                             swa_full=True, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelFileError(f"{path}: llama.cpp could not load it: {exc}") from None
        self._vocab = int(self.llm.n_vocab())
        self._ctx = self.llm._ctx
        self._batch = self.llm._batch
        self._eos = end_of_generation_ids(self.llm._model.model)

    @property
    def max_context(self) -> int:
        """llama.cpp's n_ctx (``Backend.forward`` refuses to overflow it)."""
        return self.settings["n_ctx"]

    def encode(self, text: str) -> list[int]:
        return encode(self.llm, text)

    def decode(self, ids: list[int]) -> str:
        return self.llm.detokenize(ids).decode("utf-8", errors="replace")

    def chat_prompt(self, instruction: str) -> str:
        return chat_prompt(self.llm.metadata, instruction)

    def _forward(self, ids: list[int], last_only: bool) -> np.ndarray:
        out = np.empty((1 if last_only else len(ids), self._vocab), dtype=np.float32)
        step = self.settings["n_batch"]
        for start in range(0, len(ids), step):
            chunk = ids[start:start + step]
            # set_batch always flags the chunk's last position; logits_all flags the rest
            self._batch.set_batch(batch=chunk, n_past=self.length + start, logits_all=not last_only)
            self._ctx.decode(self._batch)
            rows = 1 if last_only else len(chunk)
            raw = np.ctypeslib.as_array(self._ctx.get_logits(), shape=(rows * self._vocab,))
            if last_only:
                out[0] = raw
            else:
                out[start:start + rows] = raw.reshape(rows, self._vocab)
        return out

    def _truncate(self, n: int) -> None:
        if not self._ctx.kv_cache_seq_rm(0, n, -1):
            raise RuntimeError(f"llama.cpp refused to remove KV entries past {n}")
        self.llm.n_tokens = n

    def info(self) -> BackendInfo:
        return BackendInfo(backend="llama", model=self.path.name, vocab_size=self._vocab,
                           device="cpu" if self.settings["n_gpu_layers"] == 0 else "accelerator", dtype="gguf", files=file_record(self.path)["files"],
                           settings=dict(self.settings))

    def close(self) -> None:
        self.llm.close()
