"""Benchmark 5: our speculative loop vs llama.cpp's own (llama-speculative-simple), on the
study's llama.cpp targets (SmolLM2 F16, F16 with n_ubatch = 1, Q8_0) with the embedded
Q4_1 draft, greedy, the same prompts and the same fixed K.

Four runs per prompt and repetition, back to back in an order that rotates every
repetition: our target-only loop, our speculative loop (policy fixed, K), llama.cpp's
target-only decoding (llama-completion) and its speculative decoding
(llama-speculative-simple, --spec-draft-n-max = --spec-draft-n-min = K, p_min 0). Both
sides run 2 threads for target and draft, n_ctx 2048, n_batch 512, the same n_ubatch.
Their tokens/s are the tools' own decode timers (prompt processing excluded, as in
ours: generated tokens / decode seconds). Per (prompt, repetition) pair:

    spec ratio   = ours speculative tok/s / theirs speculative tok/s
    our speedup  = ours speculative / ours target-only;  their speedup likewise

and the table gives the median over pairs with the quartiles of the spec ratio.
Acceptance = accepted / drafted tokens over all rounds. "ids equal": our speculative ids
equal our target-only greedy ids; "text equal": their speculative text equals their
target-only text and our target-only text (whitespace at the ends stripped).

The tools come from `make peers` (benchmarks/peers.py: llama-cpp-python's vendored
llama.cpp, this CPU's flags); without them this prints why and exits 0.

    python benchmarks/llama_speculative.py [--k 6] [--new-tokens 128] [--repeats 3]
    python benchmarks/llama_speculative.py --quick     # one prompt, one repetition, no table
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys

from common import CHAT_PROMPTS, CODE_PROMPTS, write_table
from peers import build_record, missing_tools, tool_path
from specproof.decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from specproof.decode.drafters import ModelDrafter
from specproof.decode.policies import make_policy
from specproof.models.files import resolve
from specproof.models.loader import load_backend

DRAFT = "embedded:smollm2-q4_1"
# (label, model, n_ubatch): the study's llama.cpp targets
TARGETS = [("llama F16 + Q4_1", "embedded:smollm2-f16", 512),
           ("llama F16 n_ubatch=1 + Q4_1", "embedded:smollm2-f16", 1),
           ("llama Q8_0 + Q4_1", "embedded:smollm2-q8_0", 512)]
THREADS, N_CTX, N_BATCH = 2, 2048, 512

_DECODED = re.compile(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds")
_EVAL = re.compile(r"\beval time =\s+([\d.]+) ms /\s+(\d+) runs")
_DRAFTED = re.compile(r"n_drafted\s*=\s*(\d+)")
_ACCEPTED = re.compile(r"n_accept\s*=\s*(\d+)")


def _common_args(model: str, prompt: str, n_ubatch: int) -> list[str]:
    return ["-m", str(resolve(model)), "-p", prompt, "-t", str(THREADS), "-tb", str(THREADS),
            "-c", str(N_CTX), "-b", str(N_BATCH), "-ub", str(n_ubatch), "--temp", "0", "--top-k", "1",
            "--seed", "0"]


def _run(cmd: list[str]) -> tuple[str, str]:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        tail = res.stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise SystemExit(f"llama_speculative: error: {cmd[0]} exited {res.returncode}: {tail[0]}")
    return res.stdout, res.stderr


def _parse(pattern: re.Pattern, text: str, tool: str) -> re.Match:
    m = pattern.search(text)
    if m is None:
        raise SystemExit(f"llama_speculative: error: {tool}: no '{pattern.pattern}' in its log; "
                         "has the tool's output format changed?")
    return m


def _generated(stdout: str, prompt: str) -> str:
    """The generated text: stdout after the echoed prompt, without the EOS marker."""
    head, sep, tail = stdout.partition(prompt)
    text = tail if sep else stdout
    return text.replace("[end of text]", "").strip()


def theirs_target_only(model: str, prompt: str, n: int, n_ubatch: int) -> dict:
    """llama-completion: n greedy tokens; tok/s = decode calls / eval seconds."""
    out, err = _run([str(tool_path("llama-completion")), *_common_args(model, prompt, n_ubatch),
                     "-n", str(n), "-no-cnv", "--no-display-prompt"])
    m = _parse(_EVAL, err, "llama-completion")
    return {"tokens_per_s": int(m[2]) / (float(m[1]) / 1e3), "text": _generated(out, prompt)}


def theirs_speculative(model: str, prompt: str, n: int, n_ubatch: int, k: int) -> dict:
    """llama-speculative-simple at fixed K. It stops once it has emitted more than -n
    tokens (one past the budget), so it gets -n n-1 to emit n like every other run."""
    out, err = _run([str(tool_path("llama-speculative-simple")), *_common_args(model, prompt, n_ubatch),
                     "-n", str(n - 1), "-md", str(resolve(DRAFT)), "-td", str(THREADS),
                     "--spec-type", "draft-simple", "--spec-draft-n-max", str(k),
                     "--spec-draft-n-min", str(k), "--spec-draft-p-min", "0"])
    m = _parse(_DECODED, err, "llama-speculative-simple")
    drafted = int(_parse(_DRAFTED, err, "llama-speculative-simple")[1])
    accepted = int(_parse(_ACCEPTED, err, "llama-speculative-simple")[1])
    return {"tokens_per_s": int(m[1]) / float(m[2]), "text": _generated(out, prompt),
            "drafted": drafted, "accepted": accepted}


def _acceptance(runs) -> float:
    drafted = sum(r.k for run in runs for r in run.rounds)
    return sum(r.accepted for run in runs for r in run.rounds) / drafted if drafted else float("nan")


def _spread(values: list[float]) -> tuple[float, float, float]:
    """(median, lower quartile, upper quartile); one value is its own spread."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, med, q3 = statistics.quantiles(values, n=4)
    return statistics.median(values), q1, q3


def compare(label: str, model: str, n_ubatch: int, draft, texts: list[str], a) -> tuple[list, dict]:
    target = load_backend({"backend": "llama", "model": model, "n_ubatch": n_ubatch, "threads": THREADS,
                           "n_ctx": N_CTX, "n_batch": N_BATCH})
    s = DecodeSettings(a.new_tokens, 0.0, 0)
    names = ["ours target-only", "ours speculative", "theirs target-only", "theirs speculative"]
    pairs, ours_spec_runs, theirs_spec, ids_equal, text_equal = [], [], [], True, True
    decode_speculative(target, ModelDrafter(draft), target.encode(texts[0]), s, make_policy("fixed", a.k))  # warm-up
    for rep in range(a.repeats):
        order = names[rep % 4:] + names[:rep % 4]
        for text in texts:
            ids = target.encode(text)
            out = {}
            for name in order:
                if name == "ours target-only":
                    out[name] = decode_target_only(target, ids, s)
                elif name == "ours speculative":
                    out[name] = decode_speculative(target, ModelDrafter(draft), ids, s, make_policy("fixed", a.k))
                elif name == "theirs target-only":
                    out[name] = theirs_target_only(model, text, a.new_tokens, n_ubatch)
                else:
                    out[name] = theirs_speculative(model, text, a.new_tokens, n_ubatch, a.k)
            ours_to, ours_sp = out["ours target-only"], out["ours speculative"]
            th_to, th_sp = out["theirs target-only"], out["theirs speculative"]
            ids_equal &= ours_sp.new_ids == ours_to.new_ids
            text_equal &= th_sp["text"] == th_to["text"] == ours_to.text.strip()
            ours_spec_runs.append(ours_sp)
            theirs_spec.append(th_sp)
            pairs.append({"ours_to": ours_to.tokens_per_s, "ours_sp": ours_sp.tokens_per_s,
                          "theirs_to": th_to["tokens_per_s"], "theirs_sp": th_sp["tokens_per_s"]})
    target.close()
    med = {key: statistics.median(p[key] for p in pairs) for key in pairs[0]}
    ratio, q1, q3 = _spread([p["ours_sp"] / p["theirs_sp"] for p in pairs])
    ours_speedup = _spread([p["ours_sp"] / p["ours_to"] for p in pairs])[0]
    theirs_speedup = _spread([p["theirs_sp"] / p["theirs_to"] for p in pairs])[0]
    acc_ours = _acceptance(ours_spec_runs)
    acc_theirs = sum(r["accepted"] for r in theirs_spec) / max(sum(r["drafted"] for r in theirs_spec), 1)
    row = [label, med["ours_to"], med["ours_sp"], med["theirs_to"], med["theirs_sp"], ours_speedup,
           theirs_speedup, f"{ratio:.3f} ({q1:.3f}-{q3:.3f})", acc_ours, acc_theirs,
           "yes" if ids_equal else "NO", "yes" if text_equal else "NO"]
    key = {512: "", 1: "_ub1"}[n_ubatch]
    key = f"{model.split(':')[1].split('-')[1]}{key}"
    values = {f"{key}.spec_ratio": (ratio, "x"), f"{key}.ours_speedup": (ours_speedup, "x"),
              f"{key}.theirs_speedup": (theirs_speedup, "x"), f"{key}.ours_spec_tps": (med["ours_sp"], "tok/s"),
              f"{key}.theirs_spec_tps": (med["theirs_sp"], "tok/s"), f"{key}.acceptance_ours": (acc_ours, "share"),
              f"{key}.acceptance_theirs": (acc_theirs, "share")}
    return row, values


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one prompt, one repetition; print, write no table")
    a = ap.parse_args()
    missing = missing_tools()
    if missing:
        print(f"llama_speculative: skipped: llama.cpp's own tools are not built ({', '.join(missing)} "
              f"missing under {tool_path(missing[0]).parent}); run `make peers` first")
        return 0
    draft = load_backend({"backend": "llama", "model": DRAFT, "threads": THREADS})
    texts = CODE_PROMPTS[:1] if a.quick else CODE_PROMPTS + [draft.chat_prompt(p) for p in CHAT_PROMPTS]
    if a.quick:
        a.repeats = 1
    header = ["pair", "ours target-only tok/s", "ours spec tok/s", "theirs target-only tok/s",
              "theirs spec tok/s", "our speedup", "their speedup", "ours/theirs spec (quartiles)",
              "acceptance ours", "acceptance theirs", "ids equal", "text equal"]
    rows, values = [], {}
    for label, model, n_ubatch in TARGETS:
        row, vals = compare(label, model, n_ubatch, draft, texts, a)
        rows.append(row)
        values |= vals
        print(dict(zip(header, row)), flush=True)
    if a.quick:
        print("llama_speculative: --quick smoke run: no table written")
        return 0
    build = build_record() or {}
    values |= {"k": (a.k, "K"), "new_tokens": (a.new_tokens, "tokens"), "repeats": (a.repeats, "runs")}
    write_table("llama_speculative", "Our speculative loop vs llama.cpp's llama-speculative-simple, fixed K",
                header, rows,
                [f"K = {a.k} on both sides (theirs: --spec-draft-n-max = --spec-draft-n-min = {a.k}, p_min 0), "
                 f"greedy, {a.new_tokens} new tokens, {len(texts)} prompts (code and chat) x {a.repeats} "
                 "repetitions, the four runs of a pair back to back in an order rotating every repetition; "
                 f"{THREADS} threads for target and draft on both sides.",
                 "tok/s columns: medians over pairs; speedups and ours/theirs: medians of per-pair ratios.",
                 f"Their tools: llama-cpp-python {build.get('version', '?')} sdist (sha256 "
                 f"{build.get('sdist_sha256', '?')[:12]}), vendor/llama.cpp built with {build.get('cmake_args', '?')}.",
                 "Goal (issue 14): ours/theirs >= 1.1 on every pair."],
                values)
    return 0


if __name__ == "__main__":
    sys.exit(main())
