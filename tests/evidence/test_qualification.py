"""A deliberately batch-variant mock target is caught: its batched path fails to qualify,
its serialized path qualifies, and the batch-invariance probe sees the difference."""
import pandas as pd
import pytest
import yaml

from specproof.evidence.qualification import probe_batch_invariance, run_qualification
from specproof.evidence.reference import run_reference
from specproof.records import check_seal, write_json
from specproof.study.config import load_study
from specproof.errors import SpecproofError
from specproof.study.workloads import build_prompt_set


def make_study(tmp_path, batch_variance):
    cfg = {
        "name": "qual", "settings": {"max_new_tokens": 24, "seed": 1},
        "workloads": {"chat": {"source": "builtin", "n": 4}},
        "targets": {"bv": {"backend": "mock", "vocab_size": 40, "seed": 2, "scale": 0.5,
                           "batch_variance": batch_variance}},
        "drafts": {"d": {"backend": "mock", "vocab_size": 40, "seed": 2, "scale": 0.5, "noise": 0.3}},
        "pairs": [{"target": "bv", "draft": "d"}],
        "grid": [{"k": [3], "policy": ["fixed"], "verify_mode": ["batched"], "temperature": [0.0]}],
        "qualification": {"repetitions": 2, "k": 3},
    }
    path = tmp_path / "qual.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return load_study(path)


@pytest.mark.parametrize("variance,batched_ok", [(0.0, True), (0.5, False)])
def test_batch_variant_target_fails_qualification(tmp_path, variance, batched_ok):
    study = make_study(tmp_path, variance)
    prompts = build_prompt_set(study)
    write_json({"x": 1}, tmp_path / "prov.json")
    run_reference(study, prompts, tmp_path / "prov.json", tmp_path / "ref.parquet", tmp_path / "seal.json")
    ref = check_seal(tmp_path / "ref.parquet", tmp_path / "seal.json")
    run_qualification(study, prompts, ref, tmp_path / "q.parquet")
    q = pd.read_parquet(tmp_path / "q.parquet")
    by_mode = q.groupby("verify_mode")["ids_equal"].all()
    assert bool(by_mode["serialized"]) is True
    assert bool(by_mode["batched"]) is batched_ok
    probe_batch_invariance(study, prompts, ref, tmp_path / "bi.parquet")
    bi = pd.read_parquet(tmp_path / "bi.parquet")
    assert bool(bi["max_abs_dlogit"].max() > 0) is (variance > 0)


def test_changed_reference_is_refused(tmp_path):
    study = make_study(tmp_path, 0.0)
    prompts = build_prompt_set(study)[:2]
    write_json({"x": 1}, tmp_path / "prov.json")
    run_reference(study, prompts, tmp_path / "prov.json", tmp_path / "ref.parquet", tmp_path / "seal.json")
    df = pd.read_parquet(tmp_path / "ref.parquet")
    df.at[0, "ids"] = list(df.at[0, "ids"])[:-1] + [0]
    df.to_parquet(tmp_path / "ref.parquet")
    with pytest.raises(SpecproofError, match="reference ids changed since they were sealed"):
        check_seal(tmp_path / "ref.parquet", tmp_path / "seal.json")


def test_qualification_verdict_labels_probe_flips_and_small_n():
    """Matching runs do not qualify a path whose probe flips an argmax, nor one with too
    few runs; the serialized path carries no probe flips."""
    from specproof.analysis.analyze import qualification_summary
    qual = pd.DataFrame(  # two runs of each prompt (prompt_id i // 2)
        [{"target": "flip", "verify_mode": m, "prompt_id": f"p{i // 2}", "ids_equal": True}
         for m in ("batched", "serialized") for i in range(30)]
        + [{"target": "small", "verify_mode": "batched", "prompt_id": f"p{i // 2}", "ids_equal": True} for i in range(6)]
        + [{"target": "bad", "verify_mode": "batched", "prompt_id": f"p{i // 2}", "ids_equal": i > 0} for i in range(30)])
    bi = pd.DataFrame({"target": ["flip", "flip", "small", "bad"], "argmax_flips": [0, 1, 0, 0]})
    s = qualification_summary(qual, bi, min_runs=30).set_index(["target", "verify_mode"])
    assert s.loc[("flip", "batched"), "verdict"] == "matched, probe flips"
    assert s.loc[("flip", "batched"), "probe_flips"] == 1
    assert bool(s.loc[("flip", "batched"), "qualifies"]) is True  # every run matched
    assert s.loc[("flip", "serialized"), "verdict"] == "qualifies"
    assert s.loc[("small", "batched"), "verdict"] == "matched, n < 30"
    assert s.loc[("bad", "batched"), "verdict"] == "fails"
    # runs and prompts: the one changed run makes its prompt (of 15) a changed prompt
    assert (s.loc[("bad", "batched"), "total"], s.loc[("bad", "batched"), "prompts"]) == (30, 15)
    assert s.loc[("bad", "batched"), "changed_prompts"] == 1
    assert s.loc[("flip", "serialized"), "changed_prompts"] == 0
