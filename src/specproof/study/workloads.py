"""A study's prompt set (all workloads, one JSONL) and its per-target token ids."""
from __future__ import annotations

from pathlib import Path

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
    return out


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
    depth = max(len(v) for v in by_cat.values())
    return [v[i] for i in range(depth) for v in by_cat.values() if i < len(v)]
