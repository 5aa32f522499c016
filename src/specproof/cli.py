"""Command line: ``specproof decode`` (and the pipeline commands added by later stages).

Errors a user can fix (bad path, bad config, bad K) print one line and exit 2.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

from .errors import SpecproofError

DEFAULT_MODEL = "embedded:smollm2-q4_1"
DEFAULT_PROMPT = ('def is_palindrome(text: str) -> bool:\n'
                  '    """Return True if text reads the same forwards and backwards,\n'
                  '    ignoring case and non-alphanumeric characters."""\n')


def _model_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("models (default: hf fp32 SmolLM2 target, llama.cpp Q4_1 SmolLM2 draft)")
    g.add_argument("--target-backend", default="hf", choices=["hf", "llama", "mock"])
    g.add_argument("--target-model", default=DEFAULT_MODEL,
                   help="embedded:<name> or a local GGUF file / HF directory (default %(default)s)")
    g.add_argument("--draft-backend", default="llama", choices=["hf", "llama", "mock", "ngram", "none"])
    g.add_argument("--draft-model", default=DEFAULT_MODEL)
    g.add_argument("--device", default="cpu", help="hf device: cpu, cuda[:n], mps")
    g.add_argument("--dtype", default="float32", help="hf dtype: float32, float16, bfloat16")
    g.add_argument("--n-ctx", type=int, default=2048)
    g.add_argument("--n-batch", type=int, default=512)
    g.add_argument("--n-ubatch", type=int, default=512)
    g.add_argument("--threads", type=int, default=None)


def _specs(a) -> tuple[dict, dict | None]:
    def spec(backend: str, model: str) -> dict:
        s = {"backend": backend, "model": model, "threads": a.threads}
        if backend == "hf":
            s.update(device=a.device, dtype=a.dtype)
        elif backend == "llama":
            s.update(n_ctx=a.n_ctx, n_batch=a.n_batch, n_ubatch=a.n_ubatch)
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


def cmd_decode(a) -> int:
    from .decoding import DecodeSettings, decode_speculative, decode_target_only
    from .errors import ConfigError
    from .loader import load_backend, load_drafter
    from .policies import make_policy

    settings = DecodeSettings(a.max_new_tokens, a.temperature, a.seed, a.verify_mode)
    settings.validate()
    make_policy(a.policy, a.k)  # validate before loading models
    if not a.prompt.strip():
        raise ConfigError("empty prompt: give --prompt some text")
    target_spec, draft_spec = _specs(a)
    log = (lambda *m: None) if a.json else (lambda *m: print(*m, file=sys.stderr, flush=True))
    log(f"loading target {target_spec['backend']}:{target_spec.get('model', 'mock')} ...")
    target = load_backend(target_spec)
    drafter = load_drafter(draft_spec, target, a.temperature, a.seed)
    text = target.chat_prompt(a.prompt) if a.chat else a.prompt
    prompt_ids = target.encode(text)
    if not prompt_ids:
        raise ConfigError("empty prompt: it tokenizes to no ids")
    warm = DecodeSettings(4, a.temperature, a.seed, a.verify_mode)
    decode_target_only(target, prompt_ids, warm)
    if drafter:
        decode_speculative(target, drafter, prompt_ids, warm, make_policy(a.policy, a.k))
    base_runs, spec_runs = [], []
    for rep in range(a.repeats):  # A/B interleaved so drift hits both paths
        log(f"[{rep + 1}/{a.repeats}] target-only ...")
        base_runs.append(decode_target_only(target, prompt_ids, settings))
        if drafter:
            log(f"[{rep + 1}/{a.repeats}] speculative K={a.k} {a.policy} {a.verify_mode} ...")
            spec_runs.append(decode_speculative(target, drafter, prompt_ids, settings,
                                                make_policy(a.policy, a.k)))
    base = base_runs[-1]
    base_tps = statistics.median(r.tokens_per_s for r in base_runs)
    out = {
        "target": target.label, "target_backend": target.name,
        "draft": None, "k": a.k, "policy": a.policy, "verify_mode": a.verify_mode,
        "temperature": a.temperature, "seed": a.seed, "prompt_tokens": len(prompt_ids),
        "new_tokens": base.new_tokens, "target_tokens_per_s": base_tps, "text": base.text,
    }
    if drafter:
        spec = spec_runs[-1]
        spec_tps = statistics.median(r.tokens_per_s for r in spec_runs)
        df = spec.rounds_frame()
        total = df["round_ns"].sum()
        out.update({
            "draft": drafter.describe(),
            "new_tokens": spec.new_tokens,
            "ids_equal_target_only": all(r.new_ids == base.new_ids for r in spec_runs)
            if settings.temperature == 0 else None,
            "speculative_tokens_per_s": spec_tps,
            "speedup": spec_tps / base_tps,
            "mean_accepted": spec.mean_accepted(),
            "acceptance_by_position": spec.acceptance_by_position(),
            "rounds": len(df),
            "time_share": {c: float(df[f"{c}_ns"].sum() / total)
                           for c in ("draft", "replay", "verify", "residual")},
            "trace_closure": spec.trace_closure(),
            "text": spec.text,
        })
    if a.json:
        print(json.dumps(out))
        return 0
    print(out["text"])
    print("-" * 60)
    print(f"target-only: {base_tps:.1f} tok/s  ({out['new_tokens']} new tokens)")
    if drafter:
        alpha = ", ".join(f"{x:.2f}" for x in out["acceptance_by_position"])
        print(f"speculative: {out['speculative_tokens_per_s']:.1f} tok/s  speedup {out['speedup']:.2f}x")
        print(f"mean accepted per round {out['mean_accepted']:.2f}; acceptance by position [{alpha}]")
        if out["ids_equal_target_only"] is not None:
            print(f"ids equal target-only: {out['ids_equal_target_only']}")
    return 0


def cmd_stage(a) -> int:
    from pathlib import Path
    from .stages import run_stage
    run_stage(a.name, a.study, Path(a.results))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specproof", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("decode", help="decode one prompt target-only and speculatively; report speedup")
    _model_flags(d)
    d.add_argument("--prompt", default=DEFAULT_PROMPT)
    d.add_argument("--chat", action="store_true", help="render the prompt with the target's chat template")
    d.add_argument("--k", type=int, default=6, help="speculation length K (max K for adaptive/guard)")
    d.add_argument("--policy", default="fixed", choices=["fixed", "adaptive", "guard"])
    d.add_argument("--verify-mode", default="batched", choices=["batched", "serialized"])
    d.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--max-new-tokens", type=int, default=128)
    d.add_argument("--repeats", type=int, default=1, help="A/B repetitions (median tokens/s)")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=cmd_decode)

    st = sub.add_parser("stage", help="run one pipeline stage of a study (used by the Snakemake rules)")
    st.add_argument("name", help="stage name, e.g. reference, runs, micro")
    st.add_argument("--study", required=True, help="study name (config/studies/<name>.yaml)")
    st.add_argument("--results", required=True, help="the study's results directory")
    st.set_defaults(func=cmd_stage)
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
