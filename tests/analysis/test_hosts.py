"""A speedup compares runs of one block; the analysis refuses a block timed on two hosts."""
import pandas as pd
import pytest

from specproof.analysis.costs import baselines, check_one_host
from specproof.errors import SpecproofError


def block_runs(hosts):
    """One (pair, prompt, rep, temperature) block: target-only, speculative, target-only."""
    return pd.DataFrame({"pair": "t+d", "prompt_id": "p0", "rep": 0, "temperature": 0.0,
                         "path": ["target", "speculative", "target"], "tokens_per_s": [10.0, 20.0, 12.0],
                         "host": hosts})


def test_one_host_gives_the_bracketing_baseline():
    assert baselines(block_runs(["n1", "n1", "n1"]))["baseline_tokens_per_s"].tolist() == [11.0]


def test_a_block_from_two_hosts_is_refused_in_one_line():
    with pytest.raises(SpecproofError) as err:
        baselines(block_runs(["n1", "n2", "n1"]))
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("runs.parquet: field host: block t+d|p0|0|0.0 was timed on 2 hosts (n1, n2)")


def test_two_blocks_on_two_hosts_are_fine():
    other = block_runs(["n2", "n2", "n2"]).assign(prompt_id="p1")
    check_one_host(pd.concat([block_runs(["n1", "n1", "n1"]), other]))


def test_records_without_a_host_column_pass():
    """Sets frozen before runs recorded their host come from one whole-study job."""
    assert len(baselines(block_runs(["n1", "n2", "n1"]).drop(columns="host"))) == 1
