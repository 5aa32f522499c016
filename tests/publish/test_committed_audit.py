"""The committed paper's numbers pass the audit: every frozen record set that
config/config.yaml lists re-hashes to its manifest and gives back every number in
paper/build/numbers.json (no model runs)."""
from pathlib import Path

import yaml

from specproof.publish.manifests import audit

ROOT = Path(__file__).resolve().parents[2]


def test_committed_numbers_are_recomputed_from_the_frozen_sets():
    sets = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["studies"]
    report = audit(sets, ROOT / "manifests", ROOT / "paper" / "build" / "numbers.json",
                   ROOT / "benchmarks" / "results", cited=ROOT / "paper" / "cited.yaml")
    assert any("numbers recomputed from frozen records" in line for line in report)
    # the audit says, per set, what it could only check against a summary: sets frozen
    # before the stages wrote their raw records name those summaries, newer ones none
    for set_id in sets:
        copied = [line for line in report if line.startswith(f"{set_id}: ") and "only against a summary" in line]
        assert len(copied) == 1
        study, machine = set_id.split("@")
        raw = (ROOT / "manifests" / study / machine / "level1.parquet").is_file()
        named = [line for line in report if line.startswith(f"{set_id}: manifest format 1 (inferred)")]
        if raw:
            assert copied[0].startswith(f"{set_id}: 0 of them") and not named
        else:
            assert "from level1.json" in copied[0] and "from prediction.json" in copied[0]
            assert len(named) == 1  # the audit names the set frozen before the raw records
    if len(sets) > 1:
        assert any(line.startswith("machines:") for line in report)
