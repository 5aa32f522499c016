"""``specproof decode``: one prompt timed target-only and speculatively on this machine,
and the flags, prompt reading and preflight checks ``advise`` shares."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ConfigError, ModelFileError
from ..load import heartbeat
from .common import DEFAULT_MODEL, DEFAULT_PROMPT, MODEL_FIELDS, _command, flag, num


def _specs(a) -> tuple[dict, dict | None]:
    def spec(backend: str, model: str) -> dict:
        s = {"backend": backend, "model": model, "threads": a.threads}
        if backend == "hf":
            s.update(device=a.device, dtype=a.dtype)
        elif backend == "llama":
            s.update(n_ctx=a.n_ctx, n_batch=a.n_batch, n_ubatch=a.n_ubatch, n_gpu_layers=a.n_gpu_layers,
                     flash_attn=a.flash_attn)
        elif backend == "mock":
            s = {"backend": "mock", "vocab_size": 256, "seed": 0}
        return s
    target = spec(a.target_backend, a.target_model)
    if a.draft_backend == "none":
        return target, None
    if a.draft_backend == "ngram":
        return target, {"kind": "ngram"}
    draft = spec(a.draft_backend, a.draft_model)
    if a.draft_backend == "mock":
        draft["noise"] = 1.0
    return target, draft


def _check_flags(a, run: dict, names: dict | None = None) -> None:
    """Every setting flag within ``limits``, the model flags included; ``names`` maps a
    limits field to its flag where they differ (advise's --k-max)."""
    from ..limits import check_all
    names = names or {}
    check_all({**run, **{f: getattr(a, f) for f in MODEL_FIELDS}}, lambda f: names.get(f, flag(f)))


def _read_text(path: Path, where: str) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: {path}: not UTF-8 text (byte {exc.start})") from None
    except FileNotFoundError:
        raise ConfigError(f"{where}: {path}: file does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{where}: {path}: cannot read it ({exc.strerror or exc})") from None


def _stdin_text() -> str:
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--prompt: - (stdin): not UTF-8 text (byte {exc.start})") from None


def prompt_sources(texts: list[str] | None, files: list[str] | None) -> list[tuple[str, str]]:
    """(flag, text) of each --prompt (``-``: stdin, once) and --prompt-file, in that order;
    an empty prompt is refused."""
    texts, files = texts or [], files or []
    if texts.count("-") > 1:
        raise ConfigError("--prompt: - (stdin) can be given once")
    out = [("--prompt", _stdin_text() if t == "-" else t) for t in texts]
    out += [("--prompt-file", _read_text(Path(f), "--prompt-file")) for f in files]
    return _non_empty(out)


def _non_empty(sources: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``sources`` ((flag, text) pairs), refusing an empty or blank text by its flag."""
    for where, text in sources:
        if not text.strip():
            raise ConfigError(f"{where}: empty prompt: give some text")
    return sources


def _preflight(target_spec: dict, draft_spec: dict | None) -> dict:
    """Both models checked before either loads (``loader.preflight``): role -> (spec,
    positions the backend will hold); a bad model file names its flag."""
    from ..models.loader import preflight
    out = {}
    for role, spec in (("target", target_spec), ("draft", draft_spec)):
        if spec is None:
            continue
        try:
            _, positions = preflight(spec, where=flag)
        except ModelFileError as exc:
            raise ModelFileError(f"--{role}-model: {exc}") from None
        out[role] = (spec, positions)
    return out


def _check_fits(where: str, prompt_tokens: int, new_tokens: int, models: dict,
                new_flag: str = "--max-new-tokens") -> None:
    """The prompt (from flag ``where``) and the new tokens (``new_flag``) fit every model's
    context (``models``: ``_preflight``'s); the error names the prompt's flag where the
    prompt alone is too long."""
    from ..limits import check_context
    for role, (spec, positions) in models.items():
        if positions is None:
            continue
        llama = spec["backend"] == "llama"
        what = f"the llama {role}'s n_ctx" if llama else f"the {role} model's positions ({spec['model']})"
        check_context(where if prompt_tokens >= positions else new_flag, what, prompt_tokens,
                      new_tokens, positions, "raise --n-ctx" if llama else "shorten the prompt")


def _provenance(target, drafter) -> dict:
    """What ``decode --json`` (and ``advise --json``) ran on: both models' files (paths, sha256) and settings, and
    the machine and software (``evidence.provenance.capture``, git of specproof's source)."""
    from dataclasses import asdict
    from ..evidence.provenance import capture
    draft = getattr(drafter, "backend", None)
    return {"target": asdict(target.info()), "draft": asdict(draft.info()) if draft else None,
            "machine": capture(Path(__file__).resolve().parents[1])}


def _logger(quiet: bool):
    return (lambda *m: None) if quiet else (lambda *m: print(*m, file=sys.stderr, flush=True))


def cmd_decode(a) -> int:
    from ..decode.ab import ab_compare
    from ..decode.decoding import DecodeSettings
    from ..decode.policies import make_policy
    from ..models.loader import load_backend, load_drafter

    sources = prompt_sources(None if a.prompt is None else [a.prompt],
                             None if a.prompt_file is None else [a.prompt_file])
    where, prompt = sources[0] if sources else ("--prompt", DEFAULT_PROMPT)
    _check_flags(a, {"k": a.k, "max_new_tokens": a.max_new_tokens, "temperature": a.temperature,
                     "seed": a.seed, "repeats": a.repeats})
    settings = DecodeSettings(a.max_new_tokens, a.temperature, a.seed, a.verify_mode)
    target_spec, draft_spec = _specs(a)
    models = _preflight(target_spec, draft_spec)
    log = _logger(a.json)
    log(f"loading target {target_spec['backend']}:{target_spec.get('model', 'mock')} ...")
    target = load_backend(target_spec)
    prompt_ids = target.encode(target.chat_prompt(prompt) if a.chat else prompt)
    if not prompt_ids:
        raise ConfigError(f"{where}: empty prompt: it tokenizes to no ids")
    _check_fits(where, len(prompt_ids), a.max_new_tokens, models)
    drafter = load_drafter(draft_spec, target, a.temperature, a.seed)
    with heartbeat("decode", stream=sys.stderr):
        out = ab_compare(target, drafter, prompt_ids, settings, lambda: make_policy(a.policy, a.k),
                         a.repeats, {"k": a.k, "policy": a.policy}, log)
    if a.json:
        from ..records import strict_json
        print(strict_json({**out, "provenance": _provenance(target, drafter)}))
        return 0
    print_decode(out)
    return 0


def print_decode(out: dict) -> None:
    print(out["text"])
    print("-" * 60)
    print(f"target-only: {num(out['target_tokens_per_s'], '.1f')} tok/s  ({out['new_tokens']} new tokens)")
    if out["draft"] is None:
        return
    alpha = ", ".join(num(x) for x in out["acceptance_by_position"])
    print(f"speculative: {num(out['speculative_tokens_per_s'], '.1f')} tok/s  speedup {num(out['speedup'])}x")
    pairs = out.get("pair_speedups") or []
    if len(pairs) > 1:  # one prompt's run-to-run noise: no interval over prompts
        print(f"speedup of each A/B pair: {min(pairs):.2f}x to {max(pairs):.2f}x over {len(pairs)} pairs "
              f"(one prompt: the spread is run-to-run noise, not an interval over prompts)")
    print(f"mean accepted per round {num(out['mean_accepted'])}; acceptance by position [{alpha}]")
    if out["ids_equal_target_only"] is not None:
        print(f"ids equal target-only: {out['ids_equal_target_only']}")


# --- the flags decode and advise share ------------------------------------------------------

def _add_model_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("models (default: hf fp32 SmolLM2 target, llama.cpp Q4_1 SmolLM2 draft)")
    g.add_argument("--target-backend", default="hf", choices=["hf", "llama", "mock"], help="target runtime")
    g.add_argument("--target-model", default=DEFAULT_MODEL, metavar="MODEL",
                   help="embedded:<name> or a local GGUF file / HF directory")
    g.add_argument("--draft-backend", default="llama", choices=["hf", "llama", "mock", "ngram", "none"],
                   help="draft runtime; ngram: prompt lookup, none: target-only")
    g.add_argument("--draft-model", default=DEFAULT_MODEL, metavar="MODEL", help="as --target-model")
    g.add_argument("--device", default="cpu", help="hf device: cpu, cuda[:n], mps")
    g.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"], help="hf dtype")
    g.add_argument("--n-ctx", type=int, default=2048, metavar="N", help="llama context positions (at most the model's)")
    g.add_argument("--n-batch", type=int, default=512, metavar="N", help="llama logical batch size")
    g.add_argument("--n-ubatch", type=int, default=512, metavar="N", help="llama micro-batch size (at most --n-batch)")
    g.add_argument("--threads", type=int, default=None, metavar="N", help="CPU threads per model (default: all cores)")
    g.add_argument("--n-gpu-layers", type=int, default=None, metavar="N",
                   help="llama layers on the accelerator (-1 all, 0 none; default: all when the build has one)")
    g.add_argument("--flash-attn", action="store_true",
                   help="llama.cpp flash attention (off by default, as in llama-cpp-python; its own tools use auto)")


def _add_prompt_flags(p: argparse.ArgumentParser, repeatable: bool, default: str) -> None:
    """--prompt (``-``: stdin) and --prompt-file: one prompt from either (decode), or any
    number from both (advise, ``repeatable``)."""
    if repeatable:
        group, action, one, more = p, "append", "a prompt", " (repeatable)"
    else:
        group, action, one, more = p.add_mutually_exclusive_group(), "store", "the prompt", ""
    group.add_argument("--prompt", action=action, metavar="TEXT",
                       help=f"{one}{more}; - reads it from stdin (default: {default})")
    group.add_argument("--prompt-file", action=action, metavar="PATH",
                       help=f"{one} from a UTF-8 text file{more or ' (not with --prompt)'}")


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--chat", action="store_true", help="render the prompt with the target's chat template")
    p.add_argument("--temperature", type=float, default=0.0, metavar="T", help="sampling temperature; 0 = greedy")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the target's and the draft's sampling")
    p.add_argument("--json", action="store_true", help="print one JSON object (missing values: null)")


def _decode_parser(sub) -> argparse.ArgumentParser:
    from ..decode.policies import POLICIES
    d = _command(sub, "decode", cmd_decode, "time one prompt target-only and speculatively; report the speedup",
                 "Decode one prompt target-only and speculatively (interleaved A/B\n"
                 "runs); report tokens/s, the speedup and the acceptance by position.")
    _add_model_flags(d)
    _add_prompt_flags(d, repeatable=False, default="a Python function header to complete")
    d.add_argument("--k", type=int, default=6, metavar="K",
                   help="speculation length K (max K for adaptive/guard, start K for hf_heuristic)")
    d.add_argument("--policy", default="fixed", choices=POLICIES, help="how K is chosen each round")
    d.add_argument("--verify-mode", default="batched", choices=["batched", "serialized"],
                   help="verify the draft in one target call, or one position per call")
    d.add_argument("--max-new-tokens", type=int, default=128, metavar="N", help="tokens to generate per run")
    d.add_argument("--repeats", type=int, default=1, metavar="N", help="A/B repetitions (median tokens/s)")
    _add_run_flags(d)
    return d
