"""The qualification's batched runs against their twins in the timed grid: a differing twin
is an error naming the row, and runs without a twin are named in the audit report (their
ids are held by the seals alone), not passed over in silence."""
import pandas as pd
import pytest

from specproof.errors import SpecproofError
from specproof.publish.audit.endpoints import check_qualification_twins


def _write(tmp_path, twin_ids=(1, 2, 3)):
    qual = pd.DataFrame([
        {"target": "t", "draft": "d", "prompt_id": p, "k": 4, "rep": 0, "verify_mode": mode, "ids": [1, 2, 3]}
        for p in ("p1", "p2") for mode in ("batched", "serialized")])
    runs = pd.DataFrame([{"run_id": "r1", "path": "speculative", "policy": "fixed", "verify_mode": "batched",
                          "temperature": 0.0, "target": "t", "draft": "d", "prompt_id": "p1", "k": 4,
                          "ids": list(twin_ids)}])
    qual.to_parquet(tmp_path / "qualification.parquet")
    runs.to_parquet(tmp_path / "runs.parquet")


def test_runs_without_a_twin_are_named_in_the_report(tmp_path):
    _write(tmp_path)
    line = check_qualification_twins(tmp_path, "s@m")
    assert line.startswith("s@m: 1 of 2 batched qualification runs have no twin in the timed grid")


def test_a_twin_with_other_ids_is_an_error(tmp_path):
    _write(tmp_path, twin_ids=(1, 2, 4))
    with pytest.raises(SpecproofError, match=r"qualification.parquet: field ids of row 0 .*differ from its twin"):
        check_qualification_twins(tmp_path, "s@m")
