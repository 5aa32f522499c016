"""Command line: ``specproof decode``, ``advise``, and the stages and publishing steps of a
study (run by the Snakemake rules).

Errors a user can fix print one line ``specproof: error: <flag or file>: <why>`` and exit
2, before any model loads where the input allows it: every setting is checked against
``limits`` (the study's bounds too), model files and contexts by ``loader.preflight``.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .errors import ConfigError, ModelFileError, SpecproofError
from .load import heartbeat

DESCRIPTION = """Does speculative decoding speed up a model pair on this machine, and by how much?
`specproof decode` times one prompt target-only and speculatively; `specproof advise`
measures the costs and predicts the speedup at each K. The other commands are the
stages and publishing steps of a reproducible study, run by Snakemake (see the README)."""

DEFAULT_MODEL = "embedded:smollm2-q4_1"
DEFAULT_PROMPT = ('def is_palindrome(text: str) -> bool:\n'
                  '    """Return True if text reads the same forwards and backwards,\n'
                  '    ignoring case and non-alphanumeric characters."""\n')
MISSING = "\u2013"  # how text output shows a value that does not exist (JSON: null)
MODEL_FIELDS = ("threads", "n_ctx", "n_batch", "n_ubatch", "n_gpu_layers")


class Parser(argparse.ArgumentParser):
    """Usage errors in the one-line form of every other error (``--k: invalid int value``),
    exit status 2."""

    def error(self, message: str):
        message = re.sub(r"^argument ([^:]+): ", lambda m: m[1].split("/")[-1] + ": ", message)
        self.exit(2, f"specproof: error: {message} (see {self.prog} --help)\n")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows each option's default, unless it is unset (None, off) or the help names it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


def version() -> str:
    import specproof
    return f"specproof {specproof.__version__}"


def num(x, spec: str = ".2f") -> str:
    """``x`` formatted, or ``MISSING`` where it does not exist (None, NaN)."""
    return MISSING if x is None or x != x else format(x, spec)


def flag(field: str) -> str:
    return "--" + field.replace("_", "-")


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
    from .limits import check_all
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
    from .models.loader import preflight
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
    from .limits import check_context
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
    from .evidence.provenance import capture
    draft = getattr(drafter, "backend", None)
    return {"target": asdict(target.info()), "draft": asdict(draft.info()) if draft else None,
            "machine": capture(Path(__file__).resolve().parent)}


def _logger(quiet: bool):
    return (lambda *m: None) if quiet else (lambda *m: print(*m, file=sys.stderr, flush=True))


def cmd_decode(a) -> int:
    from .decode.ab import ab_compare
    from .decode.decoding import DecodeSettings
    from .decode.policies import make_policy
    from .models.loader import load_backend, load_drafter

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
        from .records import strict_json
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
    from .evidence.advise import advise, realized_speedup
    from .models.loader import load_backend, load_drafter
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
        from .records import strict_json
        print(strict_json({**res, "provenance": _provenance(target, drafter)}))
        return 0
    print_advice(res, target.label, a.check)
    return 0


def print_advice(res: dict, target: str, check: bool) -> None:
    from .evidence.advise import BOOTSTRAP_LEVEL
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


def cmd_stage(a) -> int:
    from .analysis.analyze import stage_analyze
    from .evidence.stages import run_stage
    from .limits import check, output_dir
    results = output_dir(a.results, "--results")
    model_dir = a.model_dir and output_dir(a.model_dir, "--model-dir").resolve()
    if a.seed is not None:
        check("seed", a.seed, "--seed")
    if a.name == "analyze":  # reads only the raw records, no study config
        stage_analyze(results)
        return 0
    run_stage(a.name, results, config=a.config and Path(a.config), seed=a.seed, part=a.part,
              gather_jobs=a.gather, model_dir=model_dir, manifests=a.manifests and Path(a.manifests))
    return 0


def cmd_plan(a) -> int:
    import json

    import pandas as pd
    from .evidence.plan import estimate, measured_plan
    from .limits import output_dir
    from .study.config import load_study
    if not 0 <= a.acceptance < 1:
        raise ConfigError(f"--acceptance: must be in [0, 1) (got {a.acceptance:g})")
    study = load_study(Path(a.config))
    study.model_dir = a.model_dir and output_dir(a.model_dir, "--model-dir").resolve()
    plan = measured_plan(study, a.acceptance, progress=lambda m: print(f"plan: timing {m}", file=sys.stderr))
    rows = pd.DataFrame(estimate(plan))
    if a.json:
        print(json.dumps({"study": study.name, "acceptance": a.acceptance, "stages": rows.to_dict(orient="records"),
                          "total_minutes": float(rows["minutes"].sum())}, indent=2))
        return 0
    print(f"{study.name}: estimated minutes per stage on this machine (acceptance {a.acceptance:g} assumed)")
    print(rows.to_markdown(index=False, floatfmt=".1f"))
    print(f"total: {rows['minutes'].sum():.0f} min, plus model assembly on first use, margins and the "
          "analysis (a minute or two)")
    return 0


def cmd_figures(a) -> int:
    from .analysis.analyze import analyze
    from .limits import output_dir
    from .publish.figures import make_all
    out = output_dir(a.out, "--out")
    make_all(analyze(Path(a.records)), Path(a.records), out)
    return 0


def cmd_machines_figure(a) -> int:
    from .limits import output_dir
    from .publish.figures import machines_verify_cost
    from .records import read_parquet
    if len(a.sets) != len(a.records):
        raise SpecproofError("--records: give one record directory per --sets entry")
    out = output_dir(a.out, "--out")  # the figure's directory: verify_cost_machines.{pdf,png}
    machines_verify_cost({s.partition("@")[2] or s: read_parquet(Path(r) / "micro.parquet")
                          for s, r in zip(a.sets, a.records)}, out)
    print(f"{a.out}: written")
    return 0


def cmd_break_even_figure(a) -> int:
    from .limits import output_dir
    from .publish.figures import break_even_figure
    if len(a.sets) != len(a.records):
        raise SpecproofError("--records: give one record directory per --sets entry")
    break_even_figure(dict(zip(a.sets, map(Path, a.records))), output_dir(a.out, "--out"))
    print(f"{a.out}: written")
    return 0


def cmd_numbers(a) -> int:
    from .limits import output_file
    from .publish.paper import build_numbers
    config = {"studies": a.studies, "study": a.head, "paper": {"title": a.title},
              "replicates": [{"set": r, "of": of} for r, of in a.replicate], "break_even": a.break_even}
    out = output_file(a.out, "--out")
    n = build_numbers(config, Path(a.manifests), Path(a.results), out, Path(a.benchmarks), Path(a.cited))
    print(f"{a.out}: {len(n)} numbers")
    return 0


def cmd_paper(a) -> int:
    from .limits import output_file
    from .publish.paper import compile_paper, failed_claims
    if a.list_claims:
        failed = failed_claims(Path(a.source), numbers=Path(a.numbers), figures=Path(a.figures),
                               machine_figures=Path(a.machine_figures), cited=Path(a.cited),
                               map_figures=a.map_figures and Path(a.map_figures))
        for what in failed:
            print(f"{a.source}: claim not supported by {a.numbers}: {what}")
        print(f"{a.source}: {len(failed)} claim(s) not supported", file=sys.stderr)
        return 2 if failed else 0
    compile_paper(Path(a.source), output_file(a.out, "--out"), numbers=Path(a.numbers),
                  figures=Path(a.figures), machine_figures=Path(a.machine_figures), cited=Path(a.cited),
                  map_figures=a.map_figures and Path(a.map_figures))
    print(f"{a.out}: written")
    return 0


def cmd_freeze(a) -> int:
    from .publish.manifests import freeze, relabel
    from .study.config import load_study
    load_study(a.study, a.studies_dir and Path(a.studies_dir))  # unknown study names fail here, with the known ones listed
    if a.relabel:
        if not a.machine:
            raise ConfigError("--relabel: name the new label with --machine")
        print(f"{relabel(a.study, Path(a.manifests), a.relabel, a.machine)}: relabelled from {a.relabel}")
        return 0
    path = freeze(a.study, Path(a.results) / a.study, Path(a.manifests), force=a.force, machine=a.machine)
    print(f"{path}: frozen")
    return 0


def cmd_audit(a) -> int:
    from .publish.manifests import audit
    studies = a.studies
    if not studies:
        from .study.config import load_config
        studies = load_config(Path(a.config))["studies"]
    if a.paper_pdf is not None and a.figures is None:
        raise ConfigError("--paper-pdf: name the figures it was built with (--figures figures/<set>)")
    pdf = None if a.paper_pdf is None else {
        "pdf": Path(a.paper_pdf), "source": Path(a.paper_source), "numbers": Path(a.numbers),
        "figures": Path(a.figures), "machine_figures": Path(a.machine_figures), "cited": Path(a.cited),
        "map_figures": a.map_figures and Path(a.map_figures)}
    seeds = None if a.seeds is None else Path(a.seeds)
    for line in audit(studies, Path(a.manifests), Path(a.numbers), Path(a.benchmarks), config=Path(a.config),
                      cited=Path(a.cited), seeds=seeds, pdf=pdf):
        print(f"audit: {line}")
    print("audit: OK")
    return 0


def cmd_drift(a) -> int:
    from .limits import output_file
    from .publish.manifests import drift
    drift(a.study, Path(a.results), Path(a.manifests), output_file(a.out, "--out"))
    print(f"{a.out}: written")
    return 0


# --- the parser: one function per subcommand, each returning the parser it adds -----------

def _command(sub, name: str, func, help: str, description: str | None = None) -> argparse.ArgumentParser:
    """The parser of subcommand ``name``, which ``func`` runs: one line of ``help`` in
    ``specproof --help``, ``description`` (default: that line) atop its own help, every
    option's default shown."""
    p = sub.add_parser(name, formatter_class=HelpFormatter, help=help,
                       description=description or help[0].upper() + help[1:] + ".")
    p.set_defaults(func=func)
    return p


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
    from .decode.policies import POLICIES
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


def _stage_parser(sub) -> argparse.ArgumentParser:
    st = _command(sub, "stage", cmd_stage, "run one pipeline stage of a study (used by the Snakemake rules)")
    st.add_argument("name", help="stage name, e.g. reference, runs, micro")
    st.add_argument("--config", help="the study config file, e.g. config/studies/<name>.yaml")
    st.add_argument("--seed", type=int, help="the study seed (level1, level2: they read no config)")
    st.add_argument("--results", required=True, help="the study's results directory")
    st.add_argument("--part", help="one job of a split stage: a pair (runs) or a target "
                                   "(reference, micro, qualification)")
    st.add_argument("--gather", action="store_true", help="join a split stage's jobs into its files")
    st.add_argument("--model-dir", help="where derived model files go (default: ~/.cache/specproof/models)")
    st.add_argument("--manifests", help="frozen record sets the prompts stage keeps the reserved prompts "
                                        "blind to (default: not checked)")
    return st


def _plan_parser(sub) -> argparse.ArgumentParser:
    pl = _command(sub, "plan", cmd_plan, "estimate how long each stage of a study takes here, before running it",
                  "Estimate each model-running stage's minutes on this machine: the study's work counted "
                  "from its config and prompts, at step costs measured by loading each model once.")
    pl.add_argument("--config", required=True, help="the study config file, e.g. config/studies/<name>.yaml")
    pl.add_argument("--acceptance", type=float, default=0.8,
                    help="assumed acceptance at every drafted position (the study measures it)")
    pl.add_argument("--model-dir", help="where derived model files go (default: ~/.cache/specproof/models)")
    pl.add_argument("--json", action="store_true", help="print the estimate as JSON")
    return pl


def _figures_parser(sub) -> argparse.ArgumentParser:
    f = _command(sub, "figures", cmd_figures, "draw a study's figures from its records")
    f.add_argument("--records", required=True, help="results/<study> or manifests/<study>/<machine>")
    f.add_argument("--out", required=True, help="the figures' directory")
    return f


def _machines_figure_parser(sub) -> argparse.ArgumentParser:
    mf = _command(sub, "machines-figure", cmd_machines_figure, "draw the verify-cost curves of one study's machines")
    mf.add_argument("--sets", nargs="+", required=True, help="record sets, <study>@<machine>")
    mf.add_argument("--records", nargs="+", required=True, help="their record directories, in order")
    mf.add_argument("--out", required=True, help="the figure file")
    return mf


def _break_even_figure_parser(sub) -> argparse.ArgumentParser:
    be = _command(sub, "break-even-figure", cmd_break_even_figure,
                  "draw where the cost model breaks even, with every mapped configuration of these sets")
    be.add_argument("--sets", nargs="+", required=True,
                    help="record sets, <study>@<machine>; the first one's acceptance draws the contours")
    be.add_argument("--records", nargs="+", required=True, help="their record directories, in order")
    be.add_argument("--out", required=True, help="the figure's directory (break_even.pdf, break_even.png)")
    return be


def _numbers_parser(sub) -> argparse.ArgumentParser:
    n = _command(sub, "numbers", cmd_numbers, "compute paper/build/numbers.json from study records")
    n.add_argument("--studies", nargs="+", required=True, help="the record sets the paper cites")
    n.add_argument("--head", required=True, help="the study the paper reports")
    n.add_argument("--title", default="specproof", help="the paper's title")
    n.add_argument("--replicate", nargs=2, action="append", default=[], metavar=("SET", "OF"),
                   help="SET reran the blocks of OF at another time (both in --studies); repeatable")
    n.add_argument("--break-even", action="append", default=[], metavar="SET",
                   help="a record set of the break-even map (row paper.break_even), from config.yaml "
                        "break_even; repeatable, the first one's acceptance draws the contours")
    n.add_argument("--manifests", default="manifests", help="frozen record sets")
    n.add_argument("--results", default="results", help="this machine's study results")
    n.add_argument("--benchmarks", default="benchmarks/results",
                   help="benchmark tables (<name>.json beside <name>.md); none if absent")
    n.add_argument("--cited", default="paper/cited.yaml",
                   help="the cited figures, study goals and benchmark goals (rows cited.*, bench_goal.*)")
    n.add_argument("--out", default="paper/build/numbers.json", help="the numbers file")
    return n


def _paper_parser(sub) -> argparse.ArgumentParser:
    pp = _command(sub, "paper", cmd_paper, "compile the Typst paper or a study's report")
    pp.add_argument("--source", default="paper/paper.typ", help="the Typst source")
    pp.add_argument("--numbers", default="paper/build/numbers.json", help="the numbers it cites")
    pp.add_argument("--figures", required=True, help="figures/<set>")
    pp.add_argument("--machine-figures", default="figures/machines",
                    help="the figure comparing machines (used when numbers.json compares two or more)")
    pp.add_argument("--map-figures", default=None,
                    help="the break-even map's directory (break-even-figure --out; default: --figures)")
    pp.add_argument("--cited", default="paper/cited.yaml",
                    help="the figures of other work and the benchmark goals the text cites")
    pp.add_argument("--out", default="paper/paper.pdf", help="the PDF")
    pp.add_argument("--list-claims", action="store_true",
                    help="write no PDF: print every #claim the numbers do not support, one per line "
                         "(exit 2 if any), instead of stopping at the first")
    return pp


def _freeze_parser(sub) -> argparse.ArgumentParser:
    fr = _command(sub, "freeze", cmd_freeze, "copy a finished study into manifests/<study>/<machine>/ with hashes")
    fr.add_argument("study", help="the study's name")
    fr.add_argument("--machine", help="label of this machine's record set (default: from the CPU model); "
                                      "another label freezes beside the machines already frozen")
    fr.add_argument("--results", default="results", help="where the study's results are")
    fr.add_argument("--manifests", default="manifests", help="where frozen record sets go")
    fr.add_argument("--force", action="store_true", help="replace this machine's frozen set (keeps the old manifest)")
    fr.add_argument("--studies-dir", help="where study configs live (default: config/studies)")
    fr.add_argument("--relabel", metavar="OLD", help="move the frozen set <study>@OLD to --machine, records "
                                                    "unchanged (a label that named two machines)")
    return fr


def _audit_parser(sub) -> argparse.ArgumentParser:
    au = _command(sub, "audit", cmd_audit, "re-hash frozen studies and recompute every number")
    au.add_argument("--studies", nargs="*", default=None, help="the record sets (default: those of --config)")
    au.add_argument("--config", default="config/config.yaml", help="the pipeline config")
    au.add_argument("--manifests", default="manifests", help="frozen record sets")
    au.add_argument("--numbers", default="paper/build/numbers.json", help="the numbers to recompute")
    au.add_argument("--benchmarks", default="benchmarks/results", help="benchmark tables")
    au.add_argument("--cited", default="paper/cited.yaml",
                    help="the cited figures, each checked against its quoted sentence")
    au.add_argument("--seeds", default=None, metavar="DIR",
                    help="the cited sources' files, to check the quotes against (default: not checked)")
    au.add_argument("--paper-pdf", default=None, metavar="PDF",
                    help="a built paper to compare byte for byte with its rebuild (default: not compared)")
    au.add_argument("--paper-source", default="paper/paper.typ", help="the Typst source of --paper-pdf")
    au.add_argument("--figures", default=None, help="figures/<set> of --paper-pdf")
    au.add_argument("--machine-figures", default="figures/machines", help="the machines figure of --paper-pdf")
    au.add_argument("--map-figures", default=None, help="the break-even map of --paper-pdf (default: --figures)")
    return au


def _drift_parser(sub) -> argparse.ArgumentParser:
    dr = _command(sub, "drift", cmd_drift, "compare a rerun study with its frozen manifest")
    dr.add_argument("study", help="the study's name")
    dr.add_argument("--results", required=True, help="where the rerun's results are")
    dr.add_argument("--manifests", default="manifests", help="frozen record sets")
    dr.add_argument("--out", required=True, help="the drift report")
    return dr


# in the order ``specproof --help`` lists them
SUBCOMMANDS = (_decode_parser, _advise_parser, _plan_parser, _stage_parser, _figures_parser, _machines_figure_parser,
               _break_even_figure_parser,
               _numbers_parser, _paper_parser, _freeze_parser, _audit_parser, _drift_parser)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="specproof", description=DESCRIPTION, formatter_class=HelpFormatter)
    p.add_argument("--version", action="version", version=version(), help="print specproof's version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SpecproofError as exc:
        print(f"specproof: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
