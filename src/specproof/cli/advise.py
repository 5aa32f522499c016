"""``specproof advise``: measure a pair's costs on a few prompts and predict the speedup at
each K, optionally checked on prompts the probe never saw."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ConfigError
from ..load import heartbeat
from .common import DEFAULT_PROMPT, _command, num
from .decode import (_add_model_flags, _add_prompt_flags, _add_run_flags, _check_fits, _check_flags, _logger,
                     _non_empty, _preflight, _provenance, _read_text, _specs, prompt_sources)


# advise decodes up to this many tokens per prompt (probe, confirmation and --check)
ADVISE_TOKENS = 64


def _advise_prompts(a, sources: list[tuple[str, str]], target, models) -> list[list[int]]:
    """The token ids of advise's prompts (``prompt_sources``; default: one code prompt,
    one chat-rendered instruction), each checked to fit the models' contexts."""
    chat = [a.chat] * len(sources)
    if not sources:
        sources = [("--prompt", DEFAULT_PROMPT), ("--prompt", "Explain what a hash table is to a new programmer.")]
        chat = [a.chat, True]
    prompts = []
    for (where, text), rendered in zip(sources, chat):
        ids = target.encode(target.chat_prompt(text) if rendered else text)
        if not ids:
            raise ConfigError(f"{where}: empty prompt: it tokenizes to no ids")
        _check_fits(where, len(ids), max(ADVISE_TOKENS, a.k_max + 1), models, new_flag=where)
        prompts.append(ids)
    return prompts


def _check_sources(a) -> list[tuple[str, str]]:
    """(flag, text) of each --check-prompt-file, after checking --probe-seconds,
    --confirm-seconds and that check prompts come with --check."""
    if a.probe_seconds is not None and not a.probe_seconds > 0:
        raise ConfigError(f"--probe-seconds: {a.probe_seconds}: must be > 0")
    if not a.confirm_seconds >= 0:
        raise ConfigError(f"--confirm-seconds: {a.confirm_seconds}: must be >= 0")
    if a.check_prompt_file and not a.check:
        raise ConfigError("--check-prompt-file: only with --check")
    return _non_empty([("--check-prompt-file", _read_text(Path(f), "--check-prompt-file"))
                       for f in a.check_prompt_file or []])


def cmd_advise(a) -> int:
    from ..evidence.advise import advise, realized_speedup
    from ..models.loader import load_backend, load_drafter
    sources = prompt_sources(a.prompt, a.prompt_file)
    _check_flags(a, {"k": a.k_max, "temperature": a.temperature, "seed": a.seed}, {"k": "--k-max"})
    target_spec, draft_spec = _specs(a)
    if draft_spec is None:
        raise ConfigError("--draft-backend: advise needs a draft (llama, hf, mock or ngram)")
    unseen = _check_sources(a)
    models = _preflight(target_spec, draft_spec)
    log = _logger(a.json)
    log("loading models ...")
    target = load_backend(target_spec)
    prompts = _advise_prompts(a, sources, target, models)
    checked = _advise_prompts(a, unseen, target, models) if unseen else prompts
    drafter = load_drafter(draft_spec, target, a.temperature, a.seed)
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
        from ..records import strict_json
        print(strict_json({**res, "provenance": _provenance(target, drafter)}))
        return 0
    print_advice(res, target.label, a.check)
    return 0


def print_advice(res: dict, target: str, check: bool) -> None:
    from ..evidence.advise import BOOTSTRAP_LEVEL
    print(f"target {target}: {num(res['target_ms_per_token'], '.1f')} ms/token in the loop; draft "
          f"{num(res['draft_round_overhead_ms'], '.1f')} ms per round + {num(res['draft_step_ms'], '.1f')} "
          f"ms per token (ratio {num(res['draft_to_target_ratio'])}); residual {num(res['residual_ms'])} ms per round")
    print("verify cost v(B) alone, ms: " + ", ".join(f"{b}:{num(v, '.1f')}" for b, v in res["verify_ms"].items())
          + f"; in the loop x{num(res['verify_loop_ratio'])}")
    print("acceptance by position: " + ", ".join(num(x) for x in res["alpha"]))
    print(" K  E[C|K]  round ms  predicted speedup")
    for r in res["table"]:
        mark = "  <- best" if r["k"] == res["k"] else ""
        print(f"{r['k']:2d}  {num(r['expected_committed'], '6.2f')}  {num(r['round_ms'], '8.1f')}  "
              f"{num(r['predicted_speedup'], '6.2f')}x{mark}")
    verdict = "enable speculation" if res["enable"] else "do NOT enable speculation (predicted slower)"
    level = round(100 * BOOTSTRAP_LEVEL)
    source = (f"measured on {res['confirm_prompts']} prompts at K={res['k']}; the cost model said "
              f"{num(res['loop_predicted_speedup'])}x" if res["model"] == "confirmed" else
              f"the cost model over {res['probe_prompts']} probe prompts")
    print(f"advice: {verdict}, K={res['k']}, predicted {num(res['predicted_speedup'])}x "
          f"[{num(res['predicted_low'])}, {num(res['predicted_high'])}] ({level}% prediction interval; {source}; "
          f"micro-benchmark model {num(res['micro_predicted_speedup'])}x) ({res['seconds']:.0f} s to measure)")
    if res["enable"] and res["predicted_low"] <= 1 or not res["enable"] and res["predicted_high"] >= 1:
        print("note: the interval includes 1: the probe cannot tell whether speculation pays here")
    if check:
        real, low, high = res["realized_speedup"], res["predicted_low"], res["predicted_high"]
        where = "unseen prompts" if res["check_unseen"] else "the probe's own prompts (not unseen)"
        print(f"realized at K={res['k']} on {res['check_prompts']} {where}: {num(real)}x; predicted "
              f"{num(res['predicted_speedup'])}x, off by {num(100 * (res['predicted_speedup'] / real - 1), '+.0f')}%; "
              f"the interval {'covered' if low <= real <= high else 'did NOT cover'} it")


def _advise_parser(sub) -> argparse.ArgumentParser:
    ad = _command(sub, "advise", cmd_advise, "measure the costs and acceptance; predict the speedup at each K",
                  "Measure the verify cost, the draft step cost and the acceptance by\n"
                  "position; predict the speedup at each K and advise whether to\n"
                  "enable speculation.")
    _add_model_flags(ad)
    _add_prompt_flags(ad, repeatable=True, default="one code prompt, one chat instruction")
    ad.add_argument("--k-max", type=int, default=8, metavar="K", help="the largest K measured and predicted")
    ad.add_argument("--probe-seconds", type=float, metavar="S",
                    help="stop probing new prompts after S seconds, two prompts at least (default: probe all)")
    ad.add_argument("--confirm-seconds", type=float, default=60.0, metavar="S",
                    help="then run target-only and the chosen K back to back on the prompts for S seconds, "
                         "two prompts at least, and predict their measured speedup (0: predict from the "
                         "probe's cost model; default: 60)")
    ad.add_argument("--check", action="store_true", help="also measure the realized speedup at the advised K")
    ad.add_argument("--check-prompt-file", action="append", metavar="PATH",
                    help="a prompt the check runs on and the probe never sees (repeatable; "
                         "default: the probe's prompts)")
    _add_run_flags(ad)
    return ad
