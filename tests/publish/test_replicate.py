"""The replicate comparison: target-only drift over the shared prompts (paired by id) and,
per greedy configuration, whether the replicate's verdict is the head set's."""
import dataclasses

import numpy as np
import pandas as pd
import pytest

from specproof.analysis.analyze import analyze
from specproof.errors import ConfigError, SpecproofError
from specproof.publish.replicate import replicate_numbers, replicates_of

HEAD = "paper-qwen-v2@epyc-avx512"  # the head set config.yaml lists first
PAIR = "qwen-1b5+qwen-0b5-draft"


@pytest.fixture(scope="module")
def head():
    return analyze("manifests/paper-qwen-v2/epyc-avx512")


def _rows(head, rep):
    rows = replicate_numbers(head, rep, HEAD, "rep@m", None)
    return {(r.get("config"), r["metric"]): r["value"] for r in rows.values() if r["pair"] == PAIR}


def _rerun(head, runs=None, **changes):
    """The head set as a later rerun (run ids are deterministic: a rerun repeats them),
    started two hours later."""
    runs = (head.runs if runs is None else runs).copy()
    runs["started_at"] = (pd.to_datetime(runs["started_at"], utc=True) + pd.Timedelta(hours=2)).astype(str)
    return dataclasses.replace(head, runs=runs, **changes)


def test_an_unchanged_rerun_drifts_by_nothing_and_keeps_every_verdict(head):
    v = _rows(head, _rerun(head))
    assert v[(None, "ratio_gmean")] == pytest.approx(1.0)
    assert v[(None, "hours_after")] == pytest.approx(2.0)
    assert v[(None, "prompts")] == head.runs.loc[head.runs["pair"] == PAIR, "prompt_id"].nunique()
    assert v[(None, "verdicts")] == v[(None, "verdicts_surviving")] > 6
    assert v[("K1-fixed-batched-T0", "head_shared_gmean")] == pytest.approx(v[("K1-fixed-batched-T0", "head_gmean")])


def test_a_set_is_not_its_own_replicate(head):
    with pytest.raises(SpecproofError, match="a replicate runs later"):  # a copy of the set
        replicate_numbers(head, head, HEAD, "rep@m", None)
    earlier = _rerun(head)
    earlier.runs["started_at"] = (pd.to_datetime(head.runs["started_at"], utc=True) - pd.Timedelta(hours=1)).astype(str)
    with pytest.raises(SpecproofError, match="a replicate runs later"):
        replicate_numbers(head, earlier, HEAD, "rep@m", None)
    with pytest.raises(ConfigError, match="cannot replicate itself"):
        replicates_of({"replicates": [{"set": HEAD, "of": HEAD}]}, [HEAD], "config/config.yaml")


def test_drift_is_the_paired_ratio_over_shared_prompts_and_a_changed_verdict_is_named(head):
    runs = head.runs.copy()
    rng = np.random.default_rng(0)
    target = runs["path"] == "target"
    runs.loc[target, "tokens_per_s"] *= 0.5 * np.exp(rng.normal(0, 0.05, target.sum()))
    runs = runs[~runs["prompt_id"].isin(sorted(runs["prompt_id"].unique())[:10])]  # fewer prompts
    speedups = [dict(s, ci_low=1.1, ci_high=1.3) if s["config"] == "K1-fixed-batched-T0" and s["pair"] == PAIR
                else s for s in head.speedups]
    v = _rows(head, _rerun(head, runs, speedups=speedups))
    assert v[(None, "prompts")] == runs.loc[runs["pair"] == PAIR, "prompt_id"].nunique()
    assert v[(None, "ratio_gmean")] == pytest.approx(0.5, rel=0.05)
    assert v[(None, "ratio_ci_low")] < v[(None, "ratio_gmean")] < v[(None, "ratio_ci_high")]
    assert v[("K1-fixed-batched-T0", "replicate_verdict")] == "faster"
    assert v[("K1-fixed-batched-T0", "survives")] is False
    assert v[(None, "verdicts_surviving")] == v[(None, "verdicts")] - 1
    # the first run's speedup on the shared prompts only differs from its speedup on all of them
    assert v[("K1-fixed-batched-T0", "head_shared_gmean")] != v[("K1-fixed-batched-T0", "head_gmean")]


def test_a_replicate_must_be_a_listed_set():
    with pytest.raises(ConfigError, match=r"replicates\.0\.set"):
        replicates_of({"replicates": [{"set": "rep@m", "of": HEAD}]}, [HEAD], "config/config.yaml")
    assert replicates_of({"replicates": [{"set": "rep@m", "of": HEAD}]}, [HEAD, "rep@m"], "c") == [("rep@m", HEAD)]
