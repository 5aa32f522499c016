"""transformers + torch backend: a local HF directory or a GGUF file (dequantized by
transformers' ``gguf_file=`` loader to the requested dtype). Never downloads: every
``from_pretrained`` is given ``local_files_only=True`` (a local directory or GGUF, never a
hub id: ``files.resolve`` refuses those). The environment is left as it is."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from ..errors import ConfigError, ModelFileError
from .files import context_length, file_record, model_dir, sha256
from ..decode.backend import Backend, BackendInfo

DTYPES = ("float32", "float16", "bfloat16")
# special tokens that end a text or a chat turn, as llama.cpp's vocabulary loader names them
END_OF_GENERATION_TEXTS = ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>",
                           "<|end|>", "<|end_of_text|>")


def _load(src: Path, torch_dtype, label: Path, **kwargs):
    """(tokenizer, model) from an HF directory, or from a GGUF with gguf_file=."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(src), local_files_only=True, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(str(src), local_files_only=True,
                                                     dtype=torch_dtype, **kwargs)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelFileError(f"{label}: transformers could not load it: {first}") from None
    return tokenizer, model


def end_of_generation_ids(generation_eos, tokenizer) -> frozenset[int]:
    """The ids that end generation: the generation config's ``eos_token_id`` (an id or a
    list, transformers' own stop rule), the tokenizer's eos, and the special tokens a
    chat model ends a turn or a text with (``<|endoftext|>``, ``<|im_end|>``,
    ``<|eot_id|>``, ``<end_of_turn>``) where its vocabulary holds them."""
    ids = {generation_eos} if isinstance(generation_eos, int) else set(generation_eos or [])
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    vocab = tokenizer.get_vocab()
    ids |= {vocab[t] for t in END_OF_GENERATION_TEXTS if t in vocab}
    return frozenset(int(i) for i in ids if i is not None and int(i) >= 0)


def converted_dir(gguf: Path, dtype: str, directory: Path | None = None) -> Path:
    """The GGUF converted once by transformers' ``gguf_file=`` loader (dequantized to
    ``dtype``) and saved as an HF directory (safetensors) under the model directory
    ``directory`` (see ``files.model_dir``), keyed by the GGUF's sha256 and the dtype.
    Reading a GGUF through transformers takes ~20 s for SmolLM2-135M (it parses the
    metadata three times); the saved directory loads in ~1 s with the same tensors. Every
    load, the first included, reads the directory, so all runs use one code path."""
    import torch
    out = model_dir(directory) / "hf" / f"{gguf.stem}-{sha256(gguf)[:16]}-{dtype}"
    if (out / "config.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tokenizer, model = _load(gguf.parent, getattr(torch, dtype), gguf, gguf_file=gguf.name)
    # transformers marks a GGUF-loaded model as "quantized" (by the GGUF quantizer), but
    # its tensors are already dequantized plain ``dtype`` tensors: save them as such.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    tmp.chmod(0o755)
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            tmp.rename(out)
        except OSError:  # another process finished first: keep its copy
            if not (out / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def encode(tokenizer, text: str) -> list[int]:
    """The ids of ``text`` (no special tokens added)."""
    return list(tokenizer.encode(text, add_special_tokens=False))


def chat_prompt(tokenizer, instruction: str) -> str:
    """``instruction`` as one user turn of the tokenizer's chat template, with the
    generation prompt (as is without a template)."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template([{"role": "user", "content": instruction}], tokenize=False,
                                             add_generation_prompt=True)
    return instruction


class HFTokenizer:
    """The tokenizer the hf backend would load for ``path`` (a GGUF's converted directory,
    see ``converted_dir``, or an HF directory), without the model: counts a prompt's tokens
    before the model loads; encodes and renders chat prompts as ``HFBackend`` does."""

    def __init__(self, path: Path, dtype: str = "float32", model_dir: Path | None = None):
        from transformers import AutoTokenizer
        source = converted_dir(Path(path), dtype, model_dir) if Path(path).is_file() else Path(path)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(source), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ModelFileError(f"{path}: transformers could not load its tokenizer: {exc}") from None

    def encode(self, text: str) -> list[int]:
        return encode(self.tokenizer, text)

    def chat_prompt(self, instruction: str) -> str:
        return chat_prompt(self.tokenizer, instruction)

    def close(self) -> None:
        pass


class HFBackend(Backend):
    name = "hf"

    def __init__(self, path: Path, device: str = "cpu", dtype: str = "float32",
                 threads: int | None = None, model_dir: Path | None = None):
        super().__init__()
        import torch
        import transformers
        from transformers import DynamicCache

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        if dtype not in DTYPES:
            raise ConfigError(f"hf dtype must be one of {DTYPES} (got {dtype!r})")
        self._check_device(torch, device)
        if threads:
            torch.set_num_threads(int(threads))
        self.path, self.device, self.dtype = Path(path), device, dtype
        self.source = converted_dir(self.path, dtype, model_dir) if self.path.is_file() else self.path
        self.tokenizer, model = _load(self.source, getattr(torch, dtype), self.path)
        self.model = model.to(device).eval()
        self._torch = torch
        self._cache_cls = DynamicCache
        self.cache = DynamicCache(config=self.model.config)
        self._vocab = int(self.model.get_output_embeddings().weight.shape[0])
        self._positions = context_length(self.source)
        self._eos = end_of_generation_ids(self.model.generation_config.eos_token_id, self.tokenizer)

    @staticmethod
    def _check_device(torch, device: str) -> None:
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError(f"device {device!r} requested but torch sees no CUDA device")
        if device == "mps" and not torch.backends.mps.is_available():
            raise ConfigError("device 'mps' requested but torch sees no MPS device")
        if device not in ("cpu", "mps") and not device.startswith("cuda"):
            raise ConfigError(f"hf device must be cpu, cuda[:n] or mps (got {device!r})")

    @property
    def max_context(self) -> int | None:
        """The model's position count (config ``max_position_embeddings``): past it a
        RoPE model runs on silently, with outputs that mean nothing."""
        return self._positions

    def encode(self, text: str) -> list[int]:
        return encode(self.tokenizer, text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def chat_prompt(self, instruction: str) -> str:
        return chat_prompt(self.tokenizer, instruction)

    def _forward(self, ids: list[int], last_only: bool) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            inp = torch.tensor([ids], dtype=torch.long, device=self.device)
            out = self.model(input_ids=inp, past_key_values=self.cache, use_cache=True,
                             logits_to_keep=1 if last_only else 0)
            logits = out.logits[0]
            if logits.dtype != torch.float32:
                logits = logits.float()
            return logits.cpu().numpy()

    def _truncate(self, n: int) -> None:
        if n == 0:
            self.cache = self._cache_cls(config=self.model.config)
        else:
            self.cache.crop(n - self.length)  # transformers 5: a negative count of tokens to drop

    def synchronize(self) -> None:
        if self.device.startswith("cuda"):
            self._torch.cuda.synchronize()
        elif self.device == "mps":
            self._torch.mps.synchronize()

    def info(self) -> BackendInfo:
        torch = self._torch
        return BackendInfo(
            backend="hf", model=self.path.name, vocab_size=self._vocab, device=self.device,
            dtype=self.dtype, files=file_record(self.path)["files"],
            settings={"torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                      "loaded_from": str(self.source)},
        )

    def close(self) -> None:
        del self.model
        self.cache = None
