"""Each figure of paper/cited.yaml that cites other work is stored with the verbatim
sentence it comes from and that source's sha256; the check finds a changed figure, an
edited quote, a missing quote and a changed source file."""
import copy
import shutil
from pathlib import Path

import pytest
import yaml

from specproof.errors import ConfigError
from specproof.publish.cited import cited_errors, figure_in, read_cited

CITED = Path(__file__).resolve().parents[2] / "paper" / "cited.yaml"
SEEDS = Path("/work/shared/seeds")
needs_seeds = pytest.mark.skipif(not SEEDS.is_dir(), reason="the cited sources are not here")


@pytest.fixture
def cited():
    return yaml.safe_load(CITED.read_text())


def test_committed_cited_yaml_has_no_errors(cited):
    assert cited_errors(cited, None) == []


@needs_seeds
def test_committed_cited_yaml_matches_its_sources(cited):
    assert cited_errors(cited, SEEDS) == []


def test_every_cited_figure_is_quoted(cited):
    for section in ("laptop_study", "laptop_review", "path_study"):
        for name, value in cited[section].items():
            if isinstance(value, (int, float)):
                assert name in cited["quotes"][section], f"{section}.{name}"


def test_a_changed_figure_is_named(cited):
    cited["laptop_study"]["best_speedup"] = 0.61
    errors = cited_errors(cited, None)
    assert len(errors) == 1 and "laptop_study.best_speedup" in errors[0]


def test_a_missing_quote_is_named(cited):
    del cited["quotes"]["path_study"]["m4_code"]
    errors = cited_errors(cited, None)
    assert len(errors) == 1 and "path_study.m4_code" in errors[0]


def test_a_quote_for_no_figure_is_named(cited):
    cited["quotes"]["laptop_study"]["speedup"] = dict(cited["quotes"]["laptop_study"]["best_k"])
    errors = cited_errors(cited, None)
    assert len(errors) == 1 and "quotes.laptop_study.speedup" in errors[0]


def test_a_derived_figure_must_name_its_quote(cited):
    entry = cited["quotes"]["laptop_study"]["tokens_per_method"]
    entry["derived"] = "the two methods' token counts, averaged and rounded"
    cited["laptop_study"]["tokens_per_method"] = 9211
    assert cited_errors(cited, None) == []
    del entry["quote"]
    errors = cited_errors(cited, None)
    assert len(errors) == 1 and "quotes.laptop_study.tokens_per_method.quote" in errors[0]


@needs_seeds
def test_an_edited_quote_is_named(cited):
    entry = cited["quotes"]["path_study"]["max_new_ids"]
    entry["quote"] = entry["quote"].replace("capped at", "limited to")
    errors = cited_errors(cited, SEEDS)
    assert len(errors) == 1 and "quotes.path_study.max_new_ids.quote" in errors[0]


@needs_seeds
def test_a_changed_source_is_named(cited, tmp_path):
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for f in SEEDS.iterdir():
        shutil.copyfile(f, seeds / f.name)
    name = cited["quotes"]["laptop_review"]["settle_pvalue"]["source"]
    with (seeds / name).open("a") as f:
        f.write("\none more line\n")
    errors = cited_errors(copy.deepcopy(cited), seeds)
    assert len(errors) == 1 and f"sources.{name}" in errors[0]


@pytest.mark.parametrize("value, text, found", [
    (1.61, "a measured $1.61\\times$ speedup", True), (1.61, "1.61x", True),
    (0.61, "1.61×", False), (1.6, "1.61", False), (69.7, "from 69.7% at", True),
    (9200, "roughly 9,200 tokens", True), (200, "roughly 9,200 tokens", False),
    (0.976, "p = 0.976", True), (0.976, "p = .976", True), (0.97, "p = 0.976", False),
    (5, "five configurations", True), (3, "three of five", True), (4, "three of five", False),
    (72, "60/72 runs", True), (6, "K=2–6", True), (2, "2.5 s", False),
])
def test_textual_forms_of_a_figure(value, text, found):
    assert figure_in(value, text) is found


def test_cited_figures_are_rows_the_audit_recomputes(cited, tmp_path):
    """The paper prints cited figures from numbers.json rows; an edited row fails the audit."""
    from specproof.publish.cited import cited_rows
    from specproof.publish.manifests import _audit_cited_rows
    rows = cited_rows(cited, "paper/cited.yaml")
    assert rows["cited.laptop_study.best_speedup"]["value"] == cited["laptop_study"]["best_speedup"]
    assert rows["cited.study_goals.greedy_k_values"]["section"] == "study_goals"
    assert not any(k.startswith("cited.quotes.") or k.startswith("cited.sources.") for k in rows)
    numbers = copy.deepcopy(rows)
    _audit_cited_rows(CITED, numbers, tmp_path / "numbers.json")
    numbers["cited.laptop_study.best_speedup"]["value"] = 1.9
    with pytest.raises(Exception, match=r"cited\.laptop_study\.best_speedup"):
        _audit_cited_rows(CITED, numbers, tmp_path / "numbers.json")


@pytest.mark.parametrize("text, message", [
    ("a: [1, 2\n", r"x\.yaml: not valid YAML"),
    ("- 1\n- 2\n", r"x\.yaml: must be a mapping of sections \(got list\)"),
])
def test_a_malformed_cited_yaml_is_one_line_naming_it(tmp_path, text, message):
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_cited(path)
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read it"):
        read_cited(tmp_path / "nope.yaml")
