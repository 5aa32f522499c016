"""Study configs: the shipped ones validate; bad ones give one line naming file and field."""
import json

import pytest
import yaml

from specproof.errors import ConfigError
from specproof.study.prompts import load
from specproof.study.config import STUDIES, load_study


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
    with pytest.raises(ConfigError, match=r"p.jsonl:1: missing field 'prompt'"):
        load(f)
    f.write_text('{"id": \n')
    with pytest.raises(ConfigError, match=r"p.jsonl:1: not valid JSON"):
        load(f)


def test_prompt_sets_in_prompts_folder_load():
    from specproof.study.prompts import CHAT_SET, PROMPTS_DIR, chat_prompts
    chat = chat_prompts(16)
    assert [r["id"] for r in chat] == [f"chat-{i:02d}" for i in range(16)]
    assert all(r["format"] == "chat" and r["category"] == "chat" for r in chat)
    assert chat_prompts(3) == load(CHAT_SET)[:3]
    with pytest.raises(ConfigError, match="only 16 built-in chat instructions"):
        chat_prompts(17)
    example = load(PROMPTS_DIR / "spec-bench-example.jsonl")
    assert [r["id"] for r in example] == ["1", "2", "3"] and example[0]["format"] == "chat"


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
