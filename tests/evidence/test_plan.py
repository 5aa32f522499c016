"""specproof plan: the work a study's stages do, counted from its config and prompts, at
measured step costs; what it prints and how it refuses bad input."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specproof.evidence import plan as P
from specproof.evidence.calibration import token_counts
from specproof.study.config import load_study
from specproof.study.workloads import build_prompt_set, split_of

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "studies" / "tiny-mock.yaml"
TARGET = P.Costs(load_s=0.0, prefill_a=1.0, prefill_b=0.1, verify={1: 10.0, 2: 12.0, 3: 14.0})
DRAFT = P.Costs(load_s=0.0, prefill_a=0.5, prefill_b=0.05, verify={1: 2.0, 2: 3.0})


def test_speculative_run_batched_and_serialized():
    # alpha 0.5, K 2: E[C] = 1.75 tokens a round, 8 tokens in 8 / 1.75 rounds
    prefills = (1.0 + 0.1 * 10) + (0.5 + 0.05 * 10)
    batched = P.speculative_ms(TARGET, DRAFT, 10, 8, 2, "batched", 0.5)
    assert batched == pytest.approx(prefills + 8 / 1.75 * (2 * 2.0 + 14.0))
    serialized = P.speculative_ms(TARGET, DRAFT, 10, 8, 2, "serialized", 0.5)
    assert serialized == pytest.approx(prefills + 8 / 1.75 * (2 * 2.0 + 1.5 * 10.0))
    # an n-gram lookup: no draft step, no draft prefill
    assert P.speculative_ms(TARGET, None, 10, 8, 2, "batched", 0.5) == pytest.approx(2.0 + 8 / 1.75 * 14.0)
    assert P.target_only_ms(TARGET, 10, 8) == pytest.approx(2.0 + 80.0)


def test_verify_cost_extends_past_the_measured_sizes():
    assert TARGET.v(3) == 14.0
    assert TARGET.v(5) == pytest.approx(18.0)  # the last slope, 2 ms a position
    assert TARGET.step == 10.0


def _plan(alpha: float = 0.8) -> P.Plan:
    study = load_study(TINY)
    prompts = build_prompt_set(study)
    discovery, reserved = split_of(prompts, study.prediction["discovery_fraction"])
    lengths = {t: {r["id"]: 10 for r in prompts} for t in study.target_names}
    return P.Plan(study, prompts, discovery, reserved, {"mock-a": TARGET, "mock-b": TARGET},
                  {"mock-d": DRAFT, "ngram": None}, lengths, alpha)


def test_the_grid_counts_every_block_with_its_two_target_only_runs():
    p = _plan()
    # per pair and prompt: T = 0 (K 2, K 3) and T = 1 (K 2), each block bracketed by two target-only runs
    per_prompt = {d: 2 * 2 * P.target_only_ms(TARGET, 10, 8)
                  + sum(P.speculative_ms(TARGET, p.drafts[d], 10, 8, k, "batched", 0.8) for k in (2, 3, 2))
                  for d in ("mock-d", "ngram")}
    assert P._runs(p) == pytest.approx(len(p.prompts) * sum(per_prompt.values()))


def test_higher_acceptance_means_a_shorter_grid_and_no_sampled_runs_no_scoring():
    assert P._runs(_plan(0.9)) < P._runs(_plan(0.5))
    p = _plan()
    assert P._pit(p) > 0
    p.study.data["grid"] = [b for b in p.study.data["grid"] if b["temperature"] == [0.0]]
    assert P._pit(p) == 0


def test_the_verify_paths_are_counted_on_the_qualified_targets_only():
    """tiny-mock qualifies mock-b only: batch_invariance, predict and qualification cost
    what they cost for a study of mock-b's pair alone, less than for both targets."""
    p, every, alone = _plan(), _plan(), _plan()
    del every.study.data["qualification"]["targets"]
    alone.study.data["pairs"] = [q for q in alone.study.data["pairs"] if q["target"] == "mock-b"]
    for stage in (P._batch_invariance, P._predict, P._qualification):
        assert stage(p) == pytest.approx(stage(alone)) and stage(p) < stage(every), stage.__name__


def test_every_stage_is_estimated_in_run_order():
    p = _plan()
    rows = [r for r in P.estimate(p) if r["stage"] != "calibration"]
    assert [r["stage"] for r in rows] == [s for s in P.ESTIMATES if s != "calibration"]
    assert all(r["minutes"] > 0 for r in rows)


def test_calibration_token_counts():
    assert token_counts(10, None) == (200, 200)
    assert token_counts(50_000, None) == (3000, 3000)
    assert token_counts(50_000, 500) == (3000, 500)


def test_plan_command_measures_the_mock_study():
    res = subprocess.run([sys.executable, "-m", "specproof.cli", "plan", "--config", str(TINY), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert [s["stage"] for s in out["stages"]] == list(P.ESTIMATES)
    assert out["total_minutes"] == pytest.approx(sum(s["minutes"] for s in out["stages"]))
    assert "plan: timing target mock-a" in res.stderr


@pytest.mark.parametrize("value", ["1", "-0.1"])
def test_plan_refuses_an_acceptance_outside_0_1(value):
    res = subprocess.run([sys.executable, "-m", "specproof.cli", "plan", "--config", str(TINY),
                          "--acceptance", value], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [f"specproof: error: --acceptance: must be in [0, 1) (got {float(value):g})"]
