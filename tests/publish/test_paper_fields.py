"""The fields rows carry so that paper.typ selects them by field and builds no key: pair
roles on best rows, and the parts of a benchmark value's name."""
from specproof.publish.benchtables import name_fields
from specproof.publish.numbers import pair_roles


def test_a_benchmark_name_is_split_into_parts_not_at_a_decimal_point():
    assert name_fields("goal") == {"parts": ["goal"]}
    assert name_fields("K4.realized") == {"parts": ["realized"], "k": 4}
    assert name_fields("a+b.null.x2.ci_low") == {"parts": ["a+b", "null", "ci_low"], "multiple": 2}
    assert name_fields("a+b.temperature_1.05.tv_per_token") == {"parts": ["a+b", "temperature_1.05", "tv_per_token"]}
    assert name_fields("rows_meeting_0.95") == {"parts": ["rows_meeting_0.95"]}


def test_each_pair_has_its_role_target_and_draft():
    cfg = {"targets": {"big": {"backend": "llama", "model": "m-big"}, "small": {"backend": "llama", "model": "m-small"},
                       "other": {"backend": "llama", "model": "m-other"}},
           "drafts": {"d": {"backend": "llama", "model": "m-small"}, "q": {"backend": "llama", "model": "m-q"},
                      "ngram": {"kind": "ngram"}},
           "pairs": [{"target": "big", "draft": "d"}, {"target": "other", "draft": "q"},
                     {"target": "other", "draft": "ngram"}, {"target": "small", "draft": "ngram"}]}
    roles = pair_roles(cfg)
    assert {p: r["role"] for p, r in roles.items()} == {
        "big+d": "headline", "other+q": "model_draft", "other+ngram": "free_draft", "small+ngram": "draft_as_target"}
    assert roles["other+ngram"]["target"] == "other" and roles["other+ngram"]["draft"] == "ngram"
