"""The audit's checks are one registry: every check is registered by its family's module,
declares the catalog records it reads and what it guarantees, runs in ``ORDER``;
``specproof audit --list`` prints the registry and docs/audit.md is generated from it."""
import ast
import os
import subprocess
import sys
from pathlib import Path

from specproof.catalog import BY_NAME
from specproof.publish.audit import checks
from specproof.publish.audit.registry import MANIFEST, REGISTRY, SCOPES

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src/specproof/publish/audit"


def test_every_registered_check_runs_in_the_order():
    assert sorted(checks.ORDER) == sorted(REGISTRY) and len(set(checks.ORDER)) == len(checks.ORDER)
    assert {c.family for c in checks.registered()} == set(checks.FAMILIES)


def test_each_check_declares_records_and_a_guarantee():
    for c in checks.registered():
        assert c.scope in SCOPES and c.guarantees and not c.guarantees.endswith(".")
        assert all(r in BY_NAME or r == MANIFEST for r in c.reads), c.name
        assert bool(c.reads) == (c.scope in ("set", "read set")), c.name


def test_the_list_prints_the_registry():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    res = subprocess.run([sys.executable, "-m", "specproof.cli", "audit", "--list"], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == checks.listing()
    assert res.stdout.splitlines()[0] == "committed_manifest (provenance, set)"


def test_the_committed_doc_is_the_generated_one():
    assert (ROOT / "docs/audit.md").read_text() == checks.markdown() + "\n", \
        "docs/audit.md is stale: rewrite it with `specproof audit --list --markdown > docs/audit.md`"


def test_no_private_name_crosses_a_module_and_functions_stay_short():
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert not [a.name for a in node.names if a.name.startswith("_")], f"{path.name}:{node.lineno}"
            if isinstance(node, ast.FunctionDef):
                assert node.end_lineno - node.lineno < 60, f"{path.name}: {node.name}"
