"""A study's prompt set (all workloads, one JSONL) and its per-target token ids."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np

from . import prompts as P
from ..decode.backend import Backend
from ..errors import ConfigError
from ..limits import check_context
from ..models.loader import load_tokenizer, preflight
from ..records import models_by_role
from .config import ROOT, Study


def build_prompt_set(study: Study, manifests: Path | None = None) -> list[dict]:
    """Every workload's prompts, each marked discovery or reserved (``assign_split``);
    with ``manifests`` the reserved ones are checked blind (``check_blind``)."""
    out = []
    for workload, spec in study.data["workloads"].items():
        n = spec.get("n")
        if spec["source"] == "humaneval":
            recs = P.code_prompts(n or 8)
        elif spec["source"] == "builtin":
            recs = P.chat_prompts(n or 8)
        else:
            if "path" not in spec:
                raise ConfigError(f"{study.path}: field workloads.{workload}.path: required for source file")
            path = Path(spec["path"])
            recs = P.load(path if path.is_absolute() else ROOT / path)[: n or None]
        out.extend(dict(r, workload=workload) for r in recs)
    P.check_unique_ids(out, str(study.path))
    cfg = study.prediction
    exclude = {r["prompt"] for f in cfg["reserved_disjoint_from"] for r in P.load(_path(f))}
    records = assign_split(out, cfg["discovery_fraction"], study.settings["seed"], exclude,
                           where=f"{study.path}: field prediction.reserved_disjoint_from")
    if manifests is not None and not cfg.get("not_blind"):
        check_blind(records, study, manifests)
    return records


def frozen_prompt_sets(manifests: Path, study: Study) -> dict[str, set[str]]:
    """{'<study>@<machine>': its prompt texts} for every frozen record set under
    ``manifests`` of another study that shares a target model with ``study`` (the same
    ``model`` spec); a rerun of the same study is not another study."""
    mine = {_model_key(study.target_spec(n)) for n in study.data["targets"]}
    out = {}
    for manifest in sorted(Path(manifests).glob("*/*/manifest.json")):
        d = manifest.parent  # a name starting with '.': a set a freeze is writing, not frozen
        if d.parent.name == study.name or d.name.startswith(".") or not (d / "models.json").is_file():
            continue
        models = json.loads((d / "models.json").read_text())
        theirs = {_model_key(m.get("spec", {})) for (role, _), m in models_by_role(models).items() if role == "target"}
        if mine & theirs:
            out[f"{d.parent.name}@{d.name}"] = {r["prompt"] for r in P.load(d / "prompts.jsonl")}
    return out


def _model_key(spec: dict) -> str:
    """What makes two target specs the same model: the ``model`` a spec names (a file or
    embedded name), or for a spec without one (the mock backend) all its fields but the
    thread count."""
    if spec.get("model") is not None:
        return str(spec["model"])
    return json.dumps({k: v for k, v in spec.items() if k != "threads"}, sort_keys=True)


def check_blind(records: list[dict], study: Study, manifests: Path) -> None:
    """The sealed prediction P is blind only if no reserved prompt was ever run by an
    earlier frozen study of the same models: refuse the first overlap, naming the set and
    the count (list its prompts.jsonl under prediction.reserved_disjoint_from, or state
    prediction.not_blind with why)."""
    reserved = {r["prompt"] for r in records if r["split"] == "reserved"}
    for set_id, prompts in frozen_prompt_sets(manifests, study).items():
        shared = reserved & prompts
        if shared:
            raise ConfigError(f"{study.path}: field prediction.reserved_disjoint_from: {len(shared)} of "
                              f"{len(reserved)} reserved prompts were run by the frozen set {set_id} of the "
                              "same models, so P would not be blind; list its prompts.jsonl there, or set "
                              "prediction.not_blind to say why not")


def _path(name: str) -> Path:
    return Path(name) if Path(name).is_absolute() else ROOT / name


def assign_split(records: list[dict], fraction: float, seed: int, exclude: set[str] = frozenset(),
                 where: str = "prompt set") -> list[dict]:
    """Mark each record ``split: discovery | reserved``, once, where the prompt set is
    written; every stage reads the mark (``split_of``). Per workload, n_res = n -
    max(1, min(n - 1, round(fraction n))) reserved prompts are drawn with the study seed
    from the prompts whose text is not in ``exclude`` (the prompts of an earlier frozen
    study, so nothing was tuned on them), dealt round-robin over categories after a seeded
    shuffle within each; the rest are for discovery."""
    rng = np.random.default_rng(seed)
    reserved: set[str] = set()
    for wl in dict.fromkeys(r["workload"] for r in records):
        group = [r for r in records if r["workload"] == wl]
        n_res = len(group) - max(1, min(len(group) - 1, round(fraction * len(group))))
        if n_res == 0:
            continue
        eligible = [r for r in group if r["prompt"] not in exclude]
        if len(eligible) < n_res:
            raise ConfigError(f"{where}: workload {wl!r} has {len(eligible)} prompts outside the "
                              f"excluded studies, {n_res} needed for the reserved set")
        by_cat: dict[str, list[dict]] = {}
        for r in eligible:
            by_cat.setdefault(r.get("category"), []).append(r)
        for cat in by_cat.values():
            cat[:] = [cat[i] for i in rng.permutation(len(cat))]
        reserved |= {r["id"] for r in _deal(by_cat)[:n_res]}
    return [dict(r, split="reserved" if r["id"] in reserved else "discovery") for r in records]


def split_of(records: list[dict], fraction: float = 0.5) -> tuple[list[dict], list[dict]]:
    """(discovery, reserved) as the prompt set marks them; a set written before the mark
    (frozen earlier) is split by ``split_discovery`` with its discovery fraction."""
    if records and all("split" in r for r in records):
        return ([r for r in records if r["split"] == "discovery"],
                [r for r in records if r["split"] == "reserved"])
    return split_discovery(records, fraction)


def interleaved_by_workload(records: list[dict]) -> list[dict]:
    """The records taken in turn from each workload (first of each, then second, ...),
    each workload in its own order, so any first n span the workloads."""
    by_wl: dict[str, list[dict]] = {}
    for r in records:
        by_wl.setdefault(r["workload"], []).append(r)
    return [r for group in itertools.zip_longest(*by_wl.values()) for r in group if r is not None]


def prompt_ids(backend: Backend, rec: dict) -> list[int]:
    text = backend.chat_prompt(rec["prompt"]) if rec["format"] == "chat" else rec["prompt"]
    ids = backend.encode(text)
    if not ids:
        raise ConfigError(f"prompt {rec['id']}: tokenizes to no ids")
    return ids


def check_context_fits(study: Study, records: list[dict]) -> None:
    """Refuse, before any model loads, a prompt that would not fit a model of the study
    with ``max_new_tokens``: each target's and each model draft's tokenizer (no weights,
    ``load_tokenizer``) counts every prompt as the runs render it, against the positions
    the backend will hold (a llama spec's n_ctx, an hf model's trained positions). One
    line names the config, the prompt id, its token count and the model's limit."""
    new = int(study.settings["max_new_tokens"])
    models = [("targets", n, study.target_spec(n)) for n in study.data["targets"]]
    models += [("drafts", n, study.draft_spec(n)) for n in dict.fromkeys(p["draft"] for p in study.pairs)]
    for section, name, spec in models:
        _, positions = preflight(spec, study.model_dir)
        if positions is None:
            continue
        llama = spec["backend"] == "llama"
        what = f"{section}.{name}'s n_ctx" if llama else f"the positions {section}.{name} was trained for"
        hint = f"raise {section}.{name}.n_ctx" if llama else "shorten the prompt or leave it out"
        tokenizer = load_tokenizer(spec, study.model_dir)
        try:
            for rec in records:
                check_context(f"{study.path}: prompt {rec['id']}", what, len(prompt_ids(tokenizer, rec)), new,
                              positions, hint)
        finally:
            tokenizer.close()


def split_discovery(records: list[dict], fraction: float) -> tuple[list[dict], list[dict]]:
    """Discovery / reserved split, stratified by workload and category: within a workload the
    prompts are dealt round-robin over their categories (each category in file order), and
    the first ``fraction`` of that order is for discovery, so a file sorted by category does
    not put whole categories on one side. A workload of one category splits in file order."""
    disc, res = [], []
    for wl in dict.fromkeys(r["workload"] for r in records):
        group = _deal_by_category([r for r in records if r["workload"] == wl])
        cut = max(1, min(len(group) - 1, round(fraction * len(group))))
        disc += group[:cut]
        res += group[cut:]
    return disc, res


def _deal_by_category(group: list[dict]) -> list[dict]:
    by_cat: dict[str, list[dict]] = {}
    for r in group:
        by_cat.setdefault(r.get("category"), []).append(r)
    return _deal(by_cat)


def _deal(by_cat: dict[str, list[dict]]) -> list[dict]:
    depth = max(len(v) for v in by_cat.values())
    return [v[i] for i in range(depth) for v in by_cat.values() if i < len(v)]
