"""The audit's paper files: the PDF equals its rebuild, each cited figure its quote."""
import shutil
from pathlib import Path

import pytest
import yaml

from specproof.errors import SpecproofError
from specproof.publish.manifests import _audit_paper_files
from specproof.records import read_json

ROOT = Path(__file__).resolve().parents[2]


def _pdf_args(pdf: Path) -> dict:
    head = read_json(ROOT / "paper" / "build" / "numbers.json")["paper.study"]["value"]
    return {"pdf": pdf, "source": ROOT / "paper" / "paper.typ", "numbers": ROOT / "paper" / "build" / "numbers.json",
            "figures": ROOT / "figures" / head, "machine_figures": ROOT / "figures" / "machines",
            "map_figures": ROOT / "figures" / "break_even", "cited": ROOT / "paper" / "cited.yaml"}


def test_the_committed_paper_is_its_own_rebuild_and_a_changed_byte_is_not(tmp_path):
    assert _audit_paper_files(None, None, _pdf_args(ROOT / "paper" / "paper.pdf"))[0].endswith(
        "is byte for byte a rebuild of " + str(ROOT / "paper" / "paper.typ"))
    forged = tmp_path / "paper.pdf"
    data = bytearray((ROOT / "paper" / "paper.pdf").read_bytes())
    data[len(data) // 2] ^= 1
    forged.write_bytes(bytes(data))
    with pytest.raises(SpecproofError, match="paper.pdf: differs from a rebuild of"):
        _audit_paper_files(None, None, _pdf_args(forged))


def test_a_cited_figure_changed_without_its_quote_fails_the_audit(tmp_path):
    cited = yaml.safe_load((ROOT / "paper" / "cited.yaml").read_text())
    cited["laptop_study"]["best_speedup"] = 0.61
    path = tmp_path / "cited.yaml"
    path.write_text(yaml.safe_dump(cited))
    with pytest.raises(SpecproofError, match="laptop_study.best_speedup"):
        _audit_paper_files(path, None, None)
    shutil.copy(ROOT / "paper" / "cited.yaml", path)
    assert "stands in its quoted sentence" in _audit_paper_files(path, None, None)[0]


def test_every_frozen_set_is_listed_retired_or_pending(tmp_path):
    """A frozen set dropped from config.yaml's studies without being retired or pending
    (with why) is named."""
    from specproof.publish.audit.provenance import check_every_set_listed
    from specproof.study.config import load_config
    for set_dir in ("a/m1", "a/m2", "b/m1"):
        (tmp_path / "manifests" / set_dir).mkdir(parents=True)
        (tmp_path / "manifests" / set_dir / "manifest.json").write_text("{}")
    config = tmp_path / "config.yaml"
    config.write_text("studies: [a@m1]\n")
    cfg = {"studies": ["a@m1", "b@m1"]}
    with pytest.raises(SpecproofError, match=r"config\.yaml: field studies: frozen record set a@m2 is neither"):
        check_every_set_listed(tmp_path / "manifests", cfg, config)
    check_every_set_listed(tmp_path / "manifests", {**cfg, "retired": [{"set": "a@m2", "why": "old"}]}, config)
    check_every_set_listed(tmp_path / "manifests", {**cfg, "pending": [{"set": "a@m2", "why": "no replicate yet"}]},
                           config)
    config.write_text("studies: [a@m1, b@m1]\npending: [{set: a@m2, why: ' '}]\n")
    with pytest.raises(SpecproofError, match=r"config\.yaml: field pending\.0\.why"):
        load_config(config)


def test_the_committed_config_lists_or_retires_every_frozen_set():
    from specproof.publish.audit.provenance import check_every_set_listed
    from specproof.study.config import load_config
    root = Path(__file__).resolve().parents[2]
    check_every_set_listed(root / "manifests", load_config(root / "config/config.yaml"), root / "config/config.yaml")


def test_a_figure_its_records_do_not_draw_fails_the_audit(tmp_path):
    """A forger who swaps a figure and rebuilds the PDF with it keeps the PDF check whole;
    the figure redrawn from the frozen records does not match it."""
    from specproof.analysis.analyze import analyze
    from specproof.publish.manifests import _audit_figures, set_dir
    from specproof.study.config import load_config
    head = load_config(ROOT / "config" / "config.yaml")["studies"][0]
    analysis = analyze(set_dir(ROOT / "manifests", head))
    shown = tmp_path / "figures"
    shutil.copytree(ROOT / "figures" / head, shown)
    args = {"figures": shown}
    assert _audit_figures([head], ROOT / "manifests", None, analysis, args)[0].startswith("figures: ")
    shutil.copy(shown / "acceptance.png", shown / "speedup_vs_k.png")
    with pytest.raises(SpecproofError, match=r"speedup_vs_k\.png: .*(pixels differ|pixels, but its records draw)"):
        _audit_figures([head], ROOT / "manifests", None, analysis, args)
