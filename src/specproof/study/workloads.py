"""A study's prompt set (all workloads, one JSONL) and its per-target token ids."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from . import prompts as P
from ..decode.backend import Backend
from ..errors import ConfigError
from .config import ROOT, Study


def build_prompt_set(study: Study) -> list[dict]:
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
    return assign_split(out, cfg["discovery_fraction"], study.settings["seed"], exclude,
                        where=f"{study.path}: field prediction.reserved_disjoint_from")


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
