"""margins.parquet scores exactly the first divergences of the greedy and qualification
runs from the sealed reference: a row missing or a row for no divergence is refused."""
import shutil
from pathlib import Path

import pytest

from specproof.errors import SpecproofError
from specproof.publish.audit.endpoints import check_margins
from specproof.publish.manifests import set_dir
from specproof.records import check_seal, read_parquet, write_parquet

ROOT = Path(__file__).resolve().parents[2]
SET = "paper-regimes-2@xeon-avx512-amx"  # its quantized target's batched path diverges


@pytest.fixture
def copy(tmp_path):
    d = tmp_path / "set"
    src = set_dir(ROOT / "manifests", SET)
    d.mkdir()
    for name in ("runs.parquet", "qualification.parquet", "margins.parquet", "reference.parquet",
                 "reference.seal.json"):
        shutil.copy(src / name, d / name)
    return d, check_seal(d / "reference.parquet", d / "reference.seal.json")


def test_the_frozen_margins_are_exactly_the_divergences(copy):
    d, ref = copy
    assert len(read_parquet(d / "margins.parquet")) > 0
    check_margins(d, ref)


def test_a_divergence_without_its_margin_is_refused(copy):
    d, ref = copy
    write_parquet(read_parquet(d / "margins.parquet").iloc[1:], d / "margins.parquet")
    with pytest.raises(SpecproofError, match="field top2_margin is missing for the divergence"):
        check_margins(d, ref)


def test_runs_rewritten_to_the_reference_leave_their_margin_behind(copy):
    d, ref = copy
    margins, runs, qual = (read_parquet(d / n) for n in ("margins.parquet", "runs.parquet", "qualification.parquet"))
    want = {(r.target, r.prompt_id): list(r.ids) for r in ref.itertuples()}
    m = margins.iloc[0]
    for df, name in ((runs, "runs.parquet"), (qual, "qualification.parquet")):
        hit = (df["target"] == m["target"]) & (df["prompt_id"] == m["prompt_id"])
        df.loc[hit, "ids"] = df.loc[hit].apply(lambda r: want[(r["target"], r["prompt_id"])], axis=1)
        write_parquet(df, d / name)
    with pytest.raises(SpecproofError, match="scores a divergence that no greedy run"):
        check_margins(d, ref)
