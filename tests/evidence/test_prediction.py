"""Endpoint P: the draft-free predictors' call shapes, the choice on discovery prompts, the
seal as its own file, and the protocol's refusals (a changed prediction, a stage that
touches reserved prompts before the seal, a reserved run that started before it)."""
import pandas as pd
import pytest
import yaml

from specproof.decode.decoding import DecodeSettings, decode_target_only, predict_greedy
from specproof.errors import SpecproofError
from specproof.evidence.prediction import (load_sealed, prediction_counts, require_seal,
                                           score_predictions, seal_predictions)
from specproof.models.mock import MockBackend
from specproof.records import canonical_json, read_json, sha256_text, write_json, write_parquet
from specproof.study.config import load_study
from specproof.study.workloads import assign_split, build_prompt_set, split_of


class Spy(MockBackend):
    """A mock target that records how many positions each call scores."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.calls: list[int] = []

    def _forward(self, ids, last_only):
        self.calls.append(len(ids))
        return super()._forward(ids, last_only)


def test_ub1_scores_one_position_per_call_and_verify_shape_k_plus_one():
    prompt = list(range(1, 9))
    ub1 = Spy(vocab_size=32, seed=4)
    predict_greedy(ub1, prompt, 6, "ub1")
    assert set(ub1.calls) == {1} and len(ub1.calls) == len(prompt) - 1 + 6
    vs = Spy(vocab_size=32, seed=4)
    predict_greedy(vs, prompt, 6, "verify_shape", k=3)
    assert vs.calls == [len(prompt) - 1] + [4] * 6  # the prefill, then one call of K + 1 per token


def test_predictors_differ_from_the_reference_exactly_where_batches_do():
    """On a batch-invariant target both predictors give the greedy reference's ids; on a
    batch-variant one, verify_shape (calls of K + 1) departs from it and ub1 does not."""
    prompt = list(range(3, 15))
    for variance, vs_equal in ((0.0, True), (2.0, False)):
        t = MockBackend(vocab_size=32, seed=4, scale=0.5, batch_variance=variance)
        ref = decode_target_only(t, prompt, DecodeSettings(24, 0.0)).new_ids
        assert predict_greedy(t, prompt, 24, "ub1") == ref
        assert (predict_greedy(t, prompt, 24, "verify_shape", k=3) == ref) is vs_equal


def make_study(tmp_path, variance=0.0, disjoint=()):
    cfg = {"name": "p", "settings": {"max_new_tokens": 16, "seed": 3},
           "workloads": {"chat": {"source": "builtin", "n": 6}},
           "targets": {"bv": {"backend": "mock", "vocab_size": 40, "seed": 2, "scale": 0.5,
                              "batch_variance": variance}},
           "drafts": {"d": {"backend": "mock", "vocab_size": 40, "seed": 2, "scale": 0.5, "noise": 0.3}},
           "pairs": [{"target": "bv", "draft": "d"}],
           "grid": [{"k": [3], "policy": ["fixed"], "verify_mode": ["batched"], "temperature": [0.0]}],
           "qualification": {"repetitions": 1, "k": 3},
           "prediction": {"discovery_fraction": 0.5, "reserved_disjoint_from": list(disjoint)}}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return load_study(path)


def test_the_split_is_seeded_marked_once_and_disjoint_from_an_earlier_study(tmp_path):
    earlier = tmp_path / "earlier.jsonl"
    first = build_prompt_set(make_study(tmp_path))
    earlier.write_text("".join(
        __import__("json").dumps({"id": r["id"], "prompt": r["prompt"]}) + "\n" for r in first[:3]))
    recs = build_prompt_set(make_study(tmp_path, disjoint=[str(earlier)]))
    disc, res = split_of(recs)
    assert len(res) == 3 and not {r["prompt"] for r in res} & {r["prompt"] for r in first[:3]}
    assert split_of(recs) == split_of(build_prompt_set(make_study(tmp_path, disjoint=[str(earlier)])))
    other = assign_split([{k: v for k, v in r.items() if k != "split"} for r in recs], 0.5, seed=99)
    assert {r["id"] for r in split_of(other)[1]} != {r["id"] for r in res}  # the seed draws them
    with pytest.raises(Exception, match="reserved_disjoint_from"):
        assign_split(recs, 0.5, seed=3, exclude={r["prompt"] for r in recs[:5]},
                     where="p.yaml: field prediction.reserved_disjoint_from")


@pytest.fixture
def sealed(tmp_path):
    study = make_study(tmp_path, variance=2.0)
    disc, res = split_of(build_prompt_set(study))
    seal_predictions(study, disc, res, tmp_path / "predictions.json", tmp_path / "prediction_seal.json")
    return tmp_path, res


def test_predictions_are_chosen_on_discovery_and_sealed_in_their_own_file(sealed):
    d, res = sealed
    doc, seal = load_sealed(d / "predictions.json", d / "prediction_seal.json")
    assert "predictions" not in seal and seal["file"] == "predictions.json"
    assert {p["verify_mode"] for p in doc["paths"]} == {"batched", "serialized"}
    assert set(doc["reserved_prompts"]) == {r["id"] for r in res}
    assert not set(doc["reserved_prompts"]) & {r["prompt_id"] for r in doc["discovery"]}
    for p in doc["paths"]:  # the chosen predictor matched at least as many discovery runs as any
        rows = [r for r in doc["discovery"] if r["verify_mode"] == p["verify_mode"]]
        best = max(sum(r["holds"] for r in rows if r["predictor"] == c) for c in ("ub1", "verify_shape"))
        assert p["discovery_matched"] == best
    doc["predictions"][next(iter(doc["predictions"]))][0] += 1
    write_json(doc, d / "predictions.json")
    with pytest.raises(SpecproofError, match="predictions.json: changed after sealing"):
        load_sealed(d / "predictions.json", d / "prediction_seal.json")


def test_an_earlier_inline_seal_is_checked_against_its_own_hash(tmp_path):
    preds = {"predictions": {"llama-f16|chat-01": [1, 2, 3]}}
    write_json({**preds, "predictions_sha256": sha256_text(canonical_json(preds["predictions"])),
                "sealed_at": "2026-11-30T00:00:00+00:00"}, tmp_path / "prediction_seal.json")
    doc, _ = load_sealed(tmp_path / "predictions.json", tmp_path / "prediction_seal.json")
    assert doc["predictions"] == preds["predictions"]
    doc["predictions"]["llama-f16|chat-01"][0] = 9
    write_json(doc, tmp_path / "prediction_seal.json")
    with pytest.raises(SpecproofError, match="prediction_seal.json: field predictions: changed after sealing"):
        load_sealed(tmp_path / "predictions.json", tmp_path / "prediction_seal.json")


def test_a_stage_on_reserved_prompts_refuses_without_the_seal(tmp_path):
    with pytest.raises(SpecproofError, match="prediction_seal.json: missing; stage runs"):
        require_seal(tmp_path, "runs")


def _live(doc, started):
    rows = [{"target": k.split("|")[0], "verify_mode": k.split("|")[1], "rep": 0,
             "prompt_id": k.split("|")[2], "ids": ids, "started_at": started}
            for k, ids in doc["predictions"].items()]
    rows[0]["ids"] = rows[0]["ids"][:-1] + [rows[0]["ids"][-1] + 1]
    return pd.DataFrame(rows)


def test_p_counts_per_path_and_a_run_before_the_seal_is_refused(sealed):
    d, _ = sealed
    doc, seal = load_sealed(d / "predictions.json", d / "prediction_seal.json")
    runs = pd.DataFrame({"prompt_id": [], "started_at": []})
    write_parquet(runs, d / "runs.parquet")
    write_parquet(_live(doc, "2999-01-01T00:00:00.000000+00:00"), d / "q.parquet")
    score_predictions(d / "predictions.json", d / "prediction_seal.json", d / "q.parquet",
                      d / "runs.parquet", d / "prediction.json", d / "live.parquet")
    out = read_json(d / "prediction.json")
    assert (out["P_matched"], out["P_total"]) == (len(doc["predictions"]) - 1, len(doc["predictions"]))
    assert sum(v["total"] for v in out["per_path"].values()) == out["P_total"]
    assert out == {**out, **prediction_counts(doc, pd.read_parquet(d / "live.parquet").to_dict("records"))}
    write_parquet(_live(doc, "2000-01-01T00:00:00.000000+00:00"), d / "q.parquet")
    with pytest.raises(SpecproofError, match="after a reserved run started"):
        score_predictions(d / "predictions.json", d / "prediction_seal.json", d / "q.parquet",
                          d / "runs.parquet", d / "prediction.json", d / "live.parquet")
