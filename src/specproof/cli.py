"""Command line: ``specproof decode`` (and the pipeline commands added by later stages).

Errors a user can fix (bad path, bad config, bad K) print one line and exit 2.
"""
from __future__ import annotations

import argparse
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
    g.add_argument("--n-gpu-layers", type=int, default=None,
                   help="llama layers on the accelerator (-1 all, 0 none; default: all when the build has one)")


def _specs(a) -> tuple[dict, dict | None]:
    def spec(backend: str, model: str) -> dict:
        s = {"backend": backend, "model": model, "threads": a.threads}
        if backend == "hf":
            s.update(device=a.device, dtype=a.dtype)
        elif backend == "llama":
            s.update(n_ctx=a.n_ctx, n_batch=a.n_batch, n_ubatch=a.n_ubatch, n_gpu_layers=a.n_gpu_layers)
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
    from .decode.ab import ab_compare
    from .decode.decoding import DecodeSettings
    from .decode.policies import make_policy
    from .errors import ConfigError
    from .models.loader import load_backend, load_drafter

    settings = DecodeSettings(a.max_new_tokens, a.temperature, a.seed, a.verify_mode)
    settings.validate()
    make_policy(a.policy, a.k)  # validate before loading models
    if a.repeats < 1:
        raise ConfigError(f"--repeats must be >= 1 (got {a.repeats})")
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
    out = ab_compare(target, drafter, prompt_ids, settings, lambda: make_policy(a.policy, a.k),
                     a.repeats, {"k": a.k, "policy": a.policy}, log)
    base_tps = out["target_tokens_per_s"]
    if a.json:
        from .records import strict_json
        print(strict_json(out))
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


def cmd_advise(a) -> int:
    from .evidence.advise import BOOTSTRAP_LEVEL, advise, realized_speedup
    from .errors import ConfigError
    from .models.loader import load_backend, load_drafter
    from .decode.decoding import DecodeSettings
    if a.k_max < 1:
        raise ConfigError(f"K must be >= 1 (got {a.k_max})")
    DecodeSettings(1, a.temperature, a.seed, "batched").validate()
    target_spec, draft_spec = _specs(a)
    if draft_spec is None:
        raise ConfigError("advise needs a draft (--draft-backend llama|hf|mock|ngram)")
    log = (lambda *m: None) if a.json else (lambda *m: print(*m, file=sys.stderr, flush=True))
    log("loading models ...")
    target = load_backend(target_spec)
    drafter = load_drafter(draft_spec, target, a.temperature, a.seed)
    texts = a.prompt or [DEFAULT_PROMPT, "Explain what a hash table is to a new programmer."]
    prompts = []
    for i, t in enumerate(texts):
        ids = target.encode(target.chat_prompt(t) if (a.chat or i > 0 and not a.prompt) else t)
        if not ids:
            raise ConfigError("empty prompt: give --prompt some text")
        prompts.append(ids)
    log("measuring verify cost v(B), draft step cost, and acceptance by position ...")
    res = advise(target, drafter, prompts, k_max=a.k_max, temperature=a.temperature, seed=a.seed)
    if a.check:
        log(f"checking: realized speedup at K={res['k']} ...")
        res["realized_speedup"] = realized_speedup(target, drafter, prompts, res["k"], a.temperature,
                                                   seed=a.seed)
    if a.json:
        from .records import strict_json
        print(strict_json(res))
        return 0
    print(f"target {target.label}: {res['target_ms_per_token']:.1f} ms/token in the loop; draft "
          f"{res['draft_round_overhead_ms']:.1f} ms per round + {res['draft_step_ms']:.1f} ms per token "
          f"(ratio {res['draft_to_target_ratio']:.2f}); residual {res['residual_ms']:.2f} ms per round")
    print("verify cost v(B) alone, ms: " + ", ".join(f"{b}:{v:.1f}" for b, v in res["verify_ms"].items())
          + f"; in the loop x{res['verify_loop_ratio']:.2f}")
    print("acceptance by position: " + ", ".join("n/a" if x is None else f"{x:.2f}" for x in res["alpha"]))
    print(" K  E[C|K]  round ms  predicted speedup")
    for r in res["table"]:
        mark = "  <- best" if r["k"] == res["k"] else ""
        print(f"{r['k']:2d}  {r['expected_committed']:6.2f}  {r['round_ms']:8.1f}  {r['predicted_speedup']:6.2f}x{mark}")
    verdict = "enable speculation" if res["enable"] else "do NOT enable speculation (predicted slower)"
    level = round(100 * BOOTSTRAP_LEVEL)
    print(f"advice: {verdict}, K={res['k']}, predicted {res['predicted_speedup']:.2f}x "
          f"[{res['predicted_low']:.2f}, {res['predicted_high']:.2f}] ({level}% interval from the probe's noise; "
          f"micro-benchmark model {res['micro_predicted_speedup']:.2f}x) ({res['seconds']:.0f} s to measure)")
    if res["enable"] and res["predicted_low"] <= 1 or not res["enable"] and res["predicted_high"] >= 1:
        print("note: the interval includes 1: the probe cannot tell whether speculation pays here")
    if a.check:
        print(f"realized at K={res['k']}: {res['realized_speedup']:.2f}x")
    return 0


def cmd_stage(a) -> int:
    from pathlib import Path
    from .analysis.analyze import stage_analyze
    from .evidence.stages import run_stage
    if a.name == "analyze":  # reads only the raw records, no study config
        stage_analyze(Path(a.results))
        return 0
    run_stage(a.name, Path(a.results), config=a.config and Path(a.config), seed=a.seed, part=a.part,
              gather_jobs=a.gather, model_dir=a.model_dir and Path(a.model_dir).resolve())
    return 0


def cmd_figures(a) -> int:
    from pathlib import Path
    from .analysis.analyze import analyze
    from .publish.figures import make_all
    make_all(analyze(Path(a.records)), Path(a.records), Path(a.out))
    return 0


def cmd_machines_figure(a) -> int:
    from pathlib import Path
    from .publish.figures import machines_verify_cost
    from .records import read_parquet
    if len(a.sets) != len(a.records):
        raise SpecproofError("machines-figure: give one --records directory per --sets entry")
    machines_verify_cost({s.partition("@")[2] or s: read_parquet(Path(r) / "micro.parquet")
                          for s, r in zip(a.sets, a.records)}, Path(a.out))
    print(f"{a.out}: written")
    return 0


def cmd_numbers(a) -> int:
    from pathlib import Path
    from .publish.paper import build_numbers
    config = {"studies": a.studies, "study": a.head, "paper": {"title": a.title}}
    n = build_numbers(config, Path(a.manifests), Path(a.results), Path(a.out), Path(a.benchmarks))
    print(f"{a.out}: {len(n)} numbers")
    return 0


def cmd_paper(a) -> int:
    from pathlib import Path
    from .publish.paper import compile_paper
    compile_paper(Path(a.source), Path(a.out), numbers=Path(a.numbers), figures=Path(a.figures),
                  machine_figures=Path(a.machine_figures), cited=Path(a.cited))
    print(f"{a.out}: written")
    return 0


def cmd_freeze(a) -> int:
    from pathlib import Path
    from .publish.manifests import freeze
    from .study.config import load_study
    load_study(a.study, a.studies_dir and Path(a.studies_dir))  # unknown study names fail here, with the known ones listed
    path = freeze(a.study, Path(a.results) / a.study, Path(a.manifests), force=a.force, machine=a.machine)
    print(f"{path}: frozen")
    return 0


def cmd_audit(a) -> int:
    from pathlib import Path
    from .publish.manifests import audit
    studies = a.studies
    if not studies:
        from .study.config import load_config
        studies = load_config(Path(a.config))["studies"]
    for line in audit(studies, Path(a.manifests), Path(a.numbers), Path(a.benchmarks)):
        print(f"audit: {line}")
    print("audit: OK")
    return 0


def cmd_drift(a) -> int:
    from pathlib import Path
    from .publish.manifests import drift
    drift(a.study, Path(a.results), Path(a.manifests), Path(a.out))
    print(f"{a.out}: written")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .decode.policies import POLICIES
    p = argparse.ArgumentParser(prog="specproof", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("decode", help="decode one prompt target-only and speculatively; report speedup")
    _model_flags(d)
    d.add_argument("--prompt", default=DEFAULT_PROMPT)
    d.add_argument("--chat", action="store_true", help="render the prompt with the target's chat template")
    d.add_argument("--k", type=int, default=6,
                   help="speculation length K (max K for adaptive/guard, start K for hf_heuristic)")
    d.add_argument("--policy", default="fixed", choices=POLICIES)
    d.add_argument("--verify-mode", default="batched", choices=["batched", "serialized"])
    d.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--max-new-tokens", type=int, default=128)
    d.add_argument("--repeats", type=int, default=1, help="A/B repetitions (median tokens/s)")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=cmd_decode)

    ad = sub.add_parser("advise", help="measure the cost curve and acceptance; predict the speedup over K")
    _model_flags(ad)
    ad.add_argument("--prompt", action="append", help="a prompt (repeatable); default: one code, one chat")
    ad.add_argument("--chat", action="store_true", help="render --prompt texts with the chat template")
    ad.add_argument("--k-max", type=int, default=8)
    ad.add_argument("--temperature", type=float, default=0.0)
    ad.add_argument("--seed", type=int, default=0)
    ad.add_argument("--check", action="store_true", help="also measure the realized speedup at the advised K")
    ad.add_argument("--json", action="store_true")
    ad.set_defaults(func=cmd_advise)

    st = sub.add_parser("stage", help="run one pipeline stage of a study (used by the Snakemake rules)")
    st.add_argument("name", help="stage name, e.g. reference, runs, micro")
    st.add_argument("--config", help="the study config file, e.g. config/studies/<name>.yaml")
    st.add_argument("--seed", type=int, help="the study seed (level1, level2: they read no config)")
    st.add_argument("--results", required=True, help="the study's results directory")
    st.add_argument("--part", help="one job of a split stage: a pair (runs) or a target "
                                   "(reference, micro, qualification)")
    st.add_argument("--gather", action="store_true", help="join a split stage's jobs into its files")
    st.add_argument("--model-dir", help="where derived model files go (default ~/.cache/specproof/models)")
    st.set_defaults(func=cmd_stage)

    f = sub.add_parser("figures", help="draw a study's figures from its records")
    f.add_argument("--records", required=True, help="results/<study> or manifests/<study>")
    f.add_argument("--out", required=True)
    f.set_defaults(func=cmd_figures)

    mf = sub.add_parser("machines-figure", help="draw the verify-cost curves of one study's machines")
    mf.add_argument("--sets", nargs="+", required=True, help="record sets, <study>@<machine>")
    mf.add_argument("--records", nargs="+", required=True, help="their record directories, in order")
    mf.add_argument("--out", required=True)
    mf.set_defaults(func=cmd_machines_figure)

    n = sub.add_parser("numbers", help="compute paper/build/numbers.json from study records")
    n.add_argument("--studies", nargs="+", required=True)
    n.add_argument("--head", required=True, help="the study the paper reports")
    n.add_argument("--title", default="specproof")
    n.add_argument("--manifests", default="manifests")
    n.add_argument("--results", default="results")
    n.add_argument("--benchmarks", default="benchmarks/results",
                   help="benchmark tables (<name>.json beside <name>.md); none if absent")
    n.add_argument("--out", default="paper/build/numbers.json")
    n.set_defaults(func=cmd_numbers)

    pp = sub.add_parser("paper", help="compile the Typst paper")
    pp.add_argument("--source", default="paper/paper.typ")
    pp.add_argument("--numbers", default="paper/build/numbers.json")
    pp.add_argument("--figures", required=True, help="figures/<set>")
    pp.add_argument("--machine-figures", default="figures/machines",
                    help="the figure comparing machines (used when numbers.json compares two or more)")
    pp.add_argument("--cited", default="paper/cited.yaml",
                    help="the seeds' figures the text cites (default %(default)s)")
    pp.add_argument("--out", default="paper/paper.pdf")
    pp.set_defaults(func=cmd_paper)

    fr = sub.add_parser("freeze", help="copy a finished study into manifests/<study>/<machine>/ with hashes")
    fr.add_argument("study")
    fr.add_argument("--machine", help="label of this machine's record set (default: from the CPU model); "
                                      "another label freezes beside the machines already frozen")
    fr.add_argument("--results", default="results")
    fr.add_argument("--manifests", default="manifests")
    fr.add_argument("--force", action="store_true", help="replace this machine's frozen set (keeps the old manifest)")
    fr.add_argument("--studies-dir", help="where study configs live (default config/studies)")
    fr.set_defaults(func=cmd_freeze)

    au = sub.add_parser("audit", help="re-hash frozen studies and recompute every number")
    au.add_argument("--studies", nargs="*", default=None, help="default: the studies in --config")
    au.add_argument("--config", default="config/config.yaml")
    au.add_argument("--manifests", default="manifests")
    au.add_argument("--numbers", default="paper/build/numbers.json")
    au.add_argument("--benchmarks", default="benchmarks/results")
    au.set_defaults(func=cmd_audit)

    dr = sub.add_parser("drift", help="compare a rerun study with its frozen manifest")
    dr.add_argument("study")
    dr.add_argument("--results", required=True)
    dr.add_argument("--manifests", default="manifests")
    dr.add_argument("--out", required=True)
    dr.set_defaults(func=cmd_drift)
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
