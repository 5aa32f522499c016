"""Build backends and drafters from plain dicts (study configs and CLI flags share it).

A model spec: {backend: hf|llama|mock, model: 'embedded:<name>' | local path, ...}
hf: device, dtype, threads; llama: n_ctx, n_batch, n_ubatch, threads, n_gpu_layers, flash_attn
(default: every layer on the accelerator when the llama.cpp build has one);
mock: vocab_size, seed, noise, batch_variance, latency_ms, per_token_ms.
A draft spec may instead be {kind: ngram, max_ngram, min_ngram}.
Where derived model files go (the model directory) is an argument, ``model_dir``, not part
of the spec: a study's comes from ``Study.model_dir`` (the stage's ``--model-dir``).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

from ..decode.backend import Backend
from ..decode.drafters import Drafter, ModelDrafter, NGramDrafter
from ..errors import ConfigError, ModelFileError
from ..limits import check_all, check_context
from .files import context_length, resolve

BACKENDS = ("hf", "llama", "mock")
_PROBE_TEXT = "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)  # café"


def preflight(spec: dict, model_dir: Path | None = None,
              where: Callable[[str], str] | None = None) -> tuple[Path | None, int | None]:
    """Check a model spec before anything loads: its settings within ``limits``, its model
    file (resolved; a GGUF's header read whole, so a truncated file is refused here), a
    llama n_ctx within the model's context length. Returns (model path, positions the
    backend will hold); (None, None) for a mock or an n-gram draft. ``where(field)`` names a
    field in errors (default: the model and the field)."""
    kind = spec.get("backend")
    if kind == "mock" or ngram_drafter(spec) is not None:
        return None, None
    if kind not in BACKENDS:
        raise ConfigError(f"backend must be one of {BACKENDS} (got {kind!r})")
    if not spec.get("model"):
        raise ConfigError(f"{kind} backend needs a model (embedded:<name> or a local path)")
    where = where or (lambda field: f"model {spec['model']}: field {field}")
    check_all(spec, where)
    if kind == "hf" and not re.fullmatch(r"cpu|mps|cuda(:[0-9]+)?", str(spec.get("device", "cpu"))):
        raise ConfigError(f"{where('device')}: must be cpu, cuda[:n] or mps (got {spec['device']!r})")
    path = resolve(str(spec["model"]), model_dir=model_dir)
    trained = context_length(path)
    if kind != "llama":
        return path, trained
    n_ctx = spec.get("n_ctx", 2048)
    if trained is not None and n_ctx > trained:
        raise ConfigError(f"{where('n_ctx')}: {n_ctx:,} is more than the {trained:,} positions "
                          f"{path.name} was trained for")
    return path, n_ctx


def backend_spec(backend: str, model: str, settings: dict) -> dict:
    """The spec of a model named by its backend and file (``specproof decode``'s flags):
    ``threads`` and the settings that backend reads from ``settings`` (hf: device, dtype;
    llama: n_ctx, n_batch, n_ubatch, n_gpu_layers, flash_attn); a mock reads none of
    them and has a fixed vocabulary and seed."""
    if backend == "mock":
        return {"backend": "mock", "vocab_size": 256, "seed": 0}
    reads = {"hf": ("device", "dtype"),
             "llama": ("n_ctx", "n_batch", "n_ubatch", "n_gpu_layers", "flash_attn")}.get(backend, ())
    return {"backend": backend, "model": model, "threads": settings.get("threads"),
            **{f: settings[f] for f in reads}}


def draft_spec(backend: str, model: str, settings: dict) -> dict | None:
    """The draft's spec from its backend: None for ``none`` (target-only), an n-gram
    lookup for ``ngram``, else ``backend_spec`` (a mock draft is noisier than its target)."""
    if backend == "none":
        return None
    if backend == "ngram":
        return {"kind": "ngram"}
    spec = backend_spec(backend, model, settings)
    return {**spec, "noise": 1.0} if backend == "mock" else spec


def preflight_roles(specs: dict[str, dict | None], where: Callable[[str], str],
                    model_where: Callable[[str], str]) -> dict[str, tuple[dict, int | None]]:
    """Every role's spec (``target``, ``draft``; None: no such model) checked by
    ``preflight`` before any loads: role -> (spec, positions the backend will hold). A
    setting's error names it by ``where(field)``; a bad model file by ``model_where(role)``."""
    out = {}
    for role, spec in specs.items():
        if spec is None:
            continue
        try:
            _, positions = preflight(spec, where=where)
        except ModelFileError as exc:
            raise ModelFileError(f"{model_where(role)}: {exc}") from None
        out[role] = (spec, positions)
    return out


def check_fits(where: str, prompt_tokens: int, new_tokens: int, models: dict, new_where: str) -> None:
    """The prompt (named ``where``) and ``new_tokens`` (named ``new_where``) fit every
    model's positions (``models``: ``preflight_roles``'s); the error names the prompt where
    the prompt alone is too long, and says what to change."""
    for role, (spec, positions) in models.items():
        if positions is None:
            continue
        llama = spec["backend"] == "llama"
        what = f"the llama {role}'s n_ctx" if llama else f"the {role} model's positions ({spec['model']})"
        check_context(where if prompt_tokens >= positions else new_where, what, prompt_tokens,
                      new_tokens, positions, "raise --n-ctx" if llama else "shorten the prompt")


def encoded_prompt(target: Backend, where: str, text: str, chat: bool, new_tokens: int, models: dict,
                   new_where: str) -> list[int]:
    """The token ids of prompt ``text`` (named ``where`` in errors), rendered with the
    target's chat template if ``chat``; refused if it tokenizes to nothing or does not fit
    with ``new_tokens`` (``check_fits``)."""
    ids = target.encode(target.chat_prompt(text) if chat else text)
    if not ids:
        raise ConfigError(f"{where}: empty prompt: it tokenizes to no ids")
    check_fits(where, len(ids), new_tokens, models, new_where)
    return ids


def load_tokenizer(spec: dict, model_dir: Path | None = None):
    """What counts a prompt's tokens for the model ``spec`` names, without loading its
    weights: llama.cpp's vocabulary alone, the hf backend's tokenizer, or the mock itself
    (it has no weights); checked first (``preflight``). It has ``encode``, ``chat_prompt``
    and ``close``, as the backend does."""
    if spec.get("backend") == "mock":
        return load_backend(spec)
    path, _ = preflight(spec, model_dir)
    if spec.get("backend") == "hf":
        from .hf import HFTokenizer
        return HFTokenizer(path, dtype=spec.get("dtype", "float32"), model_dir=model_dir)
    from .llama import LlamaTokenizer
    return LlamaTokenizer(path)


def load_backend(spec: dict, model_dir: Path | None = None) -> Backend:
    """The backend ``spec`` names, checked first (``preflight``); embedded models derived
    on first use go to ``model_dir`` (default ``~/.cache/specproof/models``); ``threads``
    is passed to the backend."""
    kind = spec.get("backend")
    if kind == "mock":
        from .mock import MockBackend
        keys = ("vocab_size", "seed", "order", "scale", "noise", "noise_seed", "batch_variance",
                "latency_ms", "per_token_ms", "eos_id")
        return MockBackend(**{k: spec[k] for k in keys if k in spec})
    if kind not in BACKENDS:
        raise ConfigError(f"backend must be one of {BACKENDS} (got {kind!r})")
    path, _ = preflight(spec, model_dir)
    if kind == "hf":
        from .hf import HFBackend
        return HFBackend(path, device=spec.get("device", "cpu"), dtype=spec.get("dtype", "float32"),
                         threads=spec.get("threads"), model_dir=model_dir)
    from .llama import LlamaCppBackend
    return LlamaCppBackend(path, n_ctx=spec.get("n_ctx", 2048), n_batch=spec.get("n_batch", 512),
                           n_ubatch=spec.get("n_ubatch", 512), n_threads=spec.get("threads"),
                           n_gpu_layers=spec.get("n_gpu_layers"), flash_attn=spec.get("flash_attn", False))


def check_same_vocabulary(target: Backend, draft: Backend) -> None:
    """Refuse a draft whose vocabulary differs: sizes must match and both tokenizers
    must map a probe text to the same ids."""
    t_name, d_name = target.label, draft.label
    if target.vocab_size != draft.vocab_size:
        raise ConfigError(f"draft {d_name} has vocabulary {draft.vocab_size}, target {t_name} has "
                          f"{target.vocab_size}: speculative decoding needs one shared vocabulary")
    if target.name != "mock" and draft.name != "mock" and \
            target.encode(_PROBE_TEXT) != draft.encode(_PROBE_TEXT):
        raise ConfigError(f"draft {d_name} tokenizes differently from target {t_name}: "
                          "speculative decoding needs one shared vocabulary")


def ngram_drafter(spec: dict) -> NGramDrafter | None:
    """The n-gram drafter a spec asks for, or None for a model draft."""
    if spec.get("kind") == "ngram" or spec.get("backend") == "ngram":
        return NGramDrafter(max_ngram=spec.get("max_ngram", 3), min_ngram=spec.get("min_ngram", 1))
    return None


def load_drafter(spec: dict | None, target: Backend, temperature: float, seed: int,
                 model_dir: Path | None = None) -> Drafter | None:
    if spec is None:
        return None
    if (ngram := ngram_drafter(spec)) is not None:
        return ngram
    backend = load_backend(spec, model_dir)
    check_same_vocabulary(target, backend)
    return ModelDrafter(backend, temperature=temperature, seed=seed)


class ModelPool:
    """Loads each named target / draft of a study once and shares it between stages; derived
    model files go to the study's model directory (``Study.model_dir``)."""

    def __init__(self, study):
        self.study = study
        self.model_dir = getattr(study, "model_dir", None)
        self._targets: dict[str, Backend] = {}
        self._drafts: dict[str, Backend] = {}
        self._checked: set[tuple[int, str]] = set()

    def target(self, name: str) -> Backend:
        if name not in self._targets:
            self._targets[name] = load_backend(self.study.target_spec(name), self.model_dir)
        return self._targets[name]

    def drafter(self, name: str, target: Backend, temperature: float, seed: int) -> Drafter:
        if (ngram := ngram_drafter(self.study.draft_spec(name))) is not None:
            return ngram
        backend = self.draft_backend(name)
        if (id(target), name) not in self._checked:
            check_same_vocabulary(target, backend)
            self._checked.add((id(target), name))
        return ModelDrafter(backend, temperature=temperature, seed=seed)

    def draft_backend(self, name: str) -> Backend | None:
        spec = self.study.draft_spec(name)
        if ngram_drafter(spec) is not None:
            return None
        if name not in self._drafts:
            self._drafts[name] = load_backend(spec, self.model_dir)
        return self._drafts[name]

    def release_target(self, name: str) -> None:
        backend = self._targets.pop(name, None)
        if backend is not None:
            backend.close()

    def each_target(self, names) -> Iterator[tuple[str, Backend]]:
        """(name, target) for each name: loaded, handed to the loop body, released after
        it (also when the loop ends early), so one target is in memory at a time."""
        for name in names:
            target = self.target(name)
            try:
                yield name, target
            finally:
                self.release_target(name)

    def each_pair(self, pairs: list[dict]) -> Iterator[tuple[int, dict, Backend]]:
        """(index, pair, target) for each pair; consecutive pairs on one target share it,
        released when the next pair's target differs (or after the last pair)."""
        for i, pair in enumerate(pairs):
            target = self.target(pair["target"])
            last_on_target = i == len(pairs) - 1 or pairs[i + 1]["target"] != pair["target"]
            try:
                yield i, pair, target
            except GeneratorExit:  # the loop ended early (break or an error in its body)
                self.release_target(pair["target"])
                raise
            if last_on_target:
                self.release_target(pair["target"])
