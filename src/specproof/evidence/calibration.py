"""The certificate's model-side evidence, on models whose p is known exactly.

Level 1 (synthetic p, q): the acceptance step's output law, enumerated exactly, and
50,000 seeded draws against p (chi-square).
Level 2 (mock model, p known exactly): PIT of sampled speculative tokens under the
exact p, tested for uniformity.
Calibration: null p-values over seeded repetitions on the mock (uniform if the test is
valid), the rejection rate of planted violations (a sampler that skips the residual
resample; sampling at T = 1.05), and the power curve that gives the detectable TV, per
test and for the certificate's whole decision rule (``pit.rule_decision``: six tests,
each at alpha/6), which is what the certificate applies.
Level 3 (real models) is scored in ``pit`` and tested in ``analysis.certificate``.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
from scipy import stats

from ..decode.decoding import DecodeSettings, decode_speculative
from ..decode.drafters import ModelDrafter
from ..decode.policies import FixedPolicy
from ..decode.sampling import Sampler, acceptance_probability, sample_from, softmax
from ..models.mock import MockBackend
from .pit import RULE_TESTS, order_pvalues, pit_rank_values, pit_values, rule_decision, uniformity


# ---------------------------------------------------------------- level 1

class _ScriptedUniforms:
    """Stands in for np.random.Generator: ``random()`` returns the scripted values in turn,
    so the sampler's own code can be driven down each of its branches."""

    def __init__(self, *values: float):
        self._values = list(values)

    def random(self) -> float:
        return self._values.pop(0)


TEMPERATURE_VIOLATION = 1.05  # the planted violation: sampling at this times the temperature


def _switch_point(pred, iters: int = 64) -> float:
    """For pred monotone on [0, 1) (False below a point, True from it on): that point, to
    within 2^-iters; 1.0 when pred never holds."""
    if not pred(np.nextafter(1.0, 0.0)):
        return 1.0
    lo, hi = 0.0, np.nextafter(1.0, 0.0)
    if pred(lo):
        return 0.0
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if pred(mid) else (mid, hi)
    return hi


def step_distribution(sampler: Sampler, logits: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The exact law of ``sampler.verify_token(logits, x, q, rng)`` with x ~ q, measured on
    the sampler's own code. verify_token draws u ~ U[0, 1) and accepts x iff u lies below a
    threshold a(x); on rejection it draws the residual token by inverse CDF from a second
    uniform u2, a step function of u2 that does not decrease. Bisection on scripted
    uniforms finds a(x) and every step of u2, so
        P(y) = sum_x q(x) [a(x) 1(y = x) + (1 - a(x)) |{u2 : token(u2) = y}|]
    up to 2^-64 per breakpoint (Leviathan et al. 2023, Theorem 1: P = p)."""
    v = len(q)
    out = np.zeros(v)
    for x in map(int, np.flatnonzero(q)):
        a = _switch_point(lambda u: not sampler.verify_token(logits, x, q, _ScriptedUniforms(u, 0.0))[0])
        out[x] += q[x] * a
        if a >= 1.0:
            continue
        u_reject = (a + 1.0) / 2
        token = lambda u2: sampler.verify_token(logits, x, q, _ScriptedUniforms(u_reject, u2))[1]
        edges = [0.0] + [_switch_point(lambda u2, y=y: token(u2) >= y) for y in range(1, v)] + [1.0]
        out += q[x] * (1.0 - a) * np.diff(edges)
    return out


def _random_dist(rng, v, support=None):
    p = rng.gamma(0.5, size=v)
    if support is not None:
        p[rng.permutation(v)[support:]] = 0.0
    return p / p.sum()


def level1_case(v: int, p_support: int, q_support: int, p: np.ndarray, q: np.ndarray,
                counts: np.ndarray, sampler: Sampler | None = None) -> dict:
    """One level-1 case from its distributions and the tally of its draws: the largest
    error max_y |P(y) - p(y)| (probability) of the exact law of ``sampler``'s step, measured
    on its own code (``step_distribution``, T = 1), and the chi-square p-value of the counts
    against draws * p over p's support. The audit recomputes it from level1.parquet."""
    p, q, counts = (np.asarray(x, dtype=np.float64) for x in (p, q, counts))
    sampler = sampler or Sampler(1.0)
    draws = int(counts.sum())
    sup = p > 1e-12
    chi = stats.chisquare(counts[sup], draws * p[sup] / p[sup].sum())
    logits = np.log(np.where(p > 0, p, 1e-300))  # T = 1 softmax recovers p
    exact = step_distribution(sampler, logits, q)
    return {"vocab": int(v), "p_support": int(p_support), "q_support": int(q_support),
            "exact_max_abs_error": float(np.abs(exact - p).max()), "draws": draws,
            "chi2_pvalue": float(chi.pvalue), "mass_outside_support": float(counts[~sup].sum())}


def level1_summary(cases: list[dict]) -> dict:
    return {"cases": cases, "max_exact_error": max(c["exact_max_abs_error"] for c in cases),
            "min_chi2_pvalue": min(c["chi2_pvalue"] for c in cases)}


def level1(seed: int, draws: int = 50_000, records: list | None = None,
           sampler: Sampler | None = None) -> dict:
    """Level 1 on synthetic (p, q): the exact law of ``sampler``'s accept/reject step against
    p, and a chi-square of seeded draws of the whole step. ``records``, when given, receives
    one row per case and token: the case's p, q and how many of its draws gave that token
    (the raw record level1.parquet)."""
    sampler = sampler or Sampler(1.0)
    rng = np.random.default_rng(seed)
    cases = [(8, None, None), (8, 4, None), (8, None, 3), (16, 6, 6)]
    out = []
    for v, ps, qs in cases:
        p, q = _random_dist(rng, v, ps), _random_dist(rng, v, qs)
        logits = np.log(np.where(p > 0, p, 1e-300))  # T = 1 softmax recovers p
        draw_rng = np.random.default_rng(seed + v)
        counts = np.zeros(v)
        for _ in range(draws):
            x = sample_from(q, draw_rng.random())
            counts[sampler.verify_token(logits, x, q, draw_rng)[1]] += 1
        out.append(level1_case(v, ps or v, qs or v, p, q, counts, sampler))
        if records is not None:
            records += [{"case": len(out) - 1, "vocab": v, "p_support": ps or v, "q_support": qs or v,
                         "token": t, "p": float(p[t]), "q": float(q[t]), "count": int(counts[t])}
                        for t in range(v)]
    return level1_summary(out)


# ---------------------------------------------------------------- level 2, calibration

MOCK = dict(vocab_size=32, seed=5, scale=2.5)


def mock_pair(seed: int) -> tuple[MockBackend, MockBackend]:
    return (MockBackend(**{**MOCK, "seed": seed}),
            MockBackend(**{**MOCK, "seed": seed}, noise=1.2))


class SkipResidualSampler(Sampler):
    """A planted violation: on rejection, draw from p instead of norm(max(0, p - q))."""

    def verify_token(self, logits, drafted, q, rng):
        p = softmax(logits, self.temperature)
        if rng.random() < acceptance_probability(p, q, drafted):
            return True, drafted
        return False, sample_from(p, rng.random())


def mock_pit(target: MockBackend, prompt: list[int], tokens: list[int], temperature: float,
             rng: np.random.Generator, draft: MockBackend | None = None) -> np.ndarray:
    """PIT under the mock target's exact p along the emitted sequence; columns: id
    order, rank order (p descending) and, with the draft, ratio order (q/p descending:
    the direction in which skipping the residual resample moves mass)."""
    ctx = list(prompt)
    rows, qrows = [], []
    for x in tokens:
        rows.append(softmax(target.logits_for(ctx), temperature))
        if draft is not None:
            qrows.append(softmax(draft.logits_for(ctx), temperature))
        ctx.append(int(x))
    probs, toks, v = np.array(rows), np.array(tokens), rng.random(len(tokens))
    cols = [pit_values(probs, toks, v), pit_rank_values(probs, toks, v)]
    if draft is not None:
        ratio = np.array(qrows) / np.clip(probs, 1e-300, None)
        cols.append(pit_rank_values(probs, toks, v, key=ratio))
    return np.stack(cols, axis=1)


def _spec_tokens(target, draft, n_tokens, temperature, seed, sampler_cls=Sampler,
                 decode_temperature=None):
    """Sampled speculative tokens (K = 4) from the mock pair over several prompts, the
    accept/reject step done by ``sampler_cls(decode_temperature)`` (a planted violation
    or the real ``Sampler``) and scored at ``temperature``."""
    decode_temperature = temperature if decode_temperature is None else decode_temperature
    rng = np.random.default_rng(seed)
    us, done, i = [], 0, 0
    while done < n_tokens:
        prompt = rng.integers(0, target.vocab_size, size=6).tolist()
        n = min(64, n_tokens - done)
        s = DecodeSettings(n, decode_temperature, seed * 1000 + i, stop_at_eos=False)
        r = decode_speculative(target, ModelDrafter(draft, decode_temperature, seed * 1000 + i),
                               prompt, s, FixedPolicy(4), sampler=sampler_cls(decode_temperature))
        us.append(mock_pit(target, prompt, r.new_ids, temperature, rng, draft))
        done += r.new_tokens
        i += 1
    return np.concatenate(us)


def level2_tests(u: np.ndarray) -> dict:
    """Uniformity of level 2's PIT values, columns id, rank and ratio order."""
    u = np.asarray(u, dtype=np.float64)
    return {**uniformity(u[:, 0]), "rank_order": uniformity(u[:, 1]), "ratio_order": uniformity(u[:, 2])}


LEVEL2_COLUMNS = ["u", "u_rank", "u_ratio"]


def level2(seed: int, n_tokens: int = 4000, records: list | None = None) -> dict:
    """``records``, when given, receives the PIT values (one row per token, LEVEL2_COLUMNS:
    the raw record level2.parquet)."""
    target, draft = mock_pair(seed)
    u = _spec_tokens(target, draft, n_tokens, 1.0, seed)
    if records is not None:
        records += [dict(zip(LEVEL2_COLUMNS, map(float, row))) for row in u]
    return {"model": "mock", **MOCK, "draft_noise": 1.2, "k": 4, "temperature": 1.0, **level2_tests(u)}


def _tempered_draws(rng: np.random.Generator, n_tokens: int, delta: float):
    """n_tokens i.i.d. mock positions: logits, p at T = 1, p_bad at T(1 + delta), tokens x
    drawn from p_bad, and the PIT's V per position."""
    logits = MOCK["scale"] * rng.standard_normal((n_tokens, MOCK["vocab_size"]))
    p, p_bad = softmax(logits, 1.0), softmax(logits, 1.0 + delta)
    cdf = np.cumsum(p_bad, axis=1)
    x = (cdf < rng.random((n_tokens, 1)) * cdf[:, -1:]).sum(axis=1).clip(0, MOCK["vocab_size"] - 1)
    return logits, p, p_bad, x, rng.random(n_tokens)


def _noisy_draft(rng: np.random.Generator, logits: np.ndarray) -> np.ndarray:
    """q: a draft of the same logits with noise, as the mock pair's draft (noise 1.2)."""
    return softmax(logits + 1.2 * rng.standard_normal(logits.shape), 1.0)


def _temperature_power(n_tokens: int, deltas, reps: int, alpha: float, seed: int,
                       order: str, records: list | None = None) -> list[dict]:
    """Power of the KS-PIT test against sampling at T(1 + delta) instead of T = 1, at
    n_tokens i.i.d. mock positions; TV is the mean per-token total variation.
    ``records``, when given, receives one row per repetition (order, delta, rep,
    tv_per_token, ks_pvalue: the raw record calibration_power.parquet)."""
    rng = np.random.default_rng(seed)
    out = []
    for delta in deltas:
        rejections, tvs = 0, []
        for rep in range(reps):
            logits, p, p_bad, x, v_ = _tempered_draws(rng, n_tokens, delta)
            if order == "id":
                u = pit_values(p, x, v_)
            elif order == "rank":
                u = pit_rank_values(p, x, v_)
            else:
                u = pit_rank_values(p, x, v_, key=_noisy_draft(rng, logits) / p)
            pvalue = float(stats.kstest(u, "uniform").pvalue)
            rejections += pvalue < alpha
            tvs.append(float(0.5 * np.abs(p - p_bad).sum(axis=1).mean()))
            if records is not None:
                records.append({"order": order, "delta": float(delta), "rep": rep,
                                "tv_per_token": tvs[-1], "ks_pvalue": pvalue})
        out.append({"delta": float(delta), "tv_per_token": float(np.mean(tvs)),
                    "power": rejections / reps})
    return out


def _rule_power(n_tokens: int, deltas, reps: int, alpha: float, seed: int,
                records: list | None = None) -> list[dict]:
    """Power of the whole rule (KS and chi-square in id, rank and ratio order, each at
    alpha/6) against sampling at T(1 + delta) instead of T = 1, at n_tokens i.i.d. mock
    positions, every position a drafted one (ratio key q/p with q a noisy draft of the
    same logits, as in the mock pair); TV is the mean per-token total variation
    0.5 sum_y |p(y) - p_bad(y)|. ``records`` receives one row per repetition with order
    'rule' and, as ``ks_pvalue``, the family's Bonferroni-adjusted p-value min(1, m min p),
    which is below alpha exactly when the rule rejects (so ``power_curve`` recounts it)."""
    rng = np.random.default_rng(seed)
    out = []
    for delta in deltas:
        rejections, tvs = 0, []
        for _ in range(reps):
            logits, p, p_bad, x, v_ = _tempered_draws(rng, n_tokens, delta)
            pvals = order_pvalues_of(p, x, v_, _noisy_draft(rng, logits) / p)
            decision = rule_decision(pvals, alpha)
            rejections += decision["rejected"]
            tvs.append(float(0.5 * np.abs(p - p_bad).sum(axis=1).mean()))
            if records is not None:
                records.append({"order": "rule", "delta": float(delta), "rep": len(tvs) - 1,
                                "tv_per_token": tvs[-1],
                                "ks_pvalue": min(1.0, decision["tests"] * decision["min_pvalue"])})
        out.append({"delta": float(delta), "tv_per_token": float(np.mean(tvs)),
                    "power": rejections / reps})
    return out


def order_pvalues_of(p: np.ndarray, x: np.ndarray, v: np.ndarray, ratio: np.ndarray) -> dict:
    """RULE_TESTS p-values of tokens x under rows of p, one V per position for all orders."""
    return order_pvalues(pit_values(p, x, v), pit_rank_values(p, x, v), pit_rank_values(p, x, v, key=ratio))


def detectable_tv(curve: list[dict], target_power: float = 0.8) -> float:
    """Smallest TV at which power reaches target_power (linear interpolation)."""
    pts = sorted((c["tv_per_token"], c["power"]) for c in curve)
    for (tv0, pw0), (tv1, pw1) in zip(pts, pts[1:]):
        if pw0 < target_power <= pw1:
            return float(tv0 + (target_power - pw0) * (tv1 - tv0) / (pw1 - pw0))
    if pts and pts[0][1] >= target_power:
        return float(pts[0][0])
    return float("nan")


def power_curve(records: pd.DataFrame, alpha: float) -> list[dict]:
    """The power curve from its repetitions (one order): per delta, power = the share of
    repetitions whose KS p-value is below alpha, TV = the mean per-token TV."""
    out = []
    for delta, g in records.groupby("delta", sort=True):
        out.append({"delta": float(delta), "tv_per_token": float(np.mean(g["tv_per_token"].tolist())),
                    "power": int((g["ks_pvalue"] < alpha).sum()) / len(g)})
    return out


POWER_DELTAS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64)  # T(1 + delta): the power curves' violations
POWER_REPS = 60  # repetitions per delta of each power curve
POWER_ORDERS = ("id", "rank", "ratio")  # the single-order curves; the whole rule's is the fourth


def token_counts(n_tokens: int, null_tokens: int | None) -> tuple[int, int]:
    """(violation, null) tokens per calibration repetition: the study's count capped to
    200..3,000, and the null's at most that (see ``calibrate``)."""
    n_cal = max(200, min(n_tokens, 3000))
    return n_cal, n_cal if null_tokens is None else max(200, min(null_tokens, n_cal))


def calibration_seconds(n_tokens: int, reps: int, violation_reps: int, null_tokens: int | None,
                        seed: int, probe_tokens: int = 400) -> float:
    """``calibrate``'s time, estimated from one timed repetition of each kind at
    ``probe_tokens`` tokens: speculative mock tokens (reps x n_null + 2 x violation_reps x
    n_cal) at the probe's seconds per token, and power-curve tokens (len(POWER_DELTAS) x
    POWER_REPS x max(n_tokens, 50), per curve) at each curve's probe seconds per token."""
    n_cal, n_null = token_counts(n_tokens, null_tokens)
    target, draft = mock_pair(seed)
    t0 = time.perf_counter()
    _spec_tokens(target, draft, probe_tokens, 1.0, seed)
    per_spec = (time.perf_counter() - t0) / probe_tokens
    t0 = time.perf_counter()
    for order in POWER_ORDERS:
        _temperature_power(probe_tokens, POWER_DELTAS[:1], 1, 0.05, seed, order)
    _rule_power(probe_tokens, POWER_DELTAS[:1], 1, 0.05, seed)
    per_power = (time.perf_counter() - t0) / probe_tokens
    curve_tokens = len(POWER_DELTAS) * POWER_REPS * max(n_tokens, 50)
    return per_spec * (reps * n_null + 2 * violation_reps * n_cal) + per_power * curve_tokens


def calibrate(n_tokens: int, reps: int, alpha: float, seed: int,
              violation_reps: int = 30, null_tokens: int | None = None,
              power_records: list | None = None) -> tuple[pd.DataFrame, dict]:
    """Null p-values over ``reps`` seeded repetitions (uniform if the test is valid),
    rejection rates of planted violations over ``violation_reps``, and the power curves
    (per order, and of the whole rule) for the detectable TV (``power_records`` receives
    their repetitions, see ``_temperature_power``). Violations are drawn at the study's
    token count (capped at 3,000 to keep a repetition cheap on 2 cores); null repetitions
    at ``null_tokens`` (default the same count): KS is exact at any n and the 10-bin
    chi-square needs only n >= 50 (expected count >= 5 per bin), so a cheaper null still
    measures the rule's size; the table records each repetition's token count."""
    n_cal, n_null = token_counts(n_tokens, null_tokens)
    target, draft = mock_pair(seed)
    rows = []
    scenarios = [("null", reps, Sampler, None, n_null),
                 ("skip_residual", violation_reps, SkipResidualSampler, None, n_cal),
                 (f"temperature_{TEMPERATURE_VIOLATION}", violation_reps, Sampler, TEMPERATURE_VIOLATION, n_cal)]
    for name, n_rep, cls, dec_t, n in scenarios:
        for rep in range(n_rep):
            u = _spec_tokens(target, draft, n, 1.0, seed + 7 * rep + 1, cls, dec_t)
            res, res_rank, res_ratio = uniformity(u[:, 0]), uniformity(u[:, 1]), uniformity(u[:, 2])
            rows.append({"scenario": name, "rep": rep, "n_tokens": res["n_tokens"],
                         "ks_pvalue": res["ks_pvalue"], "chi2_pvalue": res["chi2_pvalue"],
                         "rank_ks_pvalue": res_rank["ks_pvalue"],
                         "rank_chi2_pvalue": res_rank["chi2_pvalue"],
                         "ratio_ks_pvalue": res_ratio["ks_pvalue"],
                         "ratio_chi2_pvalue": res_ratio["chi2_pvalue"]})
    table = pd.DataFrame(rows)
    curves = {o: _temperature_power(max(n_tokens, 50), POWER_DELTAS, POWER_REPS, alpha, seed, o, power_records)
              for o in POWER_ORDERS}
    curves["rule"] = _rule_power(max(n_tokens, 50), POWER_DELTAS, POWER_REPS, alpha, seed, records=power_records)
    return table, summarize_calibration(table, curves, alpha, n_tokens)


def rule_calibration(table: pd.DataFrame, alpha: float, ratio: bool = True,
                     level: float = 0.95) -> dict:
    """The whole rule's rejection rate per scenario of a calibration table (its six
    p-value columns, each test at alpha/6; with ``ratio=False`` the four id- and
    rank-order tests at alpha/4, the rule of a certificate without the ratio order),
    with a ``level`` Clopper-Pearson interval (scipy.stats.binomtest) on the rate: under the
    null it estimates the rule's size, under a planted violation its power at the
    table's token count."""
    columns = [c for _, c in RULE_TESTS if ratio or not c.startswith("ratio_")]
    out = {}
    for name, g in table.groupby("scenario", sort=False):
        rejected = sum(rule_decision(r, alpha)["rejected"]
                       for r in g[columns].to_dict(orient="records"))
        ci = stats.binomtest(int(rejected), len(g)).proportion_ci(level, method="exact")
        out[name] = {"repetitions": int(len(g)), "tokens_per_repetition": int(g["n_tokens"].iloc[0]),
                     "rejections": int(rejected), "rejection_rate": rejected / len(g),
                     "ci_low": float(ci.low), "ci_high": float(ci.high)}
    return out


def summarize_calibration(table: pd.DataFrame, curves: dict, alpha: float, n_tokens: int) -> dict:
    """Null uniformity of p-values and violation rejection rates, for both orders; a
    violation counts as rejected when the KS or the chi-square p-value is below alpha/2
    (Bonferroni over the two tests)."""
    out = {"alpha": alpha, "n_tokens_study": n_tokens,
           "tokens_per_repetition": int(table["n_tokens"].iloc[0]),
           "power_family": "sampling at temperature T(1+delta) instead of T = 1 (mock, i.i.d. positions)",
           "power_curve": curves, "orders": {}}
    for order, ks, chi in (("id", "ks_pvalue", "chi2_pvalue"), ("rank", "rank_ks_pvalue", "rank_chi2_pvalue"),
                           ("ratio", "ratio_ks_pvalue", "ratio_chi2_pvalue")):
        null = table[table["scenario"] == "null"]
        res = {"null_repetitions": int(len(null)),
               "null_pvalues_ks_pvalue": float(stats.kstest(null[ks], "uniform").pvalue),
               "null_rejection_rate": float((np.minimum(null[ks], null[chi]) < alpha / 2).mean()),
               "violations": {}, "detectable_tv_80": detectable_tv(curves[order])}
        for name, g in table[table["scenario"] != "null"].groupby("scenario"):
            res["violations"][name] = {"repetitions": int(len(g)), "rejection_rate":
                                       float((np.minimum(g[ks], g[chi]) < alpha / 2).mean())}
        out["orders"][order] = res
    tests = len(RULE_TESTS)
    out["rule"] = {"tests": tests, "level": alpha / tests, "scenarios": rule_calibration(table, alpha),
                   "detectable_tv_80": detectable_tv(curves["rule"]) if "rule" in curves else float("nan")}
    out["detectable_tv_80"] = out["orders"]["rank"]["detectable_tv_80"]
    out["detectable_tv_80_id_order"] = out["orders"]["id"]["detectable_tv_80"]
    return out
