"""Every JSON the project writes parses in a strict parser: a non-finite float (NaN,
+-Infinity, numpy's included, nested anywhere) is written as null, and ``write_json`` passes
``allow_nan=False`` so that one slipping past the conversion fails the write loudly."""
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from specproof import records
from specproof.records import read_json, strict_json, write_json

ROOT = Path(__file__).resolve().parents[1]

# Frozen records written before JSON was strict (bare NaN where a value is undefined). They
# are sealed by their manifests' sha256 and stay as they are; a new one here is a regression.
FROZEN_WITH_BARE_NAN = {
    "manifests/cpu-smollm2/epyc-avx2/stats.json",
    "manifests/cpu-smollm2/xeon-avx512/stats.json",
    "manifests/paper-qwen/epyc-zen4/stats.json",
    "manifests/paper-smollm2/epyc-avx512/stats.json",
}


def strict_loads(text: str):
    """json.loads refusing NaN, Infinity and -Infinity, as strict parsers (and Typst) do."""
    def refuse(name):
        raise ValueError(f"not strict JSON: bare {name}")
    return json.loads(text, parse_constant=refuse)


NASTY = {
    "nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"),
    "np_nan": np.float64("nan"), "np_inf32": np.float32("inf"), "np_int": np.int64(3),
    "np_bool": np.bool_(True), "fine": 0.25,
    "nested": {"list": [1.0, float("nan"), {"deep": [float("-inf"), 2]}], "tuple": (float("inf"), "x")},
    "array": np.array([1.5, np.nan, np.inf]),
    "matrix": np.array([[np.nan, 1.0], [2.0, -np.inf]]),
}
EXPECTED = {
    "nan": None, "inf": None, "-inf": None, "np_nan": None, "np_inf32": None, "np_int": 3,
    "np_bool": True, "fine": 0.25,
    "nested": {"list": [1.0, None, {"deep": [None, 2]}], "tuple": [None, "x"]},
    "array": [1.5, None, None],
    "matrix": [[None, 1.0], [2.0, None]],
}


def test_write_json_writes_non_finite_floats_as_null(tmp_path):
    path = tmp_path / "stats.json"
    write_json(NASTY, path)
    assert strict_loads(path.read_text()) == EXPECTED
    assert read_json(path) == EXPECTED


def test_strict_json_is_strict_and_leaves_finite_data_as_json_would():
    assert strict_loads(strict_json(NASTY)) == EXPECTED
    finite = {"b": [1, 2.5, "x", None, True], "a": {"c": 1e-300}}
    assert strict_json(finite, indent=1, sort_keys=True) == json.dumps(finite, indent=1, sort_keys=True)


def test_a_nan_slipping_past_the_conversion_fails_the_write(tmp_path, monkeypatch):
    """allow_nan=False is the guard: without the conversion, writing NaN raises."""
    monkeypatch.setattr(records, "finite_json", lambda obj: obj)
    with pytest.raises(ValueError):
        write_json({"x": float("nan")}, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()  # the atomic write left nothing behind


def test_every_tracked_json_is_strict_but_the_frozen_ones_listed():
    tracked = subprocess.run(["git", "ls-files", "*.json"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    loose = set()
    for name in tracked.stdout.split():
        try:
            strict_loads((ROOT / name).read_text())
        except ValueError:
            loose.add(name)
    assert loose <= FROZEN_WITH_BARE_NAN, f"JSON with bare NaN/Infinity: {sorted(loose - FROZEN_WITH_BARE_NAN)}"
