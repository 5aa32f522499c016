"""A/B timing of one prompt: target-only (A) against speculative (B) decoding.

The protocol behind ``specproof decode``: one short warm-up run of each path, then
``repeats`` interleaved A/B pairs (so slow drift of the machine hits both paths), the
speedup as the ratio of median tokens/s (each pair's own ratio beside it, so the spread
shows the run-to-run noise; a busy machine is warned about, see ``specproof.load``), and
for the last speculative run the round
trace: mean accepted, acceptance by position, the share of decode time in D, replay,
R and X, and the trace closure.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable

from .backend import Backend
from .decoding import DecodeSettings, decode_speculative, decode_target_only
from .drafters import Drafter
from .policies import Policy
from ..load import warn_if_busy, watch
from ..records import num


def ab_compare(target: Backend, drafter: Drafter | None, prompt_ids: list[int],
               settings: DecodeSettings, policy: Callable[[], Policy], repeats: int,
               policy_fields: dict | None = None,
               log: Callable[..., None] = lambda *m: None) -> dict:
    """The JSON record of an A/B comparison; ``policy`` makes a fresh policy per run (an
    adaptive policy keeps state) and ``policy_fields`` (k, policy) describe it in the
    record. Without a drafter only the target-only path runs."""
    policy_fields = policy_fields or {}
    label = " ".join(f"{k}={v}" for k, v in policy_fields.items())
    warm = DecodeSettings(4, settings.temperature, settings.seed, settings.verify_mode)
    decode_target_only(target, prompt_ids, warm)
    if drafter:
        decode_speculative(target, drafter, prompt_ids, warm, policy())
    base_runs, spec_runs = [], []
    with watch() as w:
        for rep in range(repeats):  # A/B interleaved so drift hits both paths
            log(f"[{rep + 1}/{repeats}] target-only ...")
            base_runs.append(decode_target_only(target, prompt_ids, settings))
            if drafter:
                log(f"[{rep + 1}/{repeats}] speculative {label} {settings.verify_mode} ...")
                spec_runs.append(decode_speculative(target, drafter, prompt_ids, settings, policy()))
    warn_if_busy("decode", [w.share])
    base = base_runs[-1]
    base_tps = statistics.median(r.tokens_per_s for r in base_runs)
    out = {"target": target.label, "target_backend": target.name, "draft": None,
           **policy_fields, "verify_mode": settings.verify_mode,
           "temperature": settings.temperature, "seed": settings.seed, "prompt_tokens": len(prompt_ids),
           "new_tokens": base.new_tokens, "target_tokens_per_s": base_tps, "text": base.text,
           "other_cpu_share": w.share}
    if not drafter:
        return out
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
        # each A/B pair's own ratio: their spread is this prompt's run-to-run noise
        "pair_speedups": [sr.tokens_per_s / br.tokens_per_s for br, sr in zip(base_runs, spec_runs)],
        "mean_accepted": spec.mean_accepted(),
        "acceptance_by_position": spec.acceptance_by_position(),
        "rounds": len(df),
        "time_share": {c: float(df[f"{c}_ns"].sum() / total)
                       for c in ("draft", "replay", "verify", "residual")},
        "trace_closure": spec.trace_closure(),
        "text": spec.text,
    })
    return out


def decode_lines(out: dict) -> list[str]:
    """``ab_compare``'s record (``out``) in words, one line a list item: the text, the
    target-only speed, and with a drafter the speedup, each pair's spread (one prompt:
    run-to-run noise, not an interval), the acceptance by position and whether the ids
    equal target-only's."""
    lines = [out["text"], "-" * 60,
             f"target-only: {num(out['target_tokens_per_s'], '.1f')} tok/s  ({out['new_tokens']} new tokens)"]
    if out["draft"] is None:
        return lines
    alpha = ", ".join(num(x) for x in out["acceptance_by_position"])
    lines.append(f"speculative: {num(out['speculative_tokens_per_s'], '.1f')} tok/s  speedup {num(out['speedup'])}x")
    pairs = out.get("pair_speedups") or []
    if len(pairs) > 1:
        lines.append(f"speedup of each A/B pair: {min(pairs):.2f}x to {max(pairs):.2f}x over {len(pairs)} pairs "
                     f"(one prompt: the spread is run-to-run noise, not an interval over prompts)")
    lines.append(f"mean accepted per round {num(out['mean_accepted'])}; acceptance by position [{alpha}]")
    if out["ids_equal_target_only"] is not None:
        lines.append(f"ids equal target-only: {out['ids_equal_target_only']}")
    return lines
