"""advise's loop model against the grid's reserved runs (analysis.advisegap), on the frozen
paper study's own records: a change planted in one term moves that term's factor only, and
only reserved prompts count."""
from pathlib import Path

import pandas as pd
import pytest

from specproof.analysis.advisegap import advise_gap
from specproof.analysis.analyze import prompt_split
from specproof.records import read_json, read_parquet

SET = Path(__file__).resolve().parents[2] / "manifests" / "paper-smollm2" / "epyc-avx512"
PAIR = "llama-q8_0+smollm2-q4_1"


@pytest.fixture(scope="module")
def rec():
    runs, rounds = read_parquet(SET / "runs.parquet"), read_parquet(SET / "rounds.parquet")
    discovery, reserved = prompt_split(SET, runs, read_json(SET / "provenance.json"))
    return dict(micro=read_parquet(SET / "advise_micro.parquet"), probe=read_parquet(SET / "advise_rounds.parquet"),
                runs=runs, rounds=rounds, discovery=discovery, reserved=reserved)


def gap(rec, runs=None, rounds=None, prompts=None) -> pd.DataFrame:
    g = advise_gap(rec["micro"], rec["probe"], rec["runs"] if runs is None else runs,
                   rec["rounds"] if rounds is None else rounds, rec["reserved"] if prompts is None else prompts)
    return g.set_index(["pair", "config"])


def test_one_row_per_advised_pair_and_greedy_fixed_k_on_reserved_prompts(rec):
    g = gap(rec)
    assert set(g.index) == {("llama-f16+smollm2-q4_1", "K4-fixed-batched-T0"), ("llama-f16+smollm2-q4_1", "K6-fixed-batched-T0"),
                            ("gemma-q4_k_m+ngram", "K4-fixed-batched-T0"), ("gemma-q4_k_m+ngram", "K6-fixed-batched-T0"),
                            (PAIR, "K4-fixed-batched-T0")}
    assert (g["prompts"] == len(rec["reserved"])).all()
    assert (g["probe_prompts"] == rec["probe"].groupby("pair")["prompt"].nunique().min()).all()
    on_discovery = gap(rec, prompts=rec["discovery"])
    assert not (on_discovery["realized"] == g["realized"]).all()  # the prompt set decides what is realized


def test_slower_rounds_move_the_round_factor_only(rec):
    spec = rec["runs"][(rec["runs"]["pair"] == PAIR) & (rec["runs"]["path"] == "speculative")]["run_id"]
    rounds = rec["rounds"].copy()
    hit = rounds["run_id"].isin(spec)
    rounds["round_ns"] = rounds["round_ns"].astype(float)
    rounds.loc[hit, "round_ns"] *= 1.25
    before, after = gap(rec).loc[PAIR], gap(rec, rounds=rounds).loc[PAIR]
    assert after["round_factor"].iloc[0] == pytest.approx(before["round_factor"].iloc[0] / 1.25)
    assert after["realized"].iloc[0] == pytest.approx(before["realized"].iloc[0] / 1.25)
    for f in ("target_factor", "acceptance_factor", "predicted"):
        assert after[f].iloc[0] == pytest.approx(before[f].iloc[0])


def test_a_faster_target_step_moves_the_target_factor_only(rec):
    runs = rec["runs"].copy()
    hit = (runs["pair"] == PAIR) & (runs["path"] == "target")
    runs["decode_ns"] = runs["decode_ns"].astype(float)
    runs.loc[hit, "decode_ns"] *= 0.8
    before, after = gap(rec).loc[PAIR], gap(rec, runs=runs).loc[PAIR]
    assert after["target_factor"].iloc[0] == pytest.approx(before["target_factor"].iloc[0] * 0.8, rel=1e-9)
    for f in ("acceptance_factor", "round_factor"):
        assert after[f].iloc[0] == pytest.approx(before[f].iloc[0])


def test_fewer_committed_tokens_move_the_acceptance_factor_only(rec):
    spec = rec["runs"][(rec["runs"]["pair"] == PAIR) & (rec["runs"]["path"] == "speculative")]["run_id"]
    rounds = rec["rounds"].copy()
    hit = rounds["run_id"].isin(spec) & (rounds["committed"] > 1)
    rounds.loc[hit, "committed"] -= 1
    before, after = gap(rec).loc[PAIR], gap(rec, rounds=rounds).loc[PAIR]
    assert after["acceptance_factor"].iloc[0] < before["acceptance_factor"].iloc[0]
    for f in ("target_factor", "round_factor"):
        assert after[f].iloc[0] == pytest.approx(before[f].iloc[0])


def test_a_set_without_advise_probe_records_has_no_rows(rec):
    assert advise_gap(rec["micro"].iloc[:0], rec["probe"].iloc[:0], rec["runs"], rec["rounds"], rec["reserved"]).empty


def test_explains_names_the_factor_a_planted_change_dominates(rec):
    runs = rec["runs"].copy()
    hit = (runs["pair"] == PAIR) & (runs["path"] == "target")
    runs["decode_ns"] = runs["decode_ns"].astype(float)
    runs.loc[hit, "decode_ns"] *= 0.5
    assert gap(rec, runs=runs).loc[PAIR]["explains"].iloc[0] == "target step"
    rounds = rec["rounds"].copy()
    rounds["round_ns"] = rounds["round_ns"].astype(float)
    rounds.loc[rounds["run_id"].isin(runs[runs["pair"] == PAIR]["run_id"]), "round_ns"] *= 3
    assert gap(rec, rounds=rounds).loc[PAIR]["explains"].iloc[0] == "round cost"
