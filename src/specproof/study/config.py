"""Study configs: load, validate (JSON schema + cross-references), expand the grid.

Every error names the file and the field, in one line.
"""
from __future__ import annotations

import functools
import itertools
from importlib import resources
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import ConfigError
from ..limits import check, check_all
from ..records import sha256_file

ROOT = Path(__file__).resolve().parents[3]  # the checkout (prompt files named relative to it)
STUDIES = ROOT / "config" / "studies"


def load_schema(schema_name: str) -> dict:
    """A schema from schemas/; the policy enum comes from ``decode.policies.POLICIES``,
    the one list of legal policy names."""
    from ..decode.policies import POLICIES
    schema = yaml.safe_load(resources.files(__package__).joinpath("schemas", schema_name).read_text())
    if "policy" in schema.get("definitions", {}):
        schema["definitions"]["policy"]["enum"] = list(POLICIES)
    return schema


@functools.cache
def _validator(schema_name: str):
    import jsonschema
    return jsonschema.Draft202012Validator(load_schema(schema_name))


def validate(data, schema_name: str, where) -> None:
    """Validate ``data`` against ``schemas/<schema_name>``; the first error is one line naming
    ``where`` and the field."""
    errors = sorted(_validator(schema_name).iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        field = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        msg = err.message if len(err.message) < 160 else err.message[:157] + "..."
        raise ConfigError(f"{where}: field {field}: {msg}")


def load_yaml(path: Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: file does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


@dataclass(frozen=True)
class RunConfig:
    k: int
    policy: str
    verify_mode: str
    temperature: float

    @property
    def label(self) -> str:
        temp = f"{self.temperature:g}".replace(".", "p")  # labels are dot-free: they sit in keys
        return f"K{self.k}-{self.policy}-{self.verify_mode}-T{temp}"


@dataclass
class Study:
    name: str
    path: Path
    data: dict
    # where derived model files go on this machine (the stage's --model-dir); not part of
    # the study's config, so never in its sha256 or its records. None: the default.
    model_dir: Path | None = None
    # where frozen record sets lie (the stage's --manifests): the prompts stage keeps the
    # reserved prompts blind to them (workloads.check_blind). None: not checked.
    manifests: Path | None = None

    @property
    def settings(self) -> dict:
        return self.data["settings"]

    @property
    def threads(self) -> int | None:
        return self.settings.get("threads")

    def target_spec(self, name: str) -> dict:
        spec = dict(self.data["targets"][name])
        if self.threads and spec["backend"] != "mock":
            spec.setdefault("threads", self.threads)
        return spec

    @staticmethod
    def n_ubatch(spec: dict) -> int | None:
        """llama.cpp's micro-batch size for a model spec (512 by default); None off llama."""
        return spec.get("n_ubatch", 512) if spec.get("backend") == "llama" else None

    def draft_spec(self, name: str) -> dict:
        spec = dict(self.data.get("drafts", {})[name])
        if self.threads and spec.get("backend") not in (None, "mock"):
            spec.setdefault("threads", self.threads)
        return spec

    @property
    def pairs(self) -> list[dict]:
        return [dict(p, name=f"{p['target']}+{p['draft']}") for p in self.data["pairs"]]

    @property
    def target_names(self) -> list[str]:
        return list(dict.fromkeys(p["target"] for p in self.data["pairs"]))

    @property
    def qualified_targets(self) -> list[str]:
        """The targets whose two verify paths are probed, predicted and qualified (stages
        batch_invariance, predict, qualification): ``qualification.targets`` in study
        order, every target by default. A study of one network stored several ways names
        one of them: the paths' arithmetic is the question there, not each file's."""
        named = self.section("qualification").get("targets")
        return [t for t in self.target_names if named is None or t in named]

    def restricted(self, *, pair: str | None = None, target: str | None = None) -> "Study":
        """The same study limited to one pair (by its name, ``<target>+<draft>``) or to the
        pairs of one target: one resumable job's share of a stage. Name, path, seed and
        settings are unchanged, so seeds and run ids equal those of the whole study."""
        pairs = [p for p in self.data["pairs"]
                 if (pair is None or f"{p['target']}+{p['draft']}" == pair)
                 and (target is None or p["target"] == target)]
        if not pairs:
            raise ConfigError(f"{self.path}: field pairs: no pair {pair!r}" if pair is not None
                              else f"{self.path}: field targets: no pair has target {target!r}")
        return Study(self.name, self.path, {**self.data, "pairs": pairs}, self.model_dir, self.manifests)

    def grid(self, pair: str | None = None) -> list[RunConfig]:
        """The configurations of the grid, in order, without repeats; with ``pair`` (a
        pair's name) only those of blocks that list it in ``pairs`` or list no pairs."""
        out: list[RunConfig] = []
        for block in self.data["grid"]:
            if pair is not None and pair not in block.get("pairs", [pair]):
                continue
            for k, pol, mode, temp in itertools.product(block["k"], block["policy"],
                                                        block["verify_mode"], block["temperature"]):
                cfg = RunConfig(int(k), pol, mode, float(temp))
                if cfg not in out:
                    out.append(cfg)
        return out

    def section(self, key: str, **defaults) -> dict:
        return {**defaults, **self.data.get(key, {})}

    @property
    def prediction(self) -> dict:
        """The ``prediction`` section with its defaults: ``discovery_fraction`` (share of
        each workload's prompts in the discovery split, 0.5) and ``reserved_disjoint_from``
        (prompt files the reserved split must avoid, none)."""
        return self.section("prediction", discovery_fraction=0.5, reserved_disjoint_from=[])

    @property
    def advise(self) -> dict:
        """The ``advise`` section with its defaults: ``probe_seconds`` (60), how long each
        pair's probe may run on the discovery prompts (at least two are probed), and
        ``confirm_seconds`` (60), how long the confirmation at the chosen K may run on them
        (0: none, the loop model predicts)."""
        return self.section("advise", probe_seconds=60.0, confirm_seconds=60.0)

    @property
    def interval(self) -> str:
        """The speedups' interval (``statistics.interval``): 't', the Student-t interval over
        prompts (default), or 'bca', the two-stage BCa bootstrap of sets recorded before it
        (``analysis.statistics``)."""
        return self.section("statistics", interval="t")["interval"]

    def sha256(self) -> str:
        return sha256_file(self.path)


def study_path(name: str, studies: Path | None = None) -> Path:
    """``<studies>/<name>.yaml``; ``studies`` defaults to the checkout's config/studies."""
    return Path(studies or STUDIES) / f"{name}.yaml"


# the study's fields that ``limits`` bounds: section -> {study field: limits field}
LIMITED = {"settings": {"max_new_tokens": "max_new_tokens", "seed": "seed", "threads": "threads",
                        "repetitions": "repeats"},
           "micro": {"repeats": "repeats"},
           "qualification": {"k": "k", "repetitions": "repeats"}}


def check_limits(data: dict, path: Path) -> None:
    """The bounds of ``limits`` (those of the CLI's flags) on every run setting of a
    study that passed the schema: ``LIMITED``, non-mock models, the grid's K and
    temperatures (finite: YAML's .inf and .nan are numbers to the schema)."""
    for section, fields in LIMITED.items():
        values = data.get(section, {})
        for field, limit in fields.items():
            if values.get(field) is not None:
                check(limit, values[field], f"{path}: field {section}.{field}")
    for group in ("targets", "drafts"):
        for name, spec in data.get(group, {}).items():
            if spec.get("backend") not in (None, "mock"):
                check_all(spec, lambda field: f"{path}: field {group}.{name}.{field}")
    for i, block in enumerate(data["grid"]):
        for key in ("k", "temperature"):
            for j, value in enumerate(block[key]):
                check(key, value, f"{path}: field grid.{i}.{key}.{j}")


def load_study(name_or_path: str | Path, studies: Path | None = None) -> Study:
    """A study by file path, or by name from ``studies`` (default config/studies)."""
    path = Path(name_or_path)
    if not path.suffix:
        path = study_path(str(name_or_path), studies)
        if not path.is_file():
            known = ", ".join(sorted(p.stem for p in path.parent.glob("*.yaml")))
            raise ConfigError(f"unknown study {name_or_path!r}: no {path} (known: {known})")
    data = load_yaml(path)
    validate(data, "study.schema.yaml", path)
    check_limits(data, path)
    if path.stem != data["name"]:
        raise ConfigError(f"{path}: field name: {data['name']!r} differs from the file name {path.stem!r}")
    for i, pair in enumerate(data["pairs"]):
        if pair["target"] not in data["targets"]:
            raise ConfigError(f"{path}: field pairs.{i}.target: unknown target {pair['target']!r}")
        if pair["draft"] not in data.get("drafts", {}):
            raise ConfigError(f"{path}: field pairs.{i}.draft: unknown draft {pair['draft']!r}")
    paired = {p["target"] for p in data["pairs"]}
    for i, name in enumerate(data.get("qualification", {}).get("targets", [])):
        if name not in paired:
            raise ConfigError(f"{path}: field qualification.targets.{i}: {name!r} is not the target "
                              f"of any pair (targets: {', '.join(sorted(paired))})")
    names = {f"{p['target']}+{p['draft']}" for p in data["pairs"]}
    for i, block in enumerate(data["grid"]):
        for name in block.get("pairs", []):
            if name not in names:
                raise ConfigError(f"{path}: field grid.{i}.pairs: unknown pair {name!r} "
                                  f"(pairs: {', '.join(sorted(names))})")
    return Study(data["name"], path, data)


def load_config(path: Path) -> dict:
    data = load_yaml(path)
    validate(data, "config.schema.yaml", path)
    return data
