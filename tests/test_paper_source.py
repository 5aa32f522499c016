"""paper/paper.typ states only what numbers.json (results) and cited.yaml (other work,
goals) hold: no numeric literal outside layout, number formatting and structural names."""
import re
from pathlib import Path

PAPER = Path(__file__).resolve().parents[1] / "paper" / "paper.typ"

# Contexts where a number is layout or structure, not a claim.
ALLOWED = [
    r"\b(columns|digits|d|size|width|height|margin|x|y|spacing)\s*:\s*\d+(\.\d+)?(pt|em|cm|%)?",
    r"#v\(\d+(\.\d+)?em\)",
    r"\bpart\(k,\s*\d+\)", r"\bslice\(0,\s*\d+\)",
    r"(?i)\blevel[- ]\d\b", r"\bAVX-\d+",
]
# Number-formatting helpers may hold the constants of formatting itself.
FORMATTING = ("#let sci(", "#let fixed(", "#let fmt(", "#let pv(", "#let bound(")


def literals(text: str) -> list[tuple[int, str]]:
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        code = line.split("//")[0] if not line.lstrip().startswith("//") else ""
        if code.lstrip().startswith(FORMATTING):
            continue
        code = re.sub(r'"[^"]*"', '""', code)  # keys in strings are names, not values
        for pattern in ALLOWED:
            code = re.sub(pattern, " ", code)
        for m in re.finditer(r"(?<![\w.#])\d+(\.\d+)?", code):
            if m.group(0) not in ("0", "1", "2"):  # identities: K = 1, "below 1", p_(K+1)
                found.append((lineno, m.group(0)))
    return found


def test_paper_holds_no_result_literal():
    assert literals(PAPER.read_text()) == []


def test_the_check_sees_a_planted_literal():
    planted = PAPER.read_text() + "\nThe default pair is 1.67× faster on 6 prompts.\n"
    assert [v for _, v in literals(planted)] == ["1.67", "6"]


def code_lines(text: str) -> list[str]:
    """The paper's lines without comments, number formatting aside (it joins a number's digits)."""
    return [line.split("//")[0] for line in text.splitlines() if not line.startswith("#let fixed(")]


def test_paper_builds_no_key_by_concatenation():
    """Rows are selected by their fields: no string that begins or ends a dotted key is
    joined with + (issue 40, item 4)."""
    joined = re.compile(r'"\.[^"]*"|"[^"\s]*\."\s*\+')
    assert [line for line in code_lines(PAPER.read_text()) if joined.search(line)] == []


def test_paper_names_no_pair_by_its_id():
    """Pairs are named by their role (best rows carry role, target and draft), never by an id
    written into the source."""
    pair_id = re.compile(r'"[\w.-]+\+[\w.-]+"')
    assert [line for line in code_lines(PAPER.read_text()) if pair_id.search(line)] == []


def test_the_checks_see_a_planted_key_and_pair_id():
    planted = '#num("speedup." + H + ".all")\n#raw("qwen-1b5+qwen-0b5-draft")\n'
    assert len([line for line in code_lines(planted) if re.search(r'"\.[^"]*"|"[^"\s]*\."\s*\+', line)]) == 1
    assert len([line for line in code_lines(planted) if re.search(r'"[\w.-]+\+[\w.-]+"', line)]) == 1


def test_no_line_of_the_paper_is_over_two_hundred_characters():
    """The source reads as prose: long sentences are wrapped at clause ends (a single
    newline in Typst markup is a space); number formatting is one line of code."""
    lines = [line for line in PAPER.read_text().splitlines() if not line.startswith("#let fixed(")]
    assert [line[:60] for line in lines if len(line) > 200] == []
