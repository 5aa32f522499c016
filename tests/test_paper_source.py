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
FORMATTING = ("#let sci(", "#let fixed(", "#let fmt(", "#let pv(")


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
