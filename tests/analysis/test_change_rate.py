"""The per-token rate at which a verify path first changes a greedy output: changed runs
over the tokens compared up to each run's first change, with an exact interval."""
import pandas as pd
from scipy.stats import binomtest

from specproof.analysis.agreement import change_rate


def _reference(**ids):
    return pd.DataFrame([{"target": "t", "prompt_id": p, "ids": v, "text": ""} for p, v in ids.items()])


def _runs(mode, **ids):
    return [{"target": "t", "verify_mode": mode, "prompt_id": p, "ids": v} for p, v in ids.items()]


def test_a_changed_run_counts_its_tokens_up_to_its_first_change():
    ref = _reference(a=[1, 2, 3, 4], b=[5, 6, 7, 8])
    qual = pd.DataFrame(_runs("batched", a=[1, 2, 9, 9], b=[5, 6, 7, 8])
                        + _runs("serialized", a=[1, 2, 3, 4], b=[5, 6, 7, 8]))
    r = change_rate(qual, ref).set_index("verify_mode")
    # batched: a changes at index 2 (3 tokens compared), b is equal (4): 1 change in 7 tokens
    assert (r.loc["batched", "changed"], r.loc["batched", "tokens"]) == (1, 7)
    assert r.loc["batched", "rate"] == 1 / 7
    ci = binomtest(1, 7).proportion_ci(0.95, "exact")
    assert (r.loc["batched", "ci_low"], r.loc["batched", "ci_high"]) == (ci.low, ci.high)
    assert (r.loc["serialized", "changed"], r.loc["serialized", "tokens"], r.loc["serialized", "rate"]) == (0, 8, 0)


def test_the_rate_does_not_grow_with_the_output_length():
    """One change at the same position of a short and of a long output: the share of
    changed runs is the same, and so is the rate, which counts tokens up to the change."""
    short = change_rate(pd.DataFrame(_runs("batched", a=[1, 9])), _reference(a=[1, 2]))
    long = change_rate(pd.DataFrame(_runs("batched", a=[1, 9] + [3] * 8)), _reference(a=[1, 2] + [3] * 8))
    assert short["rate"].item() == long["rate"].item() == 1 / 2


def test_a_run_that_stops_early_changes_where_it_stops():
    r = change_rate(pd.DataFrame(_runs("batched", a=[1, 2])), _reference(a=[1, 2, 3]))
    assert (r["changed"].item(), r["tokens"].item()) == (1, 3)
