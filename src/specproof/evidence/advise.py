"""``specproof advise``: should speculation be enabled on this machine, and at which K?

Measures, for a target and a drafter: the target's verify cost v(B) for B = 1..K_max+1,
the draft step cost c_draft, and acceptance by draft position alpha_i from a short
speculative probe at K_max on the user's prompts (greedy unless a temperature is given;
a position the drafter was asked for but did not propose, as an n-gram lookup without a
long enough match does, counts as rejected).
It then predicts, for every K,

    S(K) = t_T * E[C|K] / E[T|K],   E[C|K] = 1 + sum_j prod_{i<=j} alpha_i,
    E[T|K] = mean over probe rounds of (d_K c_draft + v(d_K + 1)) + x,  d_K = min(K, d)

with d the tokens the drafter proposed in a probe round (K_max for a model drafter, so
E[T|K] = K c_draft + v(K+1) + x; an n-gram lookup proposes fewer, or none, and a round
that proposes none costs one target step), t_T = v(1) + x_T the target-only cost per
token (x_T its per-step residual, x the per-round residual, both measured in the probe).
That is the micro-benchmark model (``predict``): its parts are timed alone. Inside a
run they cost otherwise (``analysis.loopcost`` on the frozen studies: the draft's first
call after a verify costs about one more draft step, the verify call and the target step
run 0.9-1.4x their isolated times), so the advice comes from ``predict_loop``, the same
formula with the costs the probe's own rounds show, as the loop runs them:

    t_T   = the target-only probe's decode time per token (call, sampling, bookkeeping);
    draft = a + b d per round that drafts d tokens, fitted over the probe's rounds, which
            ask for K_max, 1, K_max, 2, ..., K_max, K_max - 1, ... in turn (``CyclePolicy``),
            so that d varies;
    v(B)  = rho v_iso(B), rho = the probe's verify time / v_iso at each round's B, pooled;
    x     = the probe's mean residual and draft replay per round.

Its interval is a prediction interval over prompts: a percentile bootstrap, with a fixed
seed so that the audit recomputes it, drawing the probe's prompts (each with all its
rounds), then as many new prompts as the check will run, and each B's isolated verify
samples (``predict_loop``; sets frozen before it resampled rounds). An n-gram drafter's
E[C|K] and proposal lengths come from replaying it over the greedy target-only probe
runs (``costmodel.replayed_rounds``), not from per-round acceptance at K_max. It
chooses K* = argmax S(K). With a confirmation budget (a study's
``advise.confirm_seconds``), target-only and K* then run back to back on the same
prompts (``paired_runs``) and their measured speedup, with its prediction interval over
prompts, is the prediction (``confirmed_prediction``); speculation is enabled only if the
prediction is above 1.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from ..decode.backend import Backend
from ..decode.costmodel import (acceptance_by_position, expected_committed, expected_round_ms,
                                fit_draft_round, loop_round_ms, replayed_rounds)
from ..decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from ..load import warn_if_busy, watch
from ..decode.drafters import Drafter, ModelDrafter, NGramDrafter
from ..decode.policies import FixedPolicy, Policy
from ..models.loader import ModelPool
from ..records import num, write_parquet
from ..study.config import Study
from ..study.workloads import interleaved_by_workload, prompt_ids, split_of
from .micro import time_forward

# advise decodes up to this many tokens per prompt (probe, confirmation and --check)
ADVISE_TOKENS = 64


class CyclePolicy(Policy):
    """The probe's K per round: K_max, 1, K_max, 2, ..., K_max, K_max - 1, then again.
    Half the rounds ask for K_max (acceptance at every position, the verify call at
    K_max + 1); the others spread d over 1..K_max - 1, so the probe's rounds separate a
    draft round's fixed cost from its cost per token. ``asked`` keeps every K handed out."""

    name = "cycle"

    def __init__(self, k_max: int):
        self.k_max = int(k_max)
        self.asked: list[int] = []
        others = list(range(1, self.k_max)) or [self.k_max]
        self._cycle = [k for o in others for k in (self.k_max, o)]

    def next_k(self) -> int:
        k = self._cycle[len(self.asked) % len(self._cycle)]
        self.asked.append(k)
        return k


def advise(target: Backend, drafter: Drafter, prompts: list[list[int]], k_max: int = 8,
           temperature: float = 0.0, probe_tokens: int = 48, repeats: int = 5, seed: int = 0,
           records: dict | None = None, budget_s: float | None = None,
           future_prompts: int | None = None, confirm_s: float = 0.0) -> dict:
    """Measure (verify cost, draft step cost, a probe at K_max per prompt), choose K with
    ``predict_loop`` (interval over prompts, for ``future_prompts`` new ones), then, with
    ``confirm_s`` > 0, confirm: run target-only and K* back to back on the same prompts
    for ``confirm_s`` seconds (``paired_runs``, at least two prompts) and predict the
    measured speedup with its interval over prompts (``confirmed_prediction``; ``model``
    'confirmed', the loop model's prediction kept as ``loop_predicted_speedup``). The
    probe takes the prompts in order until ``budget_s`` seconds (counted from the start,
    timed calls included) are spent, and at least two (all, without a budget).
    ``records``, when given, receives the measurements the prediction is computed from:
    ``records["micro"]`` (one row per timed call kind: measure 'verify' at B or 'draft',
    samples_ms), ``records["rounds"]`` (the probe's rounds: path 'target' or
    'speculative', prompt index, requested, k_max, the round columns) and
    ``records["confirm"]`` (the confirmation's runs, ``paired_runs``'s rows)."""
    t0 = time.perf_counter()
    settings = DecodeSettings(probe_tokens, temperature, seed)
    with watch() as w:
        micro = _measured_calls(target, drafter, prompts[0], k_max, repeats)
        frames = _probe_rounds(target, drafter, prompts, k_max, settings, None if budget_s is None else t0 + budget_s)
        rounds, micro = pd.concat(frames, ignore_index=True).assign(k_max=k_max), pd.DataFrame(micro)
        res = predict_loop(micro, rounds, k_max, future_prompts=future_prompts)
        confirm = pd.DataFrame(paired_runs(target, drafter, prompts, res["k"], settings,
                                           time.perf_counter() + confirm_s) if confirm_s > 0 else [])
    warn_if_busy("advise", [w.share])
    if records is not None:
        records["micro"], records["rounds"], records["confirm"] = micro, rounds, confirm
    micro_model = predict(micro, rounds, k_max)
    res = with_confirmation(res, confirm, future_prompts)
    res["micro_model"] = micro_model
    res["micro_predicted_speedup"] = micro_model["table"][res["k"] - 1]["predicted_speedup"]
    return {**res, "seconds": time.perf_counter() - t0, "other_cpu_share": w.share}


def with_confirmation(loop: dict, confirm: pd.DataFrame, future_prompts: int | None) -> dict:
    """``predict_loop``'s result with ``loop_predicted_speedup`` (its prediction at K*)
    and, where the confirmation ran (``confirm`` not empty), its prediction, interval,
    ``confirm_prompts`` and ``enable`` (predicted > 1) in place of the loop model's,
    ``model`` 'confirmed'; without it, ``confirm_prompts`` 0 and the loop's own."""
    out = {**loop, "loop_predicted_speedup": loop["predicted_speedup"], "confirm_prompts": 0}
    if len(confirm):
        out |= confirmed_prediction(confirm, future_prompts)
        out |= {"model": "confirmed", "enable": out["predicted_speedup"] > 1.0}
    return out


def _measured_calls(target: Backend, drafter: Drafter, ctx: list[int], k_max: int, repeats: int) -> list[dict]:
    """Timed verify calls at B = 1..K_max+1 and, for a model drafter, its step (samples in ms);
    a model-free drafter's step cost comes from the probe's rounds (see predict)."""
    block = (ctx * (k_max + 2))[: k_max + 1]
    micro = [{"measure": "verify", "B": b, "samples_ms": time_forward(target, ctx, block[:b], repeats)}
             for b in range(1, k_max + 2)]
    if isinstance(drafter, ModelDrafter):
        micro.append({"measure": "draft", "B": 1,
                      "samples_ms": time_forward(drafter.backend, ctx, block[:1], repeats * 2, last_only=True)})
    return micro


def in_time(prompts: list, deadline: float | None):
    """(index, prompt) in order: the first two always, the rest while ``perf_counter`` is
    before ``deadline`` (all of them without one)."""
    for i, ids in enumerate(prompts):
        if i >= 2 and deadline is not None and time.perf_counter() >= deadline:
            return
        yield i, ids


def _probe_rounds(target: Backend, drafter: Drafter, prompts: list[list[int]], k_max: int,
                  settings: DecodeSettings, deadline: float | None = None) -> list:
    """The probe's rounds per prompt: target-only, then speculative with K cycling 1..K_max;
    prompts in order, stopping after the first two once ``perf_counter`` passes ``deadline``."""
    frames = []
    for i, ids in in_time(prompts, deadline):
        plain = decode_target_only(target, ids, settings)
        base = plain.rounds_frame().assign(path="target", prompt=i, requested=0)
        if isinstance(drafter, NGramDrafter) and settings.temperature == 0:
            base = _with_sequence(base, ids, plain.new_ids, drafter)
        frames.append(base)
        policy = CyclePolicy(k_max)
        run = decode_speculative(target, drafter, ids, settings, policy).rounds_frame()
        # what the decoder asked for: the policy's K, or fewer where the token budget ran out
        run["requested"] = np.minimum(policy.asked[:len(run)],
                                      settings.max_new_tokens - (run["committed"].cumsum() - run["committed"]) - 1)
        frames.append(run.assign(path="speculative", prompt=i))
    return frames


def _with_sequence(base: "pd.DataFrame", context: list[int], ids: list[int], drafter: NGramDrafter) -> "pd.DataFrame":
    """A greedy target-only probe run's rounds with what replaying an n-gram drafter over
    it needs (``replayed_rounds``): ``token``, the id each round committed; ``context``,
    the prompt's ids on the run's first round (null on the others); ``max_ngram`` and
    ``min_ngram``, the drafter's."""
    context_col = [list(context)] + [None] * (len(base) - 1)
    return base.assign(token=list(ids), context=context_col, max_ngram=drafter.max_ngram,
                       min_ngram=drafter.min_ngram)


def _replays(t_df: "pd.DataFrame", k_max: int) -> dict | None:
    """prompt -> [(proposed, committed) per round at K, K = 1..k_max], the n-gram drafter
    replayed over each greedy target-only probe run (``replayed_rounds``); None for
    records without the sequences (a model drafter, a sampled probe, older sets)."""
    if "token" not in t_df or t_df["max_ngram"].isna().all():
        return None
    out = {}
    for prompt, g in t_df.groupby("prompt", sort=True):
        drafter = NGramDrafter(int(g["max_ngram"].iloc[0]), int(g["min_ngram"].iloc[0]))
        context, ids = list(g["context"].iloc[0]), [int(t) for t in g["token"]]
        out[prompt] = [replayed_rounds(drafter, context, ids, k) for k in range(1, k_max + 1)]
    return out


def _pooled(replays: dict, prompts) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per K, the replayed rounds of ``prompts`` (with repeats) pooled."""
    return [tuple(np.concatenate([replays[p][k][j] for p in prompts]) for j in (0, 1))
            for k in range(len(next(iter(replays.values()))))]


def predict(micro: "pd.DataFrame", rounds: "pd.DataFrame", k_max: int) -> dict:
    """The prediction from the measurements alone (the audit recomputes it from
    advise_micro.parquet and advise_rounds.parquet): v(B) and c_draft (ms) the medians of
    their samples (c_draft, for a model-free drafter, the probe's draft time per proposed
    token); x_T and x (ms) the means over prompts of each probe run's mean residual per
    round (x adds the draft replay); alpha by requested position over the speculative
    rounds; S(K) = t_T E[C|K] / E[T|K] with t_T = v(1) + x_T, for K = 1..k_max."""
    verify = {int(r.B): statistics.median(list(r.samples_ms))
              for r in micro[micro["measure"] == "verify"].itertuples()}
    draft = micro[micro["measure"] == "draft"]
    target_rounds, spec = rounds[rounds["path"] == "target"], rounds[rounds["path"] == "speculative"]
    target_x = [float(g["residual_ns"].mean()) / 1e6 for _, g in target_rounds.groupby("prompt", sort=True)]
    spec_x = [float((g["residual_ns"] + g["replay_ns"]).mean()) / 1e6 for _, g in spec.groupby("prompt", sort=True)]
    alpha = acceptance_by_position(spec, k_max, requested=spec["requested"])
    if len(draft):
        draft_ms = statistics.median(list(draft["samples_ms"].iloc[0]))
    else:
        draft_ms = float(spec["draft_ns"].sum() / max(spec["k"].sum(), 1) / 1e6)
    x_t, x_s = float(np.mean(target_x)), float(np.mean(spec_x))
    t_target = verify[1] + x_t
    # proposal lengths when K_max was asked for: at K the drafter proposes min(K, length)
    full = spec[spec["requested"] == k_max]
    lengths = (full if len(full) else spec)["k"].to_numpy()
    table = []
    for k in range(1, k_max + 1):
        e_c = expected_committed(alpha, k)
        round_ms = expected_round_ms(k, lengths, draft_ms, verify, x_s)
        table.append({"k": k, "expected_committed": e_c, "round_ms": round_ms,
                      "predicted_speedup": t_target * e_c / round_ms})
    best = max(table, key=lambda r: r["predicted_speedup"])
    return {"k": best["k"], "predicted_speedup": best["predicted_speedup"],
            "enable": best["predicted_speedup"] > 1.0, "table": table,
            "verify_ms": verify, "draft_step_ms": draft_ms, "target_ms_per_token": t_target,
            "alpha": [None if not np.isfinite(a) else float(a) for a in alpha],
            "draft_to_target_ratio": draft_ms / verify[1]}


STUDY_K_MAX = 8  # the largest K a study's advise probes and predicts for
BOOTSTRAP_RESAMPLES = 400
BOOTSTRAP_LEVEL = 0.95


def _loop_terms(target_rounds: dict, spec: dict, verify_samples: dict[int, np.ndarray], k_max: int,
                lengths: np.ndarray, replay: list | None = None) -> tuple[np.ndarray, dict]:
    """S(K) for K = 1..k_max as the loop runs it (see the module docstring), from numpy
    columns of the probe's rounds; and the terms it is computed from. With ``replay``
    (per K, the (proposed, committed) rounds of an n-gram drafter replayed over the
    greedy target-only runs), E[C|K] is the replay's mean committed per round and E[T|K]
    is costed over its rounds' proposal lengths, instead of alpha and the K_max rounds'."""
    verify = {b: float(np.median(v)) for b, v in verify_samples.items()}
    t_target = float(target_rounds["round_ns"].sum() / target_rounds["committed"].sum() / 1e6)
    v_iso = np.array([verify[int(b)] for b in spec["verify_positions"]])
    rho = float(spec["verify_ns"].sum() / 1e6 / v_iso.sum())
    draft = fit_draft_round(spec["k"], spec["draft_ns"] / 1e6)
    x = float(np.mean(spec["residual_ns"] + spec["replay_ns"]) / 1e6)
    req, acc = spec["requested"], spec["accepted"]
    alpha = np.full(k_max, np.nan)
    for i in range(1, k_max + 1):
        at = req >= i
        reached = int((at & (acc >= i - 1)).sum())
        if reached:
            alpha[i - 1] = (at & (acc >= i)).sum() / reached
    if replay is None:
        e_c = np.array([expected_committed(alpha, k) for k in range(1, k_max + 1)])
        round_ms = np.array([loop_round_ms(k, lengths, draft, verify, rho, x) for k in range(1, k_max + 1)])
    else:
        e_c = np.array([float(np.mean(c)) for _, c in replay])
        round_ms = np.array([loop_round_ms(k, d, draft, verify, rho, x) for k, (d, _) in enumerate(replay, 1)])
    return t_target * e_c / round_ms, {"t_target": t_target, "rho": rho, "draft": draft, "x": x,
                                        "alpha": alpha, "e_c": e_c, "round_ms": round_ms, "verify": verify}


def predict_loop(micro: "pd.DataFrame", rounds: "pd.DataFrame", k_max: int,
                 resamples: int = BOOTSTRAP_RESAMPLES, level: float = BOOTSTRAP_LEVEL, seed: int = 0,
                 unit: str = "prompts", future_prompts: int | None = None) -> dict:
    """The prediction from the probe's own rounds (see the module docstring): S(K) with
    t_T, the draft round fit (a, b), rho and x measured in the loop, and the isolated
    verify curve's shape. ``predicted_low``/``predicted_high``: the ``level`` percentile
    interval of S(K*) over ``resamples`` bootstrap replicates (seeded by ``seed``), each
    with every B's verify samples resampled and the probe's rounds drawn by ``unit``:

    'prompts' (a prediction interval for new prompts): n of the n probe prompts drawn
        with replacement, each with all its rounds (so the spread between prompts is in
        it); with ``future_prompts`` m, m prompts then drawn from those n, so the
        interval is for the pooled speedup over m new prompts (Var ~ s^2/n + s^2/m);
    'rounds' (sets frozen before the prompt interval): rounds resampled within prompt and
        requested K, target-only rounds within prompt; the probe's noise alone.

    Keys as ``predict``'s, plus those."""
    cols = ["k", "accepted", "requested", "draft_ns", "replay_ns", "verify_ns", "residual_ns",
            "verify_positions"]
    t_df, s_df = rounds[rounds["path"] == "target"], rounds[rounds["path"] == "speculative"]
    tgt = {c: t_df[c].to_numpy(dtype=float) for c in ("round_ns", "committed")}
    spec = {c: s_df[c].to_numpy(dtype=float) for c in cols}
    vs = {int(r.B): np.asarray(list(r.samples_ms), dtype=float)
          for r in micro[micro["measure"] == "verify"].itertuples()}
    replays = _replays(t_df, k_max)
    speedup, terms = _loop_terms(tgt, spec, vs, k_max, _full_lengths(spec, k_max),
                                 None if replays is None else _pooled(replays, sorted(replays)))
    best = int(np.argmax(speedup))
    rng = np.random.Generator(np.random.PCG64(seed))
    draw_rows = _prompt_draws(t_df, s_df, future_prompts) if unit == "prompts" else _round_draws(t_df, s_df)
    draws = []
    for _ in range(resamples):
        ti, si, chosen = draw_rows(rng)
        vb = {b: v[rng.integers(0, len(v), len(v))] for b, v in vs.items()}
        s_b = {c: a[si] for c, a in spec.items()}
        s_k, _ = _loop_terms({c: a[ti] for c, a in tgt.items()}, s_b, vb, k_max, _full_lengths(s_b, k_max),
                             None if replays is None else _pooled(replays, sorted(replays) if chosen is None else chosen))
        draws.append(s_k[best])
    tail = (1 - level) / 2
    low, high = (float(q) for q in np.quantile(draws, [tail, 1 - tail])) if draws else (float("nan"),) * 2
    table = [{"k": k, "expected_committed": float(terms["e_c"][k - 1]), "round_ms": float(terms["round_ms"][k - 1]),
              "predicted_speedup": float(speedup[k - 1])} for k in range(1, k_max + 1)]
    a, b = terms["draft"]
    return {"model": "loop", "k": best + 1, "predicted_speedup": float(speedup[best]),
            "predicted_low": low, "predicted_high": high, "enable": bool(speedup[best] > 1.0), "table": table,
            "verify_ms": terms["verify"], "verify_loop_ratio": terms["rho"],
            "draft_step_ms": b, "draft_round_overhead_ms": a, "residual_ms": terms["x"],
            "target_ms_per_token": terms["t_target"],
            "alpha": [None if not np.isfinite(x) else float(x) for x in terms["alpha"]],
            "draft_to_target_ratio": b / terms["t_target"], "interval_unit": unit,
            "probe_prompts": int(s_df["prompt"].nunique()), "future_prompts": future_prompts}


def _full_lengths(spec: dict, k_max: int) -> np.ndarray:
    """The proposal lengths of the rounds that asked for K_max (all rounds if none did):
    at K the drafter proposes min(K, length)."""
    full = spec["requested"] == k_max
    return spec["k"][full] if full.any() else spec["k"]


def _groups(keys: np.ndarray) -> list[np.ndarray]:
    return [np.flatnonzero(keys == g) for g in np.unique(keys)]


def _round_draws(t_df: "pd.DataFrame", s_df: "pd.DataFrame"):
    """A replicate's (target-only, speculative) row indices (and no prompts): rounds
    resampled within prompt (target-only) and within prompt and requested K (speculative)."""
    t_groups = _groups(t_df["prompt"].to_numpy())
    s_groups = _groups(s_df["prompt"].astype(str).to_numpy() + "|" + s_df["requested"].astype(str).to_numpy())

    def draw(rng):
        ti, si = (np.concatenate([g[rng.integers(0, len(g), len(g))] for g in groups])
                  for groups in (t_groups, s_groups))
        return ti, si, None
    return draw


def _prompt_draws(t_df: "pd.DataFrame", s_df: "pd.DataFrame", future: int | None):
    """A replicate's (target-only, speculative) row indices and the prompts drawn: n of
    the n probe prompts drawn with replacement, then (``future`` = m) m drawn from those;
    each drawn prompt brings all its rounds of both paths."""
    prompts = np.unique(np.concatenate([t_df["prompt"].to_numpy(), s_df["prompt"].to_numpy()]))
    t_rows = {p: np.flatnonzero(t_df["prompt"].to_numpy() == p) for p in prompts}
    s_rows = {p: np.flatnonzero(s_df["prompt"].to_numpy() == p) for p in prompts}

    def draw(rng):
        chosen = prompts[rng.integers(0, len(prompts), len(prompts))]
        if future:
            chosen = chosen[rng.integers(0, len(chosen), future)]
        return np.concatenate([t_rows[p] for p in chosen]), np.concatenate([s_rows[p] for p in chosen]), chosen
    return draw


def paired_runs(target: Backend, drafter: Drafter, prompts: list[list[int]], k: int, settings: DecodeSettings,
                deadline: float | None = None) -> list[dict]:
    """Target-only and speculative at fixed K on each prompt, back to back, target-only
    first on even prompts and second on odd ones (the machine's slow drift falls on both
    paths alike); prompts in order, stopping after the first two once ``perf_counter``
    passes ``deadline``. One row per run: path, prompt index, k, new_tokens, decode_ns."""
    runs = []
    for i, ids in in_time(prompts, deadline):
        order = ("target", "speculative") if i % 2 == 0 else ("speculative", "target")
        for path in order:
            r = (decode_target_only(target, ids, settings) if path == "target"
                 else decode_speculative(target, drafter, ids, settings, FixedPolicy(k)))
            runs.append({"path": path, "prompt": i, "k": k, "new_tokens": r.new_tokens, "decode_ns": r.decode_ns})
    return runs


def realized_speedup(target: Backend, drafter: Drafter, prompts: list[list[int]], k: int,
                     temperature: float = 0.0, max_new_tokens: int = 64, seed: int = 0,
                     records: list | None = None) -> float:
    """Measured tokens/s ratio at fixed K on every prompt (``paired_runs``), see
    ``realized_from_runs``; ``records`` receives the runs' rows."""
    with watch() as w:
        runs = paired_runs(target, drafter, prompts, k, DecodeSettings(max_new_tokens, temperature, seed))
    warn_if_busy("advise's check", [w.share])
    if records is not None:
        records += runs
    return realized_from_runs(pd.DataFrame(runs))


def run_phases(runs: "pd.DataFrame") -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """(confirmation runs, check runs) of advise_runs rows by ``phase``; rows written
    before the confirmation (no ``phase``) are all the check's."""
    if "phase" not in runs:
        return runs[:0], runs
    return runs[runs["phase"] == "confirm"], runs[runs["phase"] == "check"]


def prompt_sums(runs: "pd.DataFrame") -> np.ndarray:
    """(prompts x 4) float array, prompts in sorted order: per prompt the sums of
    new_tokens and decode_ns of its speculative runs, then of its target-only runs."""
    cols = [runs[runs["path"] == p].groupby("prompt")[f].sum() for p in ("speculative", "target")
            for f in ("new_tokens", "decode_ns")]
    return pd.concat(cols, axis=1).fillna(0).sort_index().to_numpy(dtype=float)


def pooled_ratio(sums: np.ndarray) -> np.ndarray:
    """(sum tokens_spec / sum ns_spec) / (sum tokens_target / sum ns_target) over the last
    axis but one of ``prompt_sums`` rows (a float for one set of rows)."""
    t = sums.sum(axis=-2)
    return (t[..., 0] / t[..., 1]) / (t[..., 2] / t[..., 3])


def bootstrap_ratios(sums: np.ndarray, rng: np.random.Generator, resamples: int,
                     future: int | None = None) -> np.ndarray:
    """``pooled_ratio`` of ``resamples`` replicates, each drawing the n prompts of
    ``sums`` with replacement; with ``future`` = m, then m prompts from those n (a
    prediction for m new prompts: Var ~ s^2/n + s^2/m)."""
    n = len(sums)
    drawn = rng.integers(0, n, (resamples, n))
    if future:
        drawn = np.take_along_axis(drawn, rng.integers(0, n, (resamples, future)), axis=1)
    return pooled_ratio(sums[drawn])


def realized_from_runs(runs: "pd.DataFrame") -> float:
    """(sum tokens_spec / sum decode_ns_spec) / (sum tokens_target / sum decode_ns_target):
    the ratio of total tokens over total decode time, speculative over target-only."""
    return float(pooled_ratio(prompt_sums(runs)))


def confirmed_prediction(runs: "pd.DataFrame", future_prompts: int | None,
                         resamples: int = BOOTSTRAP_RESAMPLES, level: float = BOOTSTRAP_LEVEL,
                         seed: int = 0) -> dict:
    """The speedup measured at the advised K on the probe's prompts (``paired_runs``):
    ``predicted_speedup`` = ``realized_from_runs``; ``predicted_low``/``predicted_high``
    its ``level`` percentile prediction interval for ``future_prompts`` new prompts
    (``bootstrap_ratios``, PCG64 seeded by ``seed``); ``confirm_prompts`` = n."""
    sums = prompt_sums(runs)
    draws = bootstrap_ratios(sums, np.random.Generator(np.random.PCG64(seed)), resamples, future_prompts)
    tail = (1 - level) / 2
    low, high = (float(q) for q in np.quantile(draws, [tail, 1 - tail]))
    return {"predicted_speedup": float(pooled_ratio(sums)), "predicted_low": low, "predicted_high": high,
            "confirm_prompts": len(sums)}


def predicted_target_ms(micro: "pd.DataFrame", rounds: "pd.DataFrame", confirm: pd.DataFrame) -> float:
    """The target-only ms per token behind a prediction: the confirmation's (sum decode_ns
    / sum new_tokens of its target-only runs) where it ran, else the loop model's t_T."""
    if len(confirm):
        t = confirm[confirm["path"] == "target"]
        return float(t["decode_ns"].sum() / t["new_tokens"].sum() / 1e6)
    return predict_loop(micro, rounds, int(rounds["k_max"].iloc[0]), resamples=0)["target_ms_per_token"]


def advise_study(study: Study, prompt_set: list[dict], out: Path, micro_out: Path | None = None,
                 rounds_out: Path | None = None, runs_out: Path | None = None) -> None:
    """Per pair: the advised K and predicted speedup (``advise``: the probe on the
    discovery prompts taken in turn from each workload, for
    ``study.advise["probe_seconds"]``, chooses K; the confirmation at that K on the same
    prompts, for ``study.advise["confirm_seconds"]``, predicts, with its interval over
    prompts for as many new prompts as the reserved split holds; with 0 seconds the loop
    model predicts, ``model`` 'loop'), and the realized speedup at that K on the reserved
    prompts (greedy). The summary goes to ``out``; the measurements it is computed from,
    each row with its pair, to ``micro_out`` (timed calls), ``rounds_out`` (probe rounds)
    and ``runs_out`` (the confirmation's and the check's runs, ``phase`` 'confirm' or
    'check'), the raw records the audit recomputes the summary from."""
    discovery, reserved = split_of(prompt_set, study.prediction["discovery_fraction"])
    pool, rows, frames = ModelPool(study), [], {"micro": [], "rounds": [], "runs": []}
    for _, pair, target in tqdm(pool.each_pair(study.pairs), total=len(study.pairs), desc="advise",
                                unit="pair"):
        drafter = pool.drafter(pair["draft"], target, 0.0, study.settings["seed"])
        probe = [prompt_ids(target, r) for r in interleaved_by_workload(discovery)]
        rec: dict = {}
        res = advise(target, drafter, probe, k_max=STUDY_K_MAX, probe_tokens=study.settings["max_new_tokens"],
                     records=rec, budget_s=study.advise["probe_seconds"], future_prompts=len(reserved),
                     confirm_s=study.advise["confirm_seconds"])
        realized: list[dict] = []
        real = realized_speedup(target, drafter, [prompt_ids(target, r) for r in reserved], res["k"],
                                max_new_tokens=study.settings["max_new_tokens"], records=realized)
        runs = pd.concat([rec["confirm"].assign(phase="confirm"), pd.DataFrame(realized).assign(phase="check")],
                         ignore_index=True)
        for name, df in (("micro", rec["micro"]), ("rounds", rec["rounds"]), ("runs", runs)):
            frames[name].append(df.assign(pair=pair["name"]))
        rows.append({"pair": pair["name"], "target": pair["target"], "draft": pair["draft"],
                     **{c: res[c] for c in ADVISE_COLUMNS}, "realized_speedup": real,
                     "advise_seconds": res["seconds"]})
    for name, path in (("micro", micro_out), ("rounds", rounds_out), ("runs", runs_out)):
        if path is not None:
            write_parquet(pd.concat(frames[name], ignore_index=True), path)
    write_parquet(pd.DataFrame(rows), out)


# advise.parquet's columns that come from the prediction (``predict_loop``, ``with_confirmation``)
ADVISE_COLUMNS = ("k", "predicted_speedup", "enable", "draft_to_target_ratio", "model", "predicted_low",
                  "predicted_high", "micro_predicted_speedup", "interval_unit", "probe_prompts", "future_prompts",
                  "loop_predicted_speedup", "confirm_prompts")


def advice_lines(res: dict, target: str, check: bool) -> list[str]:
    """``advise``'s result (``res``) in words, one line a list item: the measured costs,
    the table of predicted speedups by K, the verdict with its prediction interval and
    where the prediction came from, a note where the interval includes 1, and with
    ``check`` the realized speedup against the prediction."""
    lines = [f"target {target}: {num(res['target_ms_per_token'], '.1f')} ms/token in the loop; draft "
             f"{num(res['draft_round_overhead_ms'], '.1f')} ms per round + {num(res['draft_step_ms'], '.1f')} "
             f"ms per token (ratio {num(res['draft_to_target_ratio'])}); residual {num(res['residual_ms'])} ms per round",
             "verify cost v(B) alone, ms: " + ", ".join(f"{b}:{num(v, '.1f')}" for b, v in res["verify_ms"].items())
             + f"; in the loop x{num(res['verify_loop_ratio'])}",
             "acceptance by position: " + ", ".join(num(x) for x in res["alpha"]),
             " K  E[C|K]  round ms  predicted speedup"]
    for r in res["table"]:
        mark = "  <- best" if r["k"] == res["k"] else ""
        lines.append(f"{r['k']:2d}  {num(r['expected_committed'], '6.2f')}  {num(r['round_ms'], '8.1f')}  "
                     f"{num(r['predicted_speedup'], '6.2f')}x{mark}")
    lines.append(_verdict_line(res))
    if res["enable"] and res["predicted_low"] <= 1 or not res["enable"] and res["predicted_high"] >= 1:
        lines.append("note: the interval includes 1: the probe cannot tell whether speculation pays here")
    if check:
        lines.append(_check_line(res))
    return lines


def _verdict_line(res: dict) -> str:
    """The advice: enable or not, at which K, the predicted speedup and its interval, and
    whether the prediction was measured (confirmed) or comes from the cost model."""
    verdict = "enable speculation" if res["enable"] else "do NOT enable speculation (predicted slower)"
    source = (f"measured on {res['confirm_prompts']} prompts at K={res['k']}; the cost model said "
              f"{num(res['loop_predicted_speedup'])}x" if res["model"] == "confirmed" else
              f"the cost model over {res['probe_prompts']} probe prompts")
    return (f"advice: {verdict}, K={res['k']}, predicted {num(res['predicted_speedup'])}x "
            f"[{num(res['predicted_low'])}, {num(res['predicted_high'])}] ({round(100 * BOOTSTRAP_LEVEL)}% "
            f"prediction interval; {source}; micro-benchmark model {num(res['micro_predicted_speedup'])}x) "
            f"({res['seconds']:.0f} s to measure)")


def _check_line(res: dict) -> str:
    """The check: the realized speedup at the advised K, the prediction's error (%), and
    whether the interval covered it."""
    real, low, high = res["realized_speedup"], res["predicted_low"], res["predicted_high"]
    where = "unseen prompts" if res["check_unseen"] else "the probe's own prompts (not unseen)"
    return (f"realized at K={res['k']} on {res['check_prompts']} {where}: {num(real)}x; predicted "
            f"{num(res['predicted_speedup'])}x, off by {num(100 * (res['predicted_speedup'] / real - 1), '+.0f')}%; "
            f"the interval {'covered' if low <= real <= high else 'did NOT cover'} it")
