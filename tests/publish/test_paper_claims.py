"""`specproof paper --list-claims`: every #claim the numbers do not support, at once."""
import json
from pathlib import Path

from specproof.cli import main
from specproof.publish.paper import failed_claims

ROOT = Path(__file__).resolve().parents[2]
SOURCE = """#let N = json(sys.inputs.at("numbers"))
#let claim(ok, what) = if not ok { if sys.inputs.at("claims", default: "check") == "list" [#metadata(what) <failed-claim>] else { panic("claim not supported by numbers.json: " + what) } }
The speedup is #N.at("s").value.
#claim(N.at("s").value < 1, "slower")
#claim(N.at("s").value > 2, "twice as fast")
#claim(N.at("n").value == 3, "three prompts")
"""


def _paper(tmp_path: Path, s: float) -> tuple[Path, Path]:
    source, numbers = tmp_path / "p.typ", tmp_path / "numbers.json"
    source.write_text(SOURCE)
    numbers.write_text(json.dumps({"s": {"value": s}, "n": {"value": 4}}))
    return source, numbers


def test_every_unsupported_claim_is_listed_in_order(tmp_path):
    source, numbers = _paper(tmp_path, 0.5)
    assert failed_claims(source, numbers, tmp_path, cited=tmp_path / "c.yaml") == ["twice as fast", "three prompts"]
    source, numbers = _paper(tmp_path, 3.0)
    assert failed_claims(source, numbers, tmp_path, cited=tmp_path / "c.yaml") == ["slower", "three prompts"]


def test_the_cli_lists_them_and_exits_2_without_a_pdf(tmp_path, capsys):
    source, numbers = _paper(tmp_path, 0.5)
    args = ["paper", "--source", str(source), "--numbers", str(numbers), "--figures", str(tmp_path),
            "--cited", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "p.pdf"), "--list-claims"]
    assert main(args) == 2
    out = capsys.readouterr()
    assert out.out.splitlines() == [f"{source}: claim not supported by {numbers}: twice as fast",
                                    f"{source}: claim not supported by {numbers}: three prompts"]
    assert "2 claim(s) not supported" in out.err and not (tmp_path / "p.pdf").exists()


def test_the_committed_paper_supports_every_claim():
    numbers = ROOT / "paper/build/numbers.json"
    head = json.loads(numbers.read_text())["paper.study"]["value"]
    assert failed_claims(ROOT / "paper/paper.typ", numbers, ROOT / "figures" / head,
                         machine_figures=ROOT / "figures/machines", map_figures=ROOT / "figures/break_even") == []
