"""The study grid on the mock pair: sampled runs decode a fixed length past EOS, greedy
runs stop at EOS, and ``shuffle_runs`` draws each block's order from the study seed
without changing any run's seed."""
from pathlib import Path

import pandas as pd

from specproof.decode.decoding import DecodeSettings, decode_target_only
from specproof.evidence.grid import block_order, run_grid
from specproof.models.mock import MockBackend
from specproof.study.config import Study

TOKENS = 24
PROMPTS = [{"id": f"p{i}", "prompt": text, "format": "raw", "workload": "code"}
           for i, text in enumerate(["def f(x):", "class A:", "import os\n"])]


def _greedy_token(spec: dict) -> int:
    """A token the greedy target emits early on the first prompt: made EOS, greedy runs
    must stop there."""
    target = MockBackend(**{k: v for k, v in spec.items() if k != "backend"})
    return decode_target_only(target, target.encode(PROMPTS[0]["prompt"]), DecodeSettings(8)).new_ids[4]


def _study(tmp_path: Path, shuffle: bool) -> Study:
    target = {"backend": "mock", "vocab_size": 6, "seed": 3, "scale": 1.0}
    eos = _greedy_token(target)
    data = {"name": "grid", "settings": {"max_new_tokens": TOKENS, "seed": 11, "repetitions": 2,
                                         "shuffle_runs": shuffle},
            "targets": {"t": {**target, "eos_id": eos}},
            "drafts": {"d": {**target, "noise": 0.5, "eos_id": eos}},
            "pairs": [{"target": "t", "draft": "d"}],
            "grid": [{"k": [1, 2, 3, 4], "policy": ["fixed"], "verify_mode": ["batched"], "temperature": [0.0, 1.0]}]}
    return Study("grid", tmp_path / "grid.yaml", data)


def _runs(tmp_path: Path, shuffle: bool) -> tuple[Study, pd.DataFrame]:
    study = _study(tmp_path, shuffle)
    out = tmp_path / ("shuffled" if shuffle else "plain")
    run_grid(study, PROMPTS, out / "runs.parquet", out / "rounds.parquet")
    return study, pd.read_parquet(out / "runs.parquet")


def test_sampled_runs_decode_a_fixed_length_past_eos(tmp_path):
    study, runs = _runs(tmp_path, shuffle=False)
    eos = study.data["targets"]["t"]["eos_id"]
    sampled, greedy = runs[runs["temperature"] > 0], runs[runs["temperature"] == 0]
    assert (sampled["new_tokens"] == TOKENS).all()
    assert (sampled["stop_reason"] == "max_new_tokens").all()
    assert any(eos in list(ids)[:-1] for ids in sampled["ids"])  # they did sample EOS and went on
    first = greedy[greedy["prompt_id"] == "p0"]
    assert (first["stop_reason"] == "eos").all() and (first["new_tokens"] <= 5).all()


def test_shuffled_blocks_keep_seeds_and_bracket_with_target_only(tmp_path):
    _, plain = _runs(tmp_path, shuffle=False)
    study, shuffled = _runs(tmp_path, shuffle=True)
    assert sorted(shuffled["run_id"]) == sorted(plain["run_id"])
    seeds = plain.set_index("run_id")["seed"]
    assert (shuffled.set_index("run_id")["seed"] == seeds.loc[shuffled["run_id"]]).all()
    orders = []
    for _, block in shuffled.sort_values("order").groupby(["prompt_id", "rep", "temperature"]):
        assert block["path"].iloc[0] == block["path"].iloc[-1] == "target"
        orders.append(tuple(block["k"].iloc[1:-1]))
    assert len(orders) == 12 and len(set(orders)) > 1  # the order differs between blocks
    assert all(sorted(o) == [1, 2, 3, 4] for o in orders)
    plain_orders = {tuple(b["k"].iloc[1:-1]) for _, b in plain.sort_values("order").groupby(
        ["prompt_id", "rep", "temperature"])}
    assert plain_orders == {(1, 2, 3, 4)}


def test_block_order_is_drawn_from_the_study_seed(tmp_path):
    study = _study(tmp_path, shuffle=True)
    blocks = [f"t+d|p{i}|r0|T0" for i in range(20)]
    first = [block_order(study, b, 5) for b in blocks]
    assert first == [block_order(study, b, 5) for b in blocks]
    study.data["settings"]["seed"] = 12
    assert [block_order(study, b, 5) for b in blocks] != first
    assert block_order(_study(tmp_path, shuffle=False), blocks[0], 5) == [0, 1, 2, 3, 4]
