"""``specproof decode``: one prompt timed target-only and speculatively on this machine,
and the flag checks ``advise`` shares."""
from __future__ import annotations

import sys

from ..decode.ab import ab_compare, decode_lines
from ..decode.decoding import DecodeSettings
from ..decode.policies import make_policy
from ..evidence.provenance import run_provenance
from ..limits import check_all
from ..load import heartbeat
from ..models import loader
from ..models.loader import backend_spec, draft_spec, encoded_prompt, preflight_roles
from ..records import strict_json
from ..study.prompts import prompt_sources
from .common import DEFAULT_PROMPT, MODEL_FIELDS, flag


def model_specs(a) -> tuple[dict, dict | None]:
    """The target's and the draft's specs from the model flags (draft None: target-only)."""
    settings = {f: getattr(a, f) for f in (*MODEL_FIELDS, "device", "dtype", "flash_attn")}
    return (backend_spec(a.target_backend, a.target_model, settings),
            draft_spec(a.draft_backend, a.draft_model, settings))


def check_flags(a, run: dict, names: dict | None = None) -> None:
    """Every setting flag within ``limits``, the model flags included; ``names`` maps a
    limits field to its flag where they differ (advise's --k-max)."""
    names = names or {}
    check_all({**run, **{f: getattr(a, f) for f in MODEL_FIELDS}}, lambda f: names.get(f, flag(f)))


def preflight_flags(target: dict, draft: dict | None) -> dict:
    """Both models checked before either loads, errors named by their flags."""
    return preflight_roles({"target": target, "draft": draft}, flag, lambda role: f"--{role}-model")


def logger(quiet: bool):
    return (lambda *m: None) if quiet else (lambda *m: print(*m, file=sys.stderr, flush=True))


def cmd_decode(a) -> int:
    sources = prompt_sources(None if a.prompt is None else [a.prompt],
                             None if a.prompt_file is None else [a.prompt_file])
    where, prompt = sources[0] if sources else ("--prompt", DEFAULT_PROMPT)
    check_flags(a, {"k": a.k, "max_new_tokens": a.max_new_tokens, "temperature": a.temperature,
                    "seed": a.seed, "repeats": a.repeats})
    settings = DecodeSettings(a.max_new_tokens, a.temperature, a.seed, a.verify_mode)
    target_spec, drafter_spec = model_specs(a)
    models = preflight_flags(target_spec, drafter_spec)
    log = logger(a.json)
    log(f"loading target {target_spec['backend']}:{target_spec.get('model', 'mock')} ...")
    target = loader.load_backend(target_spec)
    prompt_ids = encoded_prompt(target, where, prompt, a.chat, a.max_new_tokens, models, "--max-new-tokens")
    drafter = loader.load_drafter(drafter_spec, target, a.temperature, a.seed)
    with heartbeat("decode", stream=sys.stderr):
        out = ab_compare(target, drafter, prompt_ids, settings, lambda: make_policy(a.policy, a.k),
                         a.repeats, {"k": a.k, "policy": a.policy}, log)
    if a.json:
        print(strict_json({**out, "provenance": run_provenance(target, drafter)}))
        return 0
    print("\n".join(decode_lines(out)))
    return 0
