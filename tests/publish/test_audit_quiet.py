"""The audit's timing checks compare only runs timed on a quiet machine."""
import pandas as pd
import pytest

from specproof.errors import SpecproofError
from specproof.load import BUSY_SHARE
from specproof.publish.audit.timing import prefill_consistency, quiet_runs


def _runs(k4_prefill_ms: float, share: float | None) -> pd.DataFrame:
    """Two prompts, each with two target-only runs (prefill 10 ms), speculative runs at
    K = 2 and 3 (prefill 11 ms) and one at K = 4 whose prefill is ``k4_prefill_ms`` and
    whose other_cpu_share is ``share``."""
    rows = []
    for prompt in ("p0", "p1"):
        for rep in (0, 1):
            rows.append(dict(pair="t+d", draft="d", config="target-only", path="target", prompt_id=prompt,
                             prefill_ns=10_000_000, decode_ns=50_000_000, other_cpu_share=0.01))
        for config, ms, s in (("K2", 11.0, 0.01), ("K3", 11.0, 0.01), ("K4", k4_prefill_ms, share)):
            rows.append(dict(pair="t+d", draft="d", config=config, path="speculative", prompt_id=prompt,
                             prefill_ns=int(ms * 1e6), decode_ns=40_000_000, other_cpu_share=s))
    return pd.DataFrame(rows)


@pytest.fixture(autouse=True)
def provenance(tmp_path):
    """A set whose config names no draft that runs without a model."""
    import json
    (tmp_path / "provenance.json").write_text(json.dumps({"study": {"config": {"drafts": {}}}}))


def test_a_quiet_configuration_like_its_pair_passes(tmp_path):
    prefill_consistency(tmp_path, _runs(11.0, 0.02))


def test_a_quiet_configuration_with_forged_prefill_is_refused(tmp_path):
    with pytest.raises(SpecproofError, match="field prefill_ns"):
        prefill_consistency(tmp_path, _runs(30.0, 0.02))


def test_runs_timed_while_busy_are_not_compared(tmp_path):
    runs = _runs(30.0, BUSY_SHARE + 0.3)  # another process slowed them by an unrecorded amount
    assert len(quiet_runs(runs)) == len(runs) - 2
    prefill_consistency(tmp_path, runs)


def test_runs_without_a_recorded_share_count_as_quiet():
    runs = _runs(11.0, None)
    assert len(quiet_runs(runs)) == len(runs)
    assert len(quiet_runs(runs.drop(columns="other_cpu_share"))) == len(runs)


def test_a_model_free_draft_that_prefills_more_is_refused(tmp_path):
    """Decode time moved into the prefill of every speculative configuration of an n-gram
    pair keeps the per-configuration band (they move together) but not this bound."""
    import json
    from specproof.publish.audit.timing import model_free_prefill
    runs = _runs(11.0, 0.01).assign(draft="ngram")
    runs.loc[runs["path"] == "speculative", "prefill_ns"] *= 3
    (tmp_path / "provenance.json").write_text(json.dumps(
        {"study": {"config": {"drafts": {"ngram": {"kind": "ngram", "max_ngram": 3}}}}}))
    target = runs[runs["path"] == "target"].groupby(["pair", "prompt_id"])["prefill_ns"].median()
    spec = runs[runs["path"] == "speculative"].join(target.rename("target_prefill_ns"), on=["pair", "prompt_id"])
    with pytest.raises(SpecproofError, match="draft runs no model"):
        model_free_prefill(tmp_path / "runs.parquet", spec, {"ngram"})
    model_free_prefill(tmp_path / "runs.parquet", spec, set())  # a model draft prefills its own prompt too
    with pytest.raises(SpecproofError, match="draft runs no model"):
        prefill_consistency(tmp_path, runs)
