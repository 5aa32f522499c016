"""The record catalog is the one list of record files: freeze, the audit, the summaries,
numbers and the workflow's rules derive their lists from it (none keeps its own), and
each row's stage is the rule that writes the file."""
import ast
import re
from pathlib import Path

from specproof import catalog
from specproof.analysis import summaries
from specproof.publish import manifests, numbers
from specproof.publish.audit import benchmarks, endpoints, provenance, recomputed, timing

ROOT = Path(__file__).resolve().parents[1]
NAMES = set(catalog.BY_NAME)
FORMER = ("RAW", "OPTIONAL", "DERIVED", "FORMAT_RECORDS", "RAW_RECORDS", "SUMMARY_FILES", "ANALYZED",
          "NEEDED_FOR", "DERIVED_FROM")


def test_the_former_lists_are_gone():
    for module in (manifests, summaries, numbers, benchmarks, endpoints, provenance, recomputed, timing):
        kept = [name for name in FORMER if hasattr(module, name)]
        assert not kept, f"{module.__name__} keeps its own list of records: {kept}"
    rules = "\n".join(p.read_text() for p in (ROOT / "workflow/rules").glob("*.smk"))
    assert not re.search(r"\b(ANALYZED|RAW|OPTIONAL|DERIVED)\b", rules)


# lists that name record files for a property the catalog does not hold (a column)
ALLOWED = {("timing.py", "run_starts"): "the live-run tables, those with a started_at column"}


def _literal_lists(path: Path):
    """(function, the catalog names) of every list, tuple or set literal of a Python file,
    and every dict literal mapping files to constants, naming three or more record files
    (a dict mapping each file to its content, as ``derived_records``, produces them; an
    audit check's ``register`` declares the rows it reads, each checked against the catalog)."""
    tree = ast.parse(path.read_text(), str(path))
    owner = {}  # node -> the name of the function it lies in
    for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        owner.update({id(n): func.name for n in ast.walk(func)})  # inner functions come later
    declared = {id(n) for call in ast.walk(tree) if isinstance(call, ast.Call)
                and getattr(call.func, "id", None) == "register" for n in ast.walk(call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and all(isinstance(v, ast.Constant) for v in node.values):
            elts = node.keys
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            elts = node.elts
        else:
            continue
        if id(node) in declared:  # an audit check declaring the catalog rows it reads
            continue
        held = {e.value for e in elts if isinstance(e, ast.Constant) and e.value in NAMES}
        where = owner.get(id(node), "module")
        if len(held) >= 3 and (path.name, where) not in ALLOWED:
            yield where, sorted(held)


def test_no_module_or_rule_lists_record_files_itself():
    found = [f"{p.relative_to(ROOT)} ({where}): {held}" for p in sorted((ROOT / "src/specproof").rglob("*.py"))
             if p.name != "catalog.py" for where, held in _literal_lists(p)]
    quoted = re.compile(r"""["']([\w.]+\.(?:json|jsonl|parquet))["']""")
    for p in [ROOT / "Snakefile", *sorted((ROOT / "workflow/rules").glob("*.smk"))]:
        for group in re.findall(r"[\[({]([^\[\](){}]*)[\])}]", p.read_text()):
            held = set(quoted.findall(group)) & NAMES
            if len(held) >= 3:
                found.append(f"{p.relative_to(ROOT)}: {sorted(held)}")
    assert not found, "record files listed outside specproof.catalog: " + "; ".join(found)


def test_the_derived_lists_are_the_catalogs():
    first, current = catalog.format_records(1), catalog.format_records()
    assert current == [r.name for r in catalog.RECORDS]
    assert sorted(first + catalog.newer_records()) == sorted(current)
    assert catalog.MANIFEST_FORMAT == max(r.since for r in catalog.RECORDS)
    assert set(catalog.analyzed_records()) == set(current) - set(catalog.of_kind("derived")) - {"models.json"}
    assert all(catalog.record(n).computed_from for n in catalog.of_kind("derived"))
    assert {r.kind for r in catalog.RECORDS} <= set(catalog.KINDS)
    assert catalog.study_files("d") == [f"d/{n}" for n in first]


def _outputs(rule: str) -> str:
    """The output block of a workflow rule, as text."""
    text = "\n".join(p.read_text() for p in (ROOT / "workflow/rules").glob("*.smk"))
    body = re.search(rf"^rule {rule}:\n(.*?)(?=^rule |\Z)", text, re.S | re.M)
    assert body, f"no rule {rule}"
    block = re.search(r"^    output:\n(.*?)(?=^    \w+:|\Z)", body.group(1), re.S | re.M)
    return block.group(1) if block else ""


def test_each_record_is_written_by_its_stage():
    wrong = [f"{r.name} (stage {r.stage})" for r in catalog.RECORDS
             if r.kind != "derived" and f"/{r.name}\"" not in _outputs(r.stage)]
    assert not wrong, f"rules that do not write their catalog rows: {wrong}"
    derived = _outputs("analyze")
    assert "of_kind(\"derived\")" in derived and {r.stage for r in catalog.RECORDS if r.kind == "derived"} == {"analyze"}
