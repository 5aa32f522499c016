"""``specproof advise``: measure a pair's costs on a few prompts and predict the speedup at
each K, optionally checked on prompts the probe never saw."""
from __future__ import annotations

import sys
from pathlib import Path

from ..errors import ConfigError
from ..evidence.advise import ADVISE_TOKENS, advice_lines, advise, realized_speedup
from ..evidence.provenance import run_provenance
from ..load import heartbeat
from ..models import loader
from ..models.loader import encoded_prompt
from ..records import strict_json
from ..study.prompts import non_empty, prompt_sources, read_text
from .common import DEFAULT_PROMPT
from .decode import check_flags, logger, model_specs, preflight_flags

# without --prompt or --prompt-file: one code prompt as given, one instruction chat-rendered
DEFAULT_PROMPTS = ((("--prompt", DEFAULT_PROMPT), None),
                   (("--prompt", "Explain what a hash table is to a new programmer."), True))


def check_sources(a) -> list[tuple[str, str]]:
    """(flag, text) of each --check-prompt-file, after checking --probe-seconds,
    --confirm-seconds and that check prompts come with --check."""
    if a.probe_seconds is not None and not a.probe_seconds > 0:
        raise ConfigError(f"--probe-seconds: {a.probe_seconds}: must be > 0")
    if not a.confirm_seconds >= 0:
        raise ConfigError(f"--confirm-seconds: {a.confirm_seconds}: must be >= 0")
    if a.check_prompt_file and not a.check:
        raise ConfigError("--check-prompt-file: only with --check")
    return non_empty([("--check-prompt-file", read_text(Path(f), "--check-prompt-file"))
                      for f in a.check_prompt_file or []])


def prompt_ids(a, sources: list[tuple[str, str]], target, models) -> list[list[int]]:
    """The token ids of advise's prompts (default: ``DEFAULT_PROMPTS``), each rendered
    with the chat template if --chat and checked to fit the models' contexts."""
    given = [(s, None) for s in sources] or DEFAULT_PROMPTS
    new = max(ADVISE_TOKENS, a.k_max + 1)
    return [encoded_prompt(target, where, text, a.chat if chat is None else chat, new, models, where)
            for (where, text), chat in given]


def cmd_advise(a) -> int:
    sources = prompt_sources(a.prompt, a.prompt_file)
    check_flags(a, {"k": a.k_max, "temperature": a.temperature, "seed": a.seed}, {"k": "--k-max"})
    target_spec, drafter_spec = model_specs(a)
    if drafter_spec is None:
        raise ConfigError("--draft-backend: advise needs a draft (llama, hf, mock or ngram)")
    unseen = check_sources(a)
    models = preflight_flags(target_spec, drafter_spec)
    log = logger(a.json)
    log("loading models ...")
    target = loader.load_backend(target_spec)
    prompts = prompt_ids(a, sources, target, models)
    checked = prompt_ids(a, unseen, target, models) if unseen else prompts
    drafter = loader.load_drafter(drafter_spec, target, a.temperature, a.seed)
    log("measuring verify cost v(B), draft step cost, and acceptance by position ...")
    with heartbeat("advise", stream=sys.stderr):
        res = advise(target, drafter, prompts, k_max=a.k_max, temperature=a.temperature, seed=a.seed,
                     budget_s=a.probe_seconds, future_prompts=len(checked) if a.check else None,
                     probe_tokens=ADVISE_TOKENS, confirm_s=a.confirm_seconds)
        if a.check:
            log(f"checking: realized speedup at K={res['k']} on {len(checked)} "
                f"{'unseen' if unseen else 'probe'} prompts ...")
            res["realized_speedup"] = realized_speedup(target, drafter, checked, res["k"], a.temperature,
                                                       seed=a.seed, max_new_tokens=ADVISE_TOKENS)
            res["check_prompts"], res["check_unseen"] = len(checked), bool(unseen)
    if a.json:
        print(strict_json({**res, "provenance": run_provenance(target, drafter)}))
        return 0
    print("\n".join(advice_lines(res, target.label, a.check)))
    return 0
