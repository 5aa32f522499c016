"""Benchmark 1: our target-only loop vs each backend's own generation, same model,
same prompts, same number of new tokens, greedy, measured side by side in one run.

hf: ``model.generate(do_sample=False)``; llama: ``Llama.generate`` with a greedy
sampler (top_k=1). Both timed end to end (prefill + N new tokens) in ``--repeats``
paired repetitions; the ratio is the median of per-pair ratios. Goal: ours >= 0.98x theirs.

    python benchmarks/target_only.py [--new-tokens 64] [--repeats 7] [--setups hf_fp32,llama_q4_1,llama_f16]
    python benchmarks/target_only.py --setups llama_qwen_1b5,llama_qwen_0b5 --table target_only_qwen  # needs .[qwen]
"""
from __future__ import annotations

import argparse
import statistics

import torch

from common import CHAT_PROMPTS, CODE_PROMPTS, chosen_setups, goal_note, paired_times, write_table
from specproof.decode.decoding import DecodeSettings, decode_target_only
from specproof.models.loader import load_backend
from specproof.publish.benchvalues import target_only_cells, target_only_values


def ours(backend, ids, n):
    s = DecodeSettings(max_new_tokens=n, stop_at_eos=False)
    return lambda: decode_target_only(backend, ids, s)


def hf_generate(backend, ids, n):
    inp = torch.tensor([ids])
    model = backend.model

    def run():
        with torch.inference_mode():
            model.generate(inp, attention_mask=torch.ones_like(inp), do_sample=False,
                           max_new_tokens=n, min_new_tokens=n, pad_token_id=0)
    return run


def llama_generate(backend, ids, n):
    llm = backend.llm

    def run():
        llm.reset()
        for i, _ in enumerate(llm.generate(ids, top_k=1, temp=0.0, reset=True)):
            if i + 1 >= n:
                break
    return run


def _llama(label: str, model: str) -> tuple:
    return label, {"backend": "llama", "model": model, "threads": 2}, llama_generate, "llama-cpp-python generate"


# slug -> (label, backend spec, their generation, its name)
SETUPS = {"hf_fp32": ("hf fp32 SmolLM2", {"backend": "hf", "model": "embedded:smollm2-q4_1", "threads": 2},
                      hf_generate, "transformers generate"),
          "llama_q4_1": _llama("llama.cpp Q4_1 SmolLM2", "embedded:smollm2-q4_1"),
          "llama_f16": _llama("llama.cpp F16 SmolLM2", "embedded:smollm2-f16"),
          "llama_qwen_1b5": _llama("llama.cpp Qwen2.5-Coder 1.5B Q4_K_M", "embedded:qwen2.5-coder-1.5b-q4_k_m"),
          "llama_qwen_0b5": _llama("llama.cpp Qwen2.5-Coder 0.5B Q4_K_M", "embedded:qwen2.5-coder-0.5b-q4_k_m")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--setups", default="hf_fp32,llama_q4_1,llama_f16", help=f"any of {', '.join(SETUPS)}")
    ap.add_argument("--table", default="target_only", help="results/<table>.md/.json (the Qwen models: their own)")
    a = ap.parse_args()
    names = chosen_setups(ap, a.setups, SETUPS)
    samples, cells = [], []
    for slug in names:
        label, spec, theirs_fn, theirs_name = SETUPS[slug]
        backend = load_backend(spec)
        for wl, prompt in (("code", CODE_PROMPTS[0]), ("chat", backend.chat_prompt(CHAT_PROMPTS[0]))):
            ids = backend.encode(prompt)
            times, _ = paired_times(ours(backend, ids, a.new_tokens), theirs_fn(backend, ids, a.new_tokens),
                                    a.repeats)
            samples += [{"setup": slug, "workload": wl, "repeat": i, "ours_s": o, "theirs_s": t}
                        for i, (o, t) in enumerate(zip(times["ours"], times["theirs"]))]
            cells.append((label, slug, wl, theirs_name, a.new_tokens / statistics.median(times["ours"]),
                          a.new_tokens / statistics.median(times["theirs"])))
            print(cells[-1], flush=True)
        backend.close()
    # the ratios come from the producers the audit reruns on the samples
    values = target_only_values(samples)
    rows = [[label, wl, theirs_name, ours_tps, theirs_tps, *ratio_cells]
            for (label, _, wl, theirs_name, ours_tps, theirs_tps), ratio_cells in zip(cells, target_only_cells(samples))]
    ratio = lambda slug, wl, part="": values[f"{slug}.{wl}.ratio{part}"][0]  # noqa: E731
    spread = [(f"{label} {wl}", ratio(slug, wl), ratio(slug, wl, "_q1"), ratio(slug, wl, "_q3"))
              for label, slug, wl, *_ in cells]
    write_table(a.table, "Target-only: our loop vs the backend's own generation",
                ["target", "workload", "baseline", "ours tok/s", "theirs tok/s", "ours/theirs (median)",
                 "ours/theirs (quartiles)"], rows,
                [f"{a.new_tokens} new tokens, greedy, end to end (prefill included); {a.repeats} paired "
                 "repetitions after a warm-up, the order alternating within pairs; tok/s are medians, "
                 "ours/theirs is the median (and quartiles) of the per-pair ratios, which cancels the "
                 "machine's slow drift. Goal ours/theirs >= 0.98.",
                 "Ours returns full-vocabulary float32 logits to Python each step and takes argmax in "
                 "numpy; the baselines sample inside the library.", goal_note(spread, 0.98)],
                {**values, "repeats": (a.repeats, "pairs"), "new_tokens": (a.new_tokens, "tokens")},
                ("target_only", samples))


if __name__ == "__main__":
    main()
