from pathlib import Path



def test_the_probe_order_takes_the_workloads_in_turn():
    from specproof.study.workloads import interleaved_by_workload
    recs = [{"id": i, "workload": w} for i, w in enumerate(["code", "code", "code", "chat", "maths", "maths"])]
    assert [r["id"] for r in interleaved_by_workload(recs)] == [0, 3, 4, 1, 5, 2]


def test_the_prompts_stage_refuses_reserved_prompts_a_frozen_set_of_the_same_models_ran(tmp_path):
    """P is blind only if no reserved prompt was run before by another study of the same
    models: the prompts stage refuses in one line naming the frozen set, exit 2, and a
    study that says why it cannot be blind (prediction.not_blind) passes."""
    import json
    import subprocess
    import sys

    import yaml
    root = Path(__file__).resolve().parents[2]
    study = yaml.safe_load((root / "tests/data/studies/tiny-mock.yaml").read_text())
    config = tmp_path / "tiny-mock.yaml"
    config.write_text(yaml.safe_dump(study))
    run = lambda results, manifests: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "specproof.cli", "stage", "prompts", "--config", str(config), "--results",
         str(results), "--manifests", str(manifests)], capture_output=True, text=True, cwd=root)
    first = run(tmp_path / "first", tmp_path / "none")
    assert first.returncode == 0, first.stderr
    frozen = tmp_path / "manifests" / "earlier" / "m1"
    frozen.mkdir(parents=True)
    (frozen / "manifest.json").write_text("{}")
    (frozen / "prompts.jsonl").write_text((tmp_path / "first" / "prompts.jsonl").read_text())
    (frozen / "models.json").write_text(json.dumps({"target:x": {"spec": {**study["targets"]["mock-a"], "threads": 2}}}))
    refused = run(tmp_path / "second", tmp_path / "manifests")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "frozen set earlier@m1 of the same models, so P would not be blind" in refused.stderr
    assert "field prediction.reserved_disjoint_from" in refused.stderr
    study["prediction"] = {"not_blind": "a test"}
    config.write_text(yaml.safe_dump(study))
    assert run(tmp_path / "third", tmp_path / "manifests").returncode == 0
