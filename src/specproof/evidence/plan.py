"""``specproof plan``: how long each model-running stage of a study will take on this
machine, estimated before it runs.

The work is counted from the study config and its prompts, each prompt's length in
tokens from its target's own tokenizer. Its time is that work at the models' step costs,
measured here after loading each model once (``measure``, a few seconds a model):

    load        seconds to load the model
    prefill(L)  = a + b L ms, fitted to two prefills (``PREFILL_LENGTHS`` tokens)
    s           one position's forward (the last logits only for a draft), ms
    v(B)        one forward of B positions after a cached context, ms, B = 1..B_max

A target-only run of N new tokens on a prompt of L tokens costs prefill_t(L) + N s_t. A
speculative run at K, with acceptance ``alpha`` at every drafted position (an assumption,
``specproof plan --acceptance``: the study measures it), commits E[C] = 1 + sum_{j=1..K}
alpha^j tokens a round in N / E[C] rounds, each K c + v(K+1) for batched verification or K c + E[calls] s_t for
serialized (one call a position until the first rejection, E[calls] = sum_{j<K} alpha^j);
c is the draft's step (0 for an n-gram lookup, which may also propose fewer than K: the
estimate is then an upper bound), and the run adds the draft's prefill. N is
``max_new_tokens``: greedy runs that stop at EOS take less. Adaptive, guard and the
library rules are counted as fixed K at their configured K (their largest). The
certificate's simulations (calibration) are timed on a small repetition and scaled
(``calibration.calibration_seconds``). Not estimated: model assembly on first use, margins
(one prefill per diverging run) and the analysis and report (seconds to a minute).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from ..decode.costmodel import expected_committed
from ..models.loader import load_backend, ngram_drafter
from ..study.config import Study
from ..study.workloads import build_prompt_set, interleaved_by_workload, prompt_ids, split_of
from .advise import STUDY_K_MAX
from .micro import time_forward
from .prediction import qualification_draft

PREFILL_LENGTHS = (16, 128)  # tokens: the two prefills the linear prefill cost is fitted to


@dataclass
class Costs:
    """One model's measured costs (see the module docstring): seconds and ms."""
    load_s: float
    prefill_a: float
    prefill_b: float
    verify: dict[int, float]

    def prefill(self, length: float) -> float:
        return self.prefill_a + self.prefill_b * length

    @property
    def step(self) -> float:
        """s = v(1): one position's forward, ms."""
        return self.verify[1]

    def v(self, b: int) -> float:
        """v(B), ms; beyond the measured B, extended by the last measured slope."""
        top = max(self.verify)
        if b <= top:
            return self.verify[b]
        slope = self.verify[top] - self.verify.get(top - 1, self.verify[top])
        return self.verify[top] + slope * (b - top)


def measure(spec: dict, model_dir, text: str, b_max: int) -> tuple[Costs, object]:
    """Load the model ``spec`` names and time it (``Costs``) on ids of ``text`` repeated;
    returns the costs and the loaded backend (to tokenize the prompts with)."""
    t0 = time.perf_counter()
    backend = load_backend(spec, model_dir)
    load_s = time.perf_counter() - t0
    sample = backend.encode(text) or [0]
    ids = (sample * ((max(PREFILL_LENGTHS) + b_max) // len(sample) + 1))[:max(PREFILL_LENGTHS) + b_max]
    times = []
    for n in PREFILL_LENGTHS:
        backend.reset()
        t = time.perf_counter_ns()
        backend.forward(ids[:n], last_only=True)
        backend.synchronize()
        times.append((time.perf_counter_ns() - t) / 1e6)
    b = max((times[1] - times[0]) / (PREFILL_LENGTHS[1] - PREFILL_LENGTHS[0]), 0.0)
    ctx, block = ids[:PREFILL_LENGTHS[0]], ids[PREFILL_LENGTHS[0]:]
    verify = {n: statistics.median(time_forward(backend, ctx, block[:n], 1)) for n in range(1, b_max + 1)}
    return Costs(load_s, max(times[0] - b * PREFILL_LENGTHS[0], 0.0), b, verify), backend


def target_only_ms(t: Costs, length: int, n: int) -> float:
    """One target-only run: prefill_t(L) + N s_t, ms."""
    return t.prefill(length) + n * t.step


def speculative_ms(t: Costs, d: Costs | None, length: int, n: int, k: int, mode: str,
                   alpha: float) -> float:
    """One speculative run (module docstring): prefills + N / E[C] rounds, ms; ``d`` None
    for a model-free drafter."""
    rounds = n / expected_committed(np.full(k, alpha), k)
    c = d.step if d is not None else 0.0
    verify = t.v(k + 1) if mode == "batched" else sum(alpha ** j for j in range(k)) * t.step
    return t.prefill(length) + (d.prefill(length) if d is not None else 0.0) + rounds * (k * c + verify)


@dataclass
class Plan:
    """What the estimates read: the study, its prompts and split, each model's costs
    (``drafts[name]`` None for a model-free drafter), each prompt's length in tokens per
    target, and the assumed acceptance."""
    study: Study
    prompts: list[dict]
    discovery: list[dict]
    reserved: list[dict]
    targets: dict[str, Costs]
    drafts: dict[str, Costs | None]
    lengths: dict[str, dict[str, int]]
    alpha: float

    @property
    def n(self) -> int:
        return int(self.study.settings["max_new_tokens"])

    def length(self, target: str, rec: dict) -> int:
        return self.lengths[target][rec["id"]]

    def loads_ms(self, targets=(), drafts=()) -> float:
        """Loading these targets and (model) drafts once, ms."""
        costs = [self.targets[t] for t in targets] + [self.drafts[d] for d in drafts if self.drafts[d]]
        return 1e3 * sum(c.load_s for c in costs)

    def spec(self, target: str, draft: str, rec: dict, k: int, mode: str = "batched") -> float:
        return speculative_ms(self.targets[target], self.drafts[draft], self.length(target, rec),
                              self.n, k, mode, self.alpha)

    def target_only(self, target: str, rec: dict) -> float:
        return target_only_ms(self.targets[target], self.length(target, rec), self.n)


def _reference(p: Plan) -> float:
    return sum(p.loads_ms([t]) + sum(p.target_only(t, r) for r in p.prompts) for t in p.study.target_names)


def _micro(p: Plan) -> float:
    cfg = p.study.section("micro", max_b=16, repeats=5)
    ms = 0.0
    for t in p.study.target_names:
        c, first = p.targets[t], p.length(t, p.discovery[0])
        ms += p.loads_ms([t]) + c.prefill(first) + (cfg["repeats"] + 1) * sum(
            c.v(b) for b in range(1, cfg["max_b"] + 1))
    for d in dict.fromkeys(pair["draft"] for pair in p.study.pairs):
        if p.drafts[d] is not None:
            ms += p.loads_ms(drafts=[d]) + p.drafts[d].prefill(p.length(p.study.pairs[0]["target"], p.discovery[0])) \
                + (cfg["repeats"] * 4 + 1) * p.drafts[d].step
    return ms


def _batch_invariance(p: Plan) -> float:
    """K = 4: one call of 5 positions and 5 single ones after a prefill, per discovery prompt
    and qualified target."""
    return sum(p.loads_ms([t]) + sum(p.targets[t].prefill(p.length(t, r)) + p.targets[t].v(5)
                                     + 5 * p.targets[t].step for r in p.discovery)
               for t in p.study.qualified_targets)


def _predict(p: Plan) -> float:
    """Per qualified target: both predictors and both verify paths' live runs on each discovery
    prompt; both predictors on each reserved prompt (an upper bound: only the chosen run)."""
    k = p.study.section("qualification", k=4)["k"]
    ms = 0.0
    for t in p.study.qualified_targets:
        c, d = p.targets[t], qualification_draft(p.study, t)
        ub1 = lambda r: (p.length(t, r) + p.n) * c.step  # noqa: E731
        shape = lambda r: c.prefill(p.length(t, r)) + p.n * c.v(k + 1)  # noqa: E731
        ms += p.loads_ms([t], [d])
        ms += sum(ub1(r) + shape(r) + p.spec(t, d, r, k) + p.spec(t, d, r, k, "serialized") for r in p.discovery)
        ms += sum(ub1(r) + shape(r) for r in p.reserved)
    return ms


def _runs(p: Plan) -> float:
    """Per pair, prompt and repetition: each temperature's block, two target-only runs
    around its speculative configurations."""
    reps, ms = int(p.study.settings.get("repetitions", 1)), 0.0
    for pair in p.study.pairs:
        t, d, grid = pair["target"], pair["draft"], p.study.grid(pair["name"])
        ms += p.loads_ms([t], [d])
        for r in p.prompts:
            for temp in dict.fromkeys(c.temperature for c in grid):
                ms += reps * (2 * p.target_only(t, r) + sum(
                    p.spec(t, d, r, c.k, c.verify_mode) for c in grid if c.temperature == temp))
    return ms


def _sampled(p: Plan) -> list[tuple[dict, int]]:
    """(pair, speculative configurations at T > 0) for each pair with sampled runs."""
    out = [(pair, sum(c.temperature > 0 for c in p.study.grid(pair["name"]))) for pair in p.study.pairs]
    return [(pair, n) for pair, n in out if n]


def _pit(p: Plan) -> float:
    """Every sampled speculative run re-scored one position a call by the target and its
    draft, and one target-only control per sampled block."""
    reps, ms = int(p.study.settings.get("repetitions", 1)), 0.0
    for pair, n_spec in _sampled(p):
        t, d = p.targets[pair["target"]], p.drafts[pair["draft"]]
        blocks = len({c.temperature for c in p.study.grid(pair["name"]) if c.temperature > 0})
        ms += p.loads_ms([pair["target"]], [pair["draft"]])
        for r in p.prompts:
            L = p.length(pair["target"], r)
            control = t.prefill(L) + p.n * t.step
            drafted = control + (d.prefill(L) + p.n * d.step if d is not None else 0.0)
            ms += reps * (n_spec * drafted + blocks * control)
    return ms


def _qualification(p: Plan) -> float:
    cfg = p.study.section("qualification", repetitions=2, k=4)
    ms = 0.0
    for t in p.study.qualified_targets:
        d = qualification_draft(p.study, t)
        ms += p.loads_ms([t], [d]) + cfg["repetitions"] * sum(
            p.spec(t, d, r, cfg["k"], mode) for r in p.reserved for mode in ("batched", "serialized"))
    return ms


def _advise(p: Plan) -> float:
    """Per pair: v(B) for B = 1..K_max+1 six times and the draft step eleven; the probe
    on the discovery prompts in turn from each workload (target-only and K cycling,
    counted at 3 K_max / 4) until ``advise.probe_seconds`` is spent, at least two; the
    confirmation on them (target-only and K = min(4, K_max), the advised K unknown) until
    ``advise.confirm_seconds`` is spent, at least two unless it is 0; the check on every
    reserved prompt (the same two runs)."""
    k_probe, k_check = max(1, round(3 * STUDY_K_MAX / 4)), min(4, STUDY_K_MAX)
    budget_ms, confirm_ms = (1e3 * p.study.advise[f] for f in ("probe_seconds", "confirm_seconds"))
    ms = 0.0
    for pair in p.study.pairs:
        t, d = pair["target"], pair["draft"]
        c, dc = p.targets[t], p.drafts[d]
        ms += p.loads_ms([t], [d])
        paired = lambda r: p.target_only(t, r) + p.spec(t, d, r, k_check)  # noqa: E731
        probe = [p.target_only(t, r) + p.spec(t, d, r, k_probe) for r in interleaved_by_workload(p.discovery)]
        ms += _within_budget(probe, budget_ms, 6 * sum(c.v(b) for b in range(1, STUDY_K_MAX + 2))
                             + (11 * dc.step if dc is not None else 0.0))
        if confirm_ms > 0:
            ms += _within_budget([paired(r) for r in interleaved_by_workload(p.discovery)], confirm_ms)
        ms += sum(paired(r) for r in p.reserved)
    return ms


def _within_budget(costs: list[float], budget_ms: float, spent: float = 0.0) -> float:
    """``spent`` plus the costs (ms) taken in order until ``budget_ms`` is spent, at least
    two (as ``advise``'s probe and confirmation stop)."""
    for i, cost in enumerate(costs):
        if i >= 2 and spent >= budget_ms:
            break
        spent += cost
    return spent


def _calibration(p: Plan) -> float:
    from .calibration import calibration_seconds
    reps = int(p.study.settings.get("repetitions", 1))
    n_tokens = sum(n for _, n in _sampled(p)) * len(p.prompts) * reps * p.n
    cfg = p.study.section("certificate", calibration_repetitions=200, null_repetitions=500,
                          violation_repetitions=30, null_tokens=None)
    return 1e3 * calibration_seconds(n_tokens, max(cfg["calibration_repetitions"], cfg["null_repetitions"]),
                                     cfg["violation_repetitions"], cfg["null_tokens"],
                                     seed=int(p.study.settings["seed"]))


# the stages estimated, in the order a study runs them, and what each counts
ESTIMATES = {
    "reference": (_reference, "target-only run of every prompt, per target"),
    "micro": (_micro, "v(B) per target, draft steps"),
    "batch_invariance": (_batch_invariance, "K = 4 block per discovery prompt, per qualified target"),
    "predict": (_predict, "predictors and live paths on discovery, predictors on reserved prompts"),
    "runs": (_runs, "the timed grid: target-only brackets and speculative runs"),
    "advise": (_advise, "verify curve, probe on discovery prompts for probe_seconds, check on reserved prompts"),
    "qualification": (_qualification, "both verify paths per reserved prompt and repetition, per qualified target"),
    "pit": (_pit, "sampled runs re-scored one position a call"),
    "calibration": (_calibration, "the certificate's simulations (no model)"),
}


def _b_max(study: Study) -> int:
    """The largest call size any stage makes: micro's max_b, K + 1 of the grid, the
    qualification and advise."""
    ks = [c.k for p in study.pairs for c in study.grid(p["name"])]
    return max([study.section("micro", max_b=16)["max_b"], study.section("qualification", k=4)["k"] + 1,
                STUDY_K_MAX + 1] + [k + 1 for k in ks])


def measured_plan(study: Study, alpha: float, progress=None) -> Plan:
    """Build the study's prompt set, load each model once (one at a time) to time it,
    and count each prompt's tokens with each target's tokenizer. ``progress(name)`` is
    called before each model loads."""
    prompts = build_prompt_set(study)
    discovery, reserved = split_of(prompts, study.prediction["discovery_fraction"])
    b_max, text = _b_max(study), prompts[0]["prompt"]
    targets, lengths, drafts = {}, {}, {}
    for name in study.target_names:
        progress and progress(f"target {name}")
        targets[name], backend = measure(study.target_spec(name), study.model_dir, text, b_max)
        lengths[name] = {r["id"]: len(prompt_ids(backend, r)) for r in prompts}
        backend.close()
    for name in dict.fromkeys(p["draft"] for p in study.pairs):
        spec = study.draft_spec(name)
        if ngram_drafter(spec) is not None:
            drafts[name] = None
            continue
        progress and progress(f"draft {name}")
        drafts[name], backend = measure(spec, study.model_dir, text, 2)
        backend.close()
    return Plan(study, prompts, discovery or prompts[:1], reserved, targets, drafts, lengths, alpha)


def estimate(plan: Plan) -> list[dict]:
    """One row per estimated stage, in run order: stage, minutes, what it counts."""
    return [{"stage": name, "minutes": fn(plan) / 6e4, "counts": what}
            for name, (fn, what) in ESTIMATES.items()]
