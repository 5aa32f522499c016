"""Study configs: the shipped ones validate; bad ones give one line naming file and field."""
import json
from pathlib import Path

import pytest
import yaml

from specproof.errors import ConfigError
from specproof.study.prompts import load
from specproof.study.config import STUDIES, load_study

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["cpu-smollm2", "apple-m-laptop", "cuda-gpu"])
def test_shipped_study_configs_validate(name):
    study = load_study(name)
    assert study.grid() and study.pairs


def test_unknown_study_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown study 'nope'.*cpu-smollm2"):
        load_study("nope")


def write(tmp_path, data):
    path = tmp_path / f"{data.get('name', 'x')}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def base():
    return yaml.safe_load((STUDIES / "cpu-smollm2.yaml").read_text())


def test_schema_error_names_file_and_field(tmp_path):
    data = base()
    data["settings"]["max_new_tokens"] = 0
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as exc:
        load_study(path)
    msg = str(exc.value)
    assert str(path) in msg and "settings.max_new_tokens" in msg and "\n" not in msg


def test_unknown_pair_target(tmp_path):
    data = base()
    data["pairs"][0]["target"] = "missing"
    with pytest.raises(ConfigError, match="pairs.0.target: unknown target 'missing'"):
        load_study(write(tmp_path, data))


def test_qualified_targets_default_to_all_and_must_be_paired(tmp_path):
    data = base()
    data.setdefault("qualification", {}).pop("targets", None)
    study = load_study(write(tmp_path, data))
    assert study.qualified_targets == study.target_names
    last = study.target_names[-1]
    data["qualification"]["targets"] = [last]
    assert load_study(write(tmp_path, data)).qualified_targets == [last]
    data["qualification"]["targets"] = [last, "missing"]
    with pytest.raises(ConfigError, match="qualification.targets.1: 'missing' is not the target of any pair"):
        load_study(write(tmp_path, data))


def test_bad_backend_and_unknown_field(tmp_path):
    data = base()
    data["targets"]["hf-fp32"]["backend"] = "onnx"
    with pytest.raises(ConfigError, match="targets.hf-fp32"):
        load_study(write(tmp_path, data))
    data = base()
    data["surprise"] = 1
    with pytest.raises(ConfigError, match="surprise"):
        load_study(write(tmp_path, data))


def test_prompt_loader_accepts_both_formats_and_names_bad_lines(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"id": "a", "category": "code", "prompt": "def f():"}) + "\n" +
                 json.dumps({"question_id": 81, "category": "writing", "turns": ["Write a poem.", "More"]}) + "\n")
    recs = load(f)
    assert recs[0]["format"] == "raw" and recs[1] == {"id": "81", "category": "writing",
                                                      "prompt": "Write a poem.", "format": "chat"}
    f.write_text('{"id": "a"}\n')
    with pytest.raises(ConfigError, match=r"p.jsonl:1: field \(top level\): 'prompt' is a required property"):
        load(f)
    f.write_text('{"id": \n')
    with pytest.raises(ConfigError, match=r"p.jsonl:1: not valid JSON"):
        load(f)


def test_prompt_sets_in_prompts_folder_load():
    from specproof.study.prompts import CHAT_SET, PROMPTS_DIR, chat_prompts
    chat = chat_prompts(28)
    assert [r["id"] for r in chat] == [f"chat-{i:02d}" for i in range(28)]
    assert all(r["format"] == "chat" and r["category"] == "chat" for r in chat)
    assert chat_prompts(3) == load(CHAT_SET)[:3]
    with pytest.raises(ConfigError, match="only 28 built-in chat instructions"):
        chat_prompts(29)
    example = load(PROMPTS_DIR / "spec-bench-example.jsonl")
    assert [r["id"] for r in example] == ["1", "2", "3"] and example[0]["format"] == "chat"


@pytest.mark.parametrize("line, needle", [
    ("5", r"p.jsonl:2: field \(top level\): 5 is not of type 'object'"),
    ('{"id": "b", "prompt": "   "}', r"p.jsonl:2: field prompt: .* does not match"),
    ('{"question_id": 3, "turns": []}', r"p.jsonl:2: field turns: \[\] should be non-empty"),
    ('{"id": "b", "prompt": "x", "format": "html"}', r"p.jsonl:2: field format: 'html' is not one of"),
    ('{"id": "a", "prompt": "again"}', r"p.jsonl: duplicate prompt id 'a'"),
])
def test_prompt_records_are_validated_by_the_schema(tmp_path, line, needle):
    f = tmp_path / "p.jsonl"
    f.write_text('{"id": "a", "prompt": "def f():"}\n' + line + "\n")
    with pytest.raises(ConfigError, match=needle):
        load(f)


def test_non_utf8_prompt_file_is_one_line(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_bytes(b'{"id": "a", "prompt": "caf\xe9"}\n')
    with pytest.raises(ConfigError, match=r"p.jsonl: not UTF-8 text \(byte 26 is 0xe9\)"):
        load(f)


def test_the_same_id_in_two_workloads_is_refused(tmp_path):
    from specproof.study.config import load_study
    from specproof.study.workloads import build_prompt_set
    f = tmp_path / "p.jsonl"
    f.write_text('{"id": "x1", "category": "writing", "prompt": "Write."}\n')
    data = base()
    data["workloads"] = {"a": {"source": "file", "path": str(f)}, "b": {"source": "file", "path": str(f)}}
    with pytest.raises(ConfigError, match=r"duplicate prompt id 'x1' \(workloads 'a' and 'b'\)"):
        build_prompt_set(load_study(write(tmp_path, data)))


def test_discovery_split_is_stratified_by_category():
    from specproof.study.workloads import split_discovery
    recs = [{"id": f"{c}{i}", "category": c, "workload": "w"} for c in "ABC" for i in range(4)]
    disc, res = split_discovery(recs, 0.5)
    assert sorted(r["category"] for r in disc) == list("AABBCC")
    assert sorted(r["category"] for r in res) == list("AABBCC")
    one = [{"id": f"p{i}", "category": "chat", "workload": "w"} for i in range(6)]
    assert [r["id"] for r in split_discovery(one, 0.5)[0]] == ["p0", "p1", "p2"]  # file order, as before
def test_paper_tier_is_sized_for_its_intervals():
    """The paper tier (issue 13): >= 20 prompts per workload, >= 3 repetitions, >= 64 new
    tokens, a shuffled run order, pairs the quick tier previews, sampled adaptive and guard
    runs, and reserved prompts kept apart from every frozen quick-tier set's."""
    from specproof.study.config import load_study
    paper, quick = load_study("paper-smollm2"), load_study("cpu-smollm2")
    assert all(w["n"] >= 20 for w in paper.data["workloads"].values())
    assert {w["source"] for w in paper.data["workloads"].values()} >= {"humaneval", "builtin"}
    s = paper.settings
    assert s["repetitions"] >= 3 and s["max_new_tokens"] >= 64 and s["shuffle_runs"] is True
    assert {p["name"] for p in paper.pairs} <= {p["name"] for p in quick.pairs}
    assert {c.policy for c in paper.grid() if c.temperature > 0} >= {"fixed", "adaptive", "guard"}
    frozen = {f"manifests/cpu-smollm2/{m.name}/prompts.jsonl"
              for m in (ROOT / "manifests" / "cpu-smollm2").iterdir() if m.is_dir()}
    assert frozen <= set(paper.prediction["reserved_disjoint_from"])
    assert any(c.temperature > 0 for c in paper.grid())
    assert not quick.settings.get("shuffle_runs", False)  # the frozen quick tier runs unshuffled
def test_policy_enum_is_the_decoding_loops_list(tmp_path):
    """Every name in decode.policies.POLICIES is legal in a grid; any other is refused
    in one line naming the field."""
    from specproof.decode.policies import POLICIES
    data = base()
    data["grid"].append({"k": [6], "policy": list(POLICIES), "verify_mode": ["batched"],
                         "temperature": [0.0]})
    study = load_study(write(tmp_path, data))
    assert set(POLICIES) <= {item.policy for item in study.grid()}
    data["grid"][-1]["policy"] = ["hf_confidence", "speculative"]
    with pytest.raises(ConfigError) as exc:
        load_study(write(tmp_path, data))
    assert f"grid.{len(data['grid']) - 1}.policy.1" in str(exc.value) and "\n" not in str(exc.value)


def test_a_grid_block_can_name_the_pairs_it_runs_on(tmp_path):
    """A block with ``pairs`` adds its configurations to those pairs only; an unknown pair
    name is one error naming the field."""
    from specproof.errors import ConfigError
    from specproof.study.config import load_study
    cfg = {"name": "g", "settings": {"max_new_tokens": 4, "seed": 1},
           "workloads": {"chat": {"source": "builtin", "n": 2}},
           "targets": {"a": {"backend": "mock"}, "b": {"backend": "mock"}},
           "drafts": {"d": {"backend": "mock"}},
           "pairs": [{"target": "a", "draft": "d"}, {"target": "b", "draft": "d"}],
           "grid": [{"k": [2], "policy": ["fixed"], "verify_mode": ["batched"], "temperature": [0.0]},
                    {"k": [8], "policy": ["adaptive"], "verify_mode": ["batched"], "temperature": [0.0],
                     "pairs": ["b+d"]}]}
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(cfg))
    study = load_study(path)
    assert [c.policy for c in study.grid("a+d")] == ["fixed"]
    assert [c.policy for c in study.grid("b+d")] == ["fixed", "adaptive"]
    assert [c.policy for c in study.grid()] == ["fixed", "adaptive"]
    cfg["grid"][1]["pairs"] = ["c+d"]
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match=r"g.yaml: field grid.1.pairs: unknown pair 'c\+d'"):
        load_study(path)


@pytest.mark.parametrize("name", ["paper-qwen", "paper-qwen-v2"])
def test_the_qwen_paper_tier_tests_a_real_size_gap_with_evidence_sized_for_it(name):
    """The paper tier (issue 21): the Qwen2.5-Coder 1.5B target drafted by its 0.5B sibling
    is the headline (the first pair); greedy fixed K over at least six values; adaptive,
    guard and the three library rules; sampled runs; the same-weights SmolLM2 pair and
    Gemma + n-gram as contrasts; the draft model timed as a target; four task kinds; at
    least 30 distinct reserved prompts, none from a frozen quick-tier set."""
    from specproof.decode.policies import POLICIES
    from specproof.study.config import load_study
    from specproof.study.workloads import build_prompt_set
    study = load_study(name)
    head = study.pairs[0]
    assert study.target_spec(head["target"])["model"] == "embedded:qwen2.5-coder-1.5b-q4_k_m"
    assert study.draft_spec(head["draft"])["model"] == "embedded:qwen2.5-coder-0.5b-q4_k_m"
    grid = study.grid(head["name"])
    assert len({c.k for c in grid if c.policy == "fixed" and c.temperature == 0}) >= 6
    assert {c.policy for c in grid if c.temperature == 0} == set(POLICIES)
    assert any(c.temperature > 0 for c in grid)
    names = {p["name"] for p in study.pairs}
    assert {"llama-f16+smollm2-q4_1", "gemma-q4_k_m+ngram"} <= names
    draft_model = study.draft_spec(head["draft"])["model"]
    assert any(study.target_spec(p["target"])["model"] == draft_model for p in study.pairs)
    assert len(study.data["workloads"]) >= 4
    prompts = build_prompt_set(study)
    reserved = {r["prompt"] for r in prompts if r["split"] == "reserved"}
    assert len(reserved) >= 30
    assert int(study.section("qualification").get("repetitions", 1)) == 1
    for f in study.prediction["reserved_disjoint_from"]:
        assert not reserved & {json.loads(line)["prompt"] for line in (ROOT / f).read_text().splitlines()}


def test_a_study_names_its_interval_t_by_default(tmp_path):
    assert load_study("cpu-smollm2").interval == "t"
    data = base()
    data["statistics"] = {"interval": "bca"}
    assert load_study(write(tmp_path, data)).interval == "bca"
    data["statistics"] = {"interval": "wald"}
    with pytest.raises(ConfigError, match="statistics.interval"):
        load_study(write(tmp_path, data))


def test_the_v2_tier_is_paper_qwen_resized_and_its_replicate_pairs_with_it():
    """paper-qwen-v2 differs from paper-qwen only in its name, description, new tokens, the
    certificate's null tokens and why its P is not blind (prediction.not_blind); its
    replicate has its settings and a subset of its prompts."""
    old, new = (yaml.safe_load((STUDIES / f"{n}.yaml").read_text()) for n in ("paper-qwen", "paper-qwen-v2"))
    changed = {k for k in set(old) | set(new) if old.get(k) != new.get(k)}
    assert changed == {"name", "description", "settings", "certificate", "prediction"}
    assert {k for k in old["prediction"] if old["prediction"][k] != new["prediction"][k]} == {"not_blind"}
    assert {k for k in old["settings"] if old["settings"][k] != new["settings"][k]} == {"max_new_tokens"}
    rep = yaml.safe_load((STUDIES / "paper-qwen-v2-replicate.yaml").read_text())
    assert rep["settings"] == new["settings"]
    assert rep["pairs"] == new["pairs"][:1]
    for wl, spec in rep["workloads"].items():
        assert spec["n"] <= new["workloads"][wl]["n"] and spec["source"] == new["workloads"][wl]["source"]

