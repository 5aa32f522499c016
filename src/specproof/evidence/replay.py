"""Certificate power on a real pair, by replay (issue 21, section 3).

Running hundreds of planted repetitions through the real models does not fit on two
cores; the certificate's power does not need them. Along each sampled speculative run of
a record set we re-score the target's p_t and the draft's q_t at every emitted position
(``pit.teacher_forced``, one position per call, as the PIT stage scores them), and from
them the exact law of the token a planted violation would emit there:

    null            p_t                                  (Leviathan et al. 2023, Thm. 1)
    skip_residual   min(p_t, q_t) + (1 - sum min(p_t, q_t)) p_t   at a drafted position:
                    on rejection the token is drawn from p_t, not norm(max(0, p_t - q_t))
    temperature     p_t^(1/c) / sum p_t^(1/c), c = calibration.TEMPERATURE_VIOLATION:
                    every position sampled at c T
    off_by_one      p_(t-1) at a drafted position: acceptance test and residual read the
                    target's row one position early (the rule is exact for the row it reads)

A bonus position (all drafts accepted, drawn from p_t) emits p_t except under the
temperature violation. ``n-gram`` drafts are deterministic: q_t is one-hot on the proposal.
Each simulated study draws every position's token from its law, forms the three PIT
orders with one V per position, exactly as ``pit.score_runs`` does, and applies the
certificate's whole rule (``pit.rule_decision``); the power is the share of simulated
studies it rejects. ``skip_residual``'s law is checked against the planted sampler's own
code (``calibration.SkipResidualSampler`` through ``calibration.step_distribution``) in
the tests.

The replay's premise is checked on the real loop too (``loop_agreement``): a few runs of
the real speculative loop with a violation planted in its sampler (``planted_run``), their
emitted tokens re-scored as above, must follow the law the replay assigns them, and not
the target's own p_t. ``off_by_one`` has no planted loop (it is a verify-index bug, not a
sampler), so only its replay law is checked.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from tqdm import tqdm

from ..decode.backend import Backend
from ..decode.decoding import DecodeSettings, decode_speculative
from ..decode.drafters import ModelDrafter
from ..decode.policies import FixedPolicy
from ..decode.sampling import Sampler, one_hot
from ..study.workloads import prompt_ids
from .calibration import TEMPERATURE_VIOLATION, SkipResidualSampler
from .pit import order_pvalues, position_roles, ratio_key, rule_decision, teacher_forced

VIOLATIONS = ("null", "skip_residual", f"temperature_{TEMPERATURE_VIOLATION}", "off_by_one")


def emitted_law(violation: str, p: np.ndarray, q: np.ndarray | None,
                p_prev: np.ndarray | None) -> np.ndarray:
    """The law of the token emitted at one position under ``violation`` (see the module
    docstring); ``q`` None marks a bonus position, ``p_prev`` None the first position."""
    if violation == "null":
        return p
    if violation.startswith("temperature_"):
        z = p ** (1.0 / TEMPERATURE_VIOLATION)
        return z / z.sum()
    if q is None:
        return p
    if violation == "skip_residual":
        kept = np.minimum(p, q)
        return kept + (1.0 - kept.sum()) * p
    if violation == "off_by_one":
        return p if p_prev is None else p_prev
    raise ValueError(f"unknown violation {violation!r}")


def mass_before(p: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Per token y, the mass of the tokens ranked before y when sorted by ``key``
    descending, ties by id (``pit.rank_below`` for every y at once)."""
    order = np.lexsort((np.arange(p.size), -key))
    below = np.empty_like(p)
    below[order] = np.cumsum(p[order]) - p[order]
    return below


@dataclass
class Position:
    """One emitted position: the target's p_t, the draft's q_t (None at a bonus
    position; one-hot on the proposal for an n-gram draft), p_(t-1) (None at t = 0) and
    the ratio-order key the PIT stage uses there (``pit.ratio_key``)."""

    p: np.ndarray
    q: np.ndarray | None
    p_prev: np.ndarray | None
    key: np.ndarray


def pit_orders(pos: Position, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The PIT values under p_t of tokens ``x`` with uniforms ``v``, shape (len(x), 3):
    (u id, u rank, u ratio) = (mass before x in that order) + v p_t(x), as the PIT stage
    forms them (the ratio order is the rank order at a bonus position)."""
    p = pos.p
    below_rank = mass_before(p, p)
    below_ratio = below_rank if pos.q is None else mass_before(p, pos.key)
    vp = v * p[x]
    return np.stack([(np.cumsum(p) - p)[x] + vp, below_rank[x] + vp, below_ratio[x] + vp], axis=1)


def position_draws(pos: Position, reps: int, rng: np.random.Generator) -> np.ndarray:
    """PIT values of ``reps`` independent tokens per violation at one position:
    shape (len(VIOLATIONS), reps, 3), the last axis (u id, u rank, u ratio), one V per
    draw shared by the three orders."""
    out = np.empty((len(VIOLATIONS), reps, 3))
    for i, violation in enumerate(VIOLATIONS):
        cdf = np.cumsum(emitted_law(violation, pos.p, pos.q, pos.p_prev))
        x = np.minimum(np.searchsorted(cdf, rng.random(reps) * cdf[-1], side="right"), pos.p.size - 1)
        out[i] = pit_orders(pos, x, rng.random(reps))
    return out


def run_positions(dists: Iterable[tuple[np.ndarray, np.ndarray | None]], roles: list[int | None],
                  ) -> Iterator[Position]:
    """Positions of one run, as its (p_t, q_t) are re-scored (``pit.teacher_forced``),
    with its roles (``pit.position_roles``: the proposal at a drafted position, None at
    a bonus one); q_t None (an n-gram draft) becomes one-hot on the proposal."""
    prev = None
    for (p, q), proposal in zip(dists, roles):
        if proposal is None:
            yield Position(p, None, prev, p)
        elif q is None:
            yield Position(p, one_hot(int(proposal), p.size), prev, ratio_key(p, None, int(proposal)))
        else:
            yield Position(p, q, prev, ratio_key(p, q, None))
        prev = p


def law_distances(pos: Position) -> np.ndarray:
    """Total variation 0.5 sum_y |law(y) - p_t(y)| of each violation at one position."""
    return np.array([0.5 * np.abs(emitted_law(v, pos.p, pos.q, pos.p_prev) - pos.p).sum()
                     for v in VIOLATIONS])


def replay_runs(target: Backend, pool_draft, runs: pd.DataFrame, rounds: pd.DataFrame,
                prompts: dict[str, dict], reps: int, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Replay every sampled speculative run of one pair: (draws of every position, shape
    (positions, violations, reps, 3); per-position TV of each violation, shape
    (positions, violations); the number of drafted positions). ``pool_draft(name)`` gives
    a run's draft backend (None for an n-gram draft)."""
    rng = np.random.default_rng(seed)
    by_run = dict(tuple(rounds.groupby("run_id")))
    draws, tvs, drafted = [], [], 0
    for r in tqdm(list(runs.itertuples()), desc="replay", unit="run"):
        tokens = [int(x) for x in r.ids]
        roles = position_roles(by_run[r.run_id], len(tokens), r.run_id)
        draft = pool_draft(r.draft)
        dists = teacher_forced(target, prompt_ids(target, prompts[r.prompt_id]), tokens, r.temperature, draft)
        for pos in run_positions(dists, roles):
            draws.append(position_draws(pos, reps, rng))
            tvs.append(law_distances(pos))
            drafted += pos.q is not None
    return np.stack(draws), np.stack(tvs), drafted


def study_power(draws: np.ndarray, alpha: float, multiple: int = 1) -> pd.DataFrame:
    """The whole rule's rejections per violation over simulated studies. ``draws``: the
    stacked ``position_draws`` of every position of one pair, shape (positions,
    violations, reps, 3). A study of ``multiple`` x the positions joins ``multiple``
    disjoint repetitions (reps // multiple studies). Rows: violation, multiple, tokens,
    studies, rejections, rate, ci_low, ci_high (Clopper-Pearson, 95%)."""
    n_pos, n_viol, reps, _ = draws.shape
    studies = reps // multiple
    rows = []
    for i, violation in enumerate(VIOLATIONS):
        rejected = 0
        for s in range(studies):
            u = draws[:, i, s * multiple:(s + 1) * multiple, :].transpose(1, 0, 2).reshape(-1, 3)
            rejected += rule_decision(order_pvalues(u[:, 0], u[:, 1], u[:, 2]), alpha)["rejected"]
        ci = stats.binomtest(rejected, studies).proportion_ci(0.95, method="exact")
        rows.append({"violation": violation, "multiple": multiple, "tokens": n_pos * multiple,
                     "studies": studies, "rejections": rejected, "rate": rejected / studies,
                     "ci_low": ci.low, "ci_high": ci.high})
    return pd.DataFrame(rows)


LOOP_VIOLATIONS = ("null", "skip_residual", f"temperature_{TEMPERATURE_VIOLATION}")


def planted_sampler(violation: str, temperature: float) -> Sampler:
    """The real loop's sampler with ``violation`` planted (one of LOOP_VIOLATIONS): the
    real rule, the skipped residual resample, or the real rule at c T."""
    if violation == "null":
        return Sampler(temperature)
    if violation == "skip_residual":
        return SkipResidualSampler(temperature)
    if violation == f"temperature_{TEMPERATURE_VIOLATION}":
        return Sampler(temperature * TEMPERATURE_VIOLATION)
    raise ValueError(f"no planted loop for violation {violation!r} (known: {', '.join(LOOP_VIOLATIONS)})")


def planted_run(target: Backend, draft: Backend, prompt: list[int], violation: str, k: int,
                new_tokens: int, temperature: float, seed: int,
                verify_mode: str = "batched") -> tuple[list[int], list[int | None]]:
    """One run of the real speculative loop (fixed K, the draft sampling at the loop's
    temperature) with ``violation`` planted in its sampler: its emitted ids and their
    roles (``pit.position_roles``)."""
    sampler = planted_sampler(violation, temperature)
    settings = DecodeSettings(new_tokens, sampler.temperature, seed, verify_mode=verify_mode)
    run = decode_speculative(target, ModelDrafter(draft, sampler.temperature, seed), prompt, settings,
                             FixedPolicy(k), sampler=sampler)
    rounds = pd.DataFrame([{"round": r.round, "drafted": r.drafted, "committed": r.committed}
                           for r in run.rounds])
    return run.new_ids, position_roles(rounds, len(run.new_ids))


def log_ratio_moments(law: np.ndarray, p: np.ndarray) -> tuple[float, float, float, float]:
    """l(y) = log law(y) / p(y): (mean, variance) of l(x) when x ~ law, i.e. KL(law || p),
    and when x ~ p, i.e. -KL(p || law); nats."""
    l = np.log(np.clip(law, 1e-300, None)) - np.log(np.clip(p, 1e-300, None))
    m_law, m_p = float(law @ l), float(p @ l)
    return m_law, float(law @ (l - m_law) ** 2), m_p, float(p @ (l - m_p) ** 2)


EVIDENCE = ("u_law", "u_id", "u_rank", "u_ratio", "log_ratio", "mean_if_law", "var_if_law",
            "mean_if_target", "var_if_target", "drafted")


def position_evidence(pos: Position, x: int, v: float, violation: str) -> np.ndarray:
    """One emitted token x at one position, with its uniform v: the EVIDENCE columns,
    u_law = L(x - 1 and below) + v L(x) under the replay's law L of ``violation``, the
    PIT values under p_t (``pit_orders``), l = log L(x) / p_t(x), its moments if x ~ L
    and if x ~ p_t (``log_ratio_moments``), and whether the position was drafted."""
    law = emitted_law(violation, pos.p, pos.q, pos.p_prev)
    u = pit_orders(pos, np.array([x]), np.array([v]))[0]
    l = np.log(max(law[x], 1e-300)) - np.log(max(pos.p[x], 1e-300))
    return np.array([law[:x].sum() + v * law[x], *u, l, *log_ratio_moments(law, pos.p), pos.q is not None])


def loop_agreement(evidence: np.ndarray, violation: str, alpha: float) -> dict:
    """Do the tokens x_t the real loop emitted with ``violation`` planted follow the
    replay's law L_t at their re-scored positions? ``evidence``: a ``position_evidence``
    row per token. Three views: ks_law_pvalue, KS of the u_law against U(0, 1);
    S = sum_t l_t against its mean and sd if every x_t ~ L_t (z_law) and if every
    x_t ~ p_t, nothing planted (z_target) (martingale CLT); and the certificate's whole
    rule on the PIT values under p_t (rule_rejected). ``agrees``: |z_law| <=
    z_(1 - alpha/2) (``null``, where L_t = p_t and S = 0: the KS p-value >= alpha);
    ``distinguished``: |z_target| > z_(1 - alpha/2), the runs were enough to tell the
    planted law from the target's."""
    e = dict(zip(EVIDENCE, np.asarray(evidence, dtype=np.float64).T))
    s, m = float(e["log_ratio"].sum()), {k: float(e[k].sum()) for k in EVIDENCE[5:9]}
    z = [(s - m[f"mean_if_{w}"]) / np.sqrt(m[f"var_if_{w}"]) if m[f"var_if_{w}"] > 0 else None
         for w in ("law", "target")]
    rule = rule_decision(order_pvalues(e["u_id"], e["u_rank"], e["u_ratio"]), alpha)
    ks = float(stats.kstest(e["u_law"], "uniform").pvalue)
    return {"violation": violation, "positions": len(e["u_law"]), "drafted": int(e["drafted"].sum()),
            "ks_law_pvalue": ks, "log_ratio_sum": s, "mean_if_law": m["mean_if_law"],
            "mean_if_target": m["mean_if_target"], "z_law": z[0], "z_target": z[1],
            "rule_min_pvalue": rule["min_pvalue"], "rule_rejected": rule["rejected"],
            **agreement_verdicts(z[0], z[1], ks, alpha)}


def agreement_verdicts(z_law: float | None, z_target: float | None, ks_law_pvalue: float,
                       alpha: float) -> dict:
    """``agrees`` and ``distinguished`` of ``loop_agreement`` at two-sided level alpha."""
    crit = float(stats.norm.ppf(1 - alpha / 2))
    return {"agrees": bool(ks_law_pvalue >= alpha if z_law is None else abs(z_law) <= crit),
            "distinguished": None if z_target is None else bool(abs(z_target) > crit)}


def planted_evidence(target: Backend, draft: Backend, prompt: list[int], violation: str, k: int,
                     new_tokens: int, temperature: float, seed: int, rng: np.random.Generator,
                     verify_mode: str = "batched", law: str | None = None) -> np.ndarray:
    """``position_evidence`` of every token of one planted run (``planted_run``), its
    tokens re-scored along their own sequence (``teacher_forced``) at ``temperature`` and
    read against the replay's law of ``law`` (default: the planted ``violation``); one
    position at a time, so no run's distributions are held at once."""
    ids, roles = planted_run(target, draft, prompt, violation, k, new_tokens, temperature, seed, verify_mode)
    positions = run_positions(teacher_forced(target, prompt, ids, temperature, draft), roles)
    return np.array([position_evidence(pos, x, rng.random(), law or violation) for pos, x in zip(positions, ids)])


def planted_loop_agreement(target: Backend, draft: Backend, prompts: list[list[int]], violation: str,
                           k: int, new_tokens: int, temperature: float, alpha: float, seed: int,
                           verify_mode: str = "batched") -> dict:
    """``loop_agreement`` over one planted run per prompt (seeds seed + i)."""
    rng = np.random.default_rng(seed)
    evidence = [planted_evidence(target, draft, prompt, violation, k, new_tokens, temperature, seed + i, rng,
                                 verify_mode)
                for i, prompt in enumerate(tqdm(prompts, desc=f"planted {violation}", unit="run"))]
    return {**loop_agreement(np.concatenate(evidence), violation, alpha), "runs": len(prompts)}
