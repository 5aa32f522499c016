"""The package's rooms: imports only point down (decode < models < study < evidence <
analysis < publish < cli); errors, records, limits (the bounds of a run's settings) and
catalog (the record files) are importable from anywhere and import no room; no package
__init__ loads a heavy library."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "specproof"
ORDER = ["decode", "models", "study", "evidence", "analysis", "publish", "cli"]
SHARED = {"errors", "records", "limits", "load", "catalog"}
TOOLS = {"llama_build": "models"}  # the install-time llama.cpp build helper belongs to the models room
HEAVY = {"torch", "transformers", "llama_cpp", "matplotlib", "typst"}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _room(module: str) -> str | None:
    """The room a dotted specproof module belongs to (None: the package root)."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    first = parts[1]
    return TOOLS.get(first, first)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of every specproof module a file imports, at any depth."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "specproof"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.split(".")[0] != "specproof":
                continue
            if node.module is None or name in ("specproof", ) or _room(name) is None:
                # from . import x / from .. import x: each x is a module
                out += [(node.lineno, f"{name}.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, name))
    return out


def _files():
    return sorted(PKG.rglob("*.py"))


def _upward(path: Path) -> list[str]:
    here = _room(_module(path))
    bad = []
    for line, name in _imports(path):
        there = _room(name)
        if there is None or there in SHARED:
            continue
        if here in SHARED:
            bad.append(f"{path.relative_to(PKG.parent)}:{line}: {here} imports {name} (a room)")
        elif here is None or ORDER.index(there) > ORDER.index(here):
            bad.append(f"{path.relative_to(PKG.parent)}:{line}: {here} imports {name} from the room above")
    return bad


def test_every_module_is_in_a_room():
    known = set(ORDER) | SHARED | set(TOOLS) | {None}
    stray = [str(p) for p in _files() if _room(_module(p)) not in known]
    assert not stray, f"modules outside the rooms: {stray}"


def test_no_import_points_up():
    bad = [b for p in _files() for b in _upward(p)]
    assert not bad, "\n".join(bad)


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The checker itself: a decode module importing from analysis is reported."""
    fake = tmp_path / "specproof"
    (fake / "decode").mkdir(parents=True)
    (fake / "decode" / "bad.py").write_text("from ..analysis.costs import run_costs\n"
                                            "from ..records import write_json\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", fake)
    assert _upward(fake / "decode" / "bad.py") == \
        ["specproof/decode/bad.py:1: decode imports specproof.analysis.costs from the room above"]


@pytest.mark.parametrize("init", sorted(PKG.glob("*/__init__.py")) + [PKG / "__init__.py"],
                         ids=lambda p: p.parent.name)
def test_init_has_docstring_and_imports_nothing_heavy(init):
    tree = ast.parse(init.read_text())
    if init.parent != PKG:
        assert ast.get_docstring(tree), f"{init}: say what the room holds and what it may import"
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not names & HEAVY


def test_importing_the_rooms_loads_no_model_library():
    code = ("import sys, specproof.decode, specproof.models, specproof.study, specproof.evidence, "
            "specproof.analysis, specproof.publish; "
            f"print(sorted(m for m in {sorted(HEAVY)!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
