"""numbers.json rows carry named fields; the paper selects by them, never by splitting ids."""
import re
from pathlib import Path

import pytest

from specproof.publish.numbers import Rows, compare
from specproof.records import read_json

ROOT = Path(__file__).resolve().parents[2]


def test_a_name_with_dots_is_filed_under_its_own_fields():
    rows = Rows("qwen2.5-study@m.1", "abc")
    rows.at("speedup", {"k": 1}, pair="qwen2.5-1.5b+qwen2.5-0.5b", config="K1", workload="all")(
        "gmean", 0.9, "x", "runs.parquet")
    (row_id, row), = rows.out.items()
    assert row_id == "qwen2.5-study@m.1.speedup.qwen2.5-1.5b+qwen2.5-0.5b.K1.all.gmean"
    assert (row["set"], row["group"], row["pair"], row["config"], row["workload"], row["k"], row["metric"]) == (
        "qwen2.5-study@m.1", "speedup", "qwen2.5-1.5b+qwen2.5-0.5b", "K1", "all", 1, "gmean")


def test_two_rows_with_one_id_are_an_error():
    put = Rows("s").at("best", pair="a")
    put("k", 1, "K", "runs.parquet")
    with pytest.raises(ValueError, match="two rows with the id s.best.a.k"):
        put("k", 2, "K", "runs.parquet")


def test_the_audit_compares_the_fields_a_paper_selects_by():
    rows = Rows("s", "h")
    rows.at("qualification", target="t", verify_mode="batched")("verdict", "fails", "text", "qualification.parquet")
    forged = {k: {**v, "verify_mode": "serialized"} for k, v in rows.out.items()}
    assert compare(forged, rows.out) == ("s.qualification.t.batched.verdict: numbers.json files it under "
                                         "verify_mode = 'serialized', qualification.parquet gives 'batched'")


def test_every_committed_row_has_a_group_and_a_metric_and_its_set_in_its_id():
    numbers = read_json(ROOT / "paper" / "build" / "numbers.json")
    for row_id, row in numbers.items():
        assert row["group"] and row["metric"], row_id
        assert row_id.endswith("." + row["metric"]) and row_id.startswith(row.get("set", row["group"])), row_id


def test_the_paper_never_splits_a_key_label_or_pair_name():
    code = [line.split("//")[0] for line in (ROOT / "paper" / "paper.typ").read_text().splitlines()
            if not line.startswith("#let fixed(")]  # number formatting splits a number's digits
    assert not [line for line in code if re.search(r"\.split\(|\bpart\(", line)]


def test_the_report_never_splits_a_key_label_or_pair_name():
    """The generic per-study report selects rows by field too: no id is split into its parts
    (number formatting splits a number's digits), and no row is found by scanning ids."""
    code = [line.split("//")[0] for line in (ROOT / "workflow" / "report" / "report.typ").read_text().splitlines()
            if not line.startswith("#let fixed(")]
    assert not [line for line in code if re.search(r"\.split\(|\bpart\(|\.keys\(\)", line)]


def test_a_path_field_cannot_take_the_name_of_a_rows_own_field():
    with pytest.raises(ValueError, match="name a row's own fields"):
        Rows("s").at("agreement", source="grid", target="t")
