"""advise: the cost-model prediction is assembled from measured parts (no timing asserted)."""
import pytest

from specproof.evidence.advise import advise
from specproof.models.mock import MockBackend
from specproof.decode.costmodel import expected_committed
from specproof.decode.drafters import ModelDrafter, NGramDrafter

import numpy as np


def test_expected_committed_uses_survival_products():
    alpha = np.array([0.9, 0.5, 0.5])
    assert expected_committed(alpha, 3) == pytest.approx(1 + 0.9 + 0.45 + 0.225)
    assert expected_committed(alpha, 1) == pytest.approx(1.9)


@pytest.mark.parametrize("drafter_kind", ["model", "ngram"])
def test_advise_table_is_consistent(drafter_kind):
    target = MockBackend(vocab_size=40, seed=1, scale=3.0, latency_ms=1.0)
    draft = MockBackend(vocab_size=40, seed=1, scale=3.0, noise=0.5)
    drafter = ModelDrafter(draft) if drafter_kind == "model" else NGramDrafter()
    res = advise(target, drafter, [[1, 2, 3, 4], [5, 6, 7]], k_max=4, probe_tokens=16, repeats=2)
    assert [r["k"] for r in res["table"]] == [1, 2, 3, 4]
    best = max(res["table"], key=lambda r: r["predicted_speedup"])
    assert res["k"] == best["k"] and res["enable"] == (best["predicted_speedup"] > 1)
    for r in res["table"]:
        assert r["round_ms"] > 0 and 1.0 <= r["expected_committed"] <= r["k"] + 1
    assert set(res["verify_ms"]) == {1, 2, 3, 4, 5}


def test_a_position_asked_for_but_not_proposed_counts_as_rejected():
    """An n-gram lookup without a match proposes nothing (k=0) or fewer than K tokens;
    per drafted position it looks perfect, per requested position it does not."""
    import pandas as pd
    from specproof.decode.costmodel import acceptance_by_position
    rounds = pd.DataFrame({"k": [0, 2, 4], "accepted": [0, 2, 4]})
    assert acceptance_by_position(rounds, 4).tolist() == [1.0, 1.0, 1.0, 1.0]
    asked = acceptance_by_position(rounds, 4, requested=pd.Series([4, 4, 4]))
    assert asked.tolist() == pytest.approx([2 / 3, 1.0, 0.5, 1.0])
    # a model drafter proposes what it is asked: both definitions agree
    full = pd.DataFrame({"k": [4, 4, 2], "accepted": [1, 4, 2]})
    assert acceptance_by_position(full, 4, requested=full["k"]).tolist() == \
        acceptance_by_position(full, 4).tolist()



def test_expected_round_cost_follows_the_proposal_lengths():
    """A round costs min(K, d) draft steps and v(min(K, d) + 1): an n-gram lookup that
    proposes nothing costs one target step, a model drafter always K steps."""
    from specproof.decode.costmodel import expected_round_ms
    verify = {1: 10.0, 2: 11.0, 3: 12.0, 4: 13.0, 5: 14.0}
    assert expected_round_ms(3, np.array([0, 0]), 2.0, verify, 0.5) == pytest.approx(10.5)
    assert expected_round_ms(3, np.array([4, 4]), 2.0, verify, 0.5) == pytest.approx(3 * 2 + 13 + 0.5)
    assert expected_round_ms(3, np.array([1, 4]), 2.0, verify, 0.0) == pytest.approx(((2 + 11) + (6 + 13)) / 2)
