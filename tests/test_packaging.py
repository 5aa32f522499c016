"""What the package reads at run time ships with it: pyproject's package data covers
every file under a package that is not Python (today: the JSON schemas), so a
non-editable ``pip install .`` finds them through importlib.resources."""
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "specproof"


def test_package_data_covers_the_schemas():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = {p for pkg, globs in data.items() for g in globs
               for p in (ROOT / "src" / pkg.replace(".", "/")).glob(g)}
    needed = {p for p in PKG.rglob("*") if p.is_file() and p.suffix in (".yaml", ".json", ".jsonl")}
    assert needed and needed <= shipped, sorted(str(p) for p in needed - shipped)


def test_schemas_read_through_importlib_resources():
    from importlib import resources
    names = {p.name for p in resources.files("specproof.study").joinpath("schemas").iterdir()}
    assert {"study.schema.yaml", "config.schema.yaml"} <= names
