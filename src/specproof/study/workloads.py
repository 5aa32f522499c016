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
    return out


def prompt_ids(backend: Backend, rec: dict) -> list[int]:
    text = backend.chat_prompt(rec["prompt"]) if rec["format"] == "chat" else rec["prompt"]
    ids = backend.encode(text)
    if not ids:
        raise ConfigError(f"prompt {rec['id']}: tokenizes to no ids")
    return ids


def split_discovery(records: list[dict], fraction: float) -> tuple[list[dict], list[dict]]:
    """Discovery / reserved split, stratified by workload: the first ``fraction`` of each
    workload's prompts (in file order) are for discovery."""
    disc, res = [], []
    for wl in dict.fromkeys(r["workload"] for r in records):
        group = [r for r in records if r["workload"] == wl]
        cut = max(1, min(len(group) - 1, round(fraction * len(group))))
        disc += group[:cut]
        res += group[cut:]
    return disc, res
