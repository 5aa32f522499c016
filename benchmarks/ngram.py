"""Benchmark 2: model-free drafting. Our n-gram drafter vs transformers' prompt lookup
(``generate(prompt_lookup_num_tokens=K)``) on the hf fp32 SmolLM2 target, and vs
llama-cpp-python's ``LlamaPromptLookupDecoding`` on the llama.cpp F16 SmolLM2 target (and,
in a table of its own, on the llama.cpp Qwen2.5-Coder 1.5B target).
Same K, greedy, code and chat prompts, same number of new tokens, end to end (prefill
included), paired repetitions with alternating order; output ids compared.

    python benchmarks/ngram.py [--k 4] [--new-tokens 64] [--repeats 7] [--setups hf_fp32,llama_f16]
    python benchmarks/ngram.py --setups llama_qwen_1b5 --table ngram_qwen   # needs .[qwen]
"""
from __future__ import annotations

import argparse
import statistics

import numpy as np
import torch

from common import CHAT_PROMPTS, CODE_PROMPTS, chosen_setups, goal_note, paired_times, ratio_summary, write_table
from specproof.decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from specproof.decode.drafters import NGramDrafter
from specproof.models.loader import load_backend
from specproof.models.files import resolve
from specproof.decode.policies import FixedPolicy


def until_eos(ids: list[int], eos: frozenset[int]) -> list[int]:
    """ids before the first EOS, the part every run's ids can be compared on."""
    cut = next((i for i, t in enumerate(ids) if t in eos), len(ids))
    return ids[:cut]


def divergence(backend, prompt, greedy, other) -> str:
    """'equal' (before the first EOS), or 'i=<first divergent index>, margin=<top-2
    logit gap there>'."""
    greedy = until_eos(greedy, backend.eos_ids)
    n = min(len(greedy), len(other))
    i = next((j for j in range(n) if greedy[j] != other[j]), None)
    if i is None:
        return "equal"
    backend.reset()
    top2 = np.sort(backend.forward(prompt + greedy[:i], last_only=True)[0])[-2:]
    backend.reset()
    return f"i={i}, margin={top2[1] - top2[0]:.2g}"


def _ours(backend, ids, settings, k):
    return lambda: decode_speculative(backend, NGramDrafter(max_ngram=3), ids, settings, FixedPolicy(k)).new_ids


def _hf_lookup(hf, ids, n, k):
    """transformers' prompt lookup on the hf backend's model: the new ids."""
    inp = torch.tensor([ids])

    def run():
        with torch.inference_mode():
            out = hf.model.generate(inp, attention_mask=torch.ones_like(inp), do_sample=False,
                                    prompt_lookup_num_tokens=k, max_matching_ngram_size=3,
                                    max_new_tokens=n, eos_token_id=sorted(hf.eos_ids), pad_token_id=0)
        return out[0, len(ids):].tolist()
    return run


def _llama_lookup(model: str, n: int, k: int):
    """A factory of llama-cpp-python prompt-lookup runs on its own Llama of ``model`` (the
    same settings as our backend: n_ctx 2048, 2 threads): ids -> a run giving the new ids."""
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
    llm = Llama(model_path=str(resolve(model)), n_ctx=2048, n_threads=2, n_threads_batch=2, verbose=False,
                draft_model=LlamaPromptLookupDecoding(num_pred_tokens=k, max_ngram_size=3))

    def factory(ids):
        def run():
            llm.reset()
            out = []
            for tok in llm.generate(ids, top_k=1, temp=0.0, reset=True):
                out.append(tok)
                if len(out) >= n:
                    break
            return out
        return run
    return factory


# slug -> (label, model, backend, baseline's name); hf rows stop at EOS (see setups)
SETUPS = {"hf_fp32": ("hf fp32 SmolLM2", "embedded:smollm2-q4_1", "hf", "transformers prompt lookup"),
          "llama_f16": ("llama.cpp F16 SmolLM2", "embedded:smollm2-f16", "llama",
                        "llama-cpp-python LlamaPromptLookupDecoding"),
          "llama_qwen_1b5": ("llama.cpp Qwen2.5-Coder 1.5B Q4_K_M", "embedded:qwen2.5-coder-1.5b-q4_k_m", "llama",
                             "llama-cpp-python LlamaPromptLookupDecoding")}


def setups(names: list[str], n: int, k: int):
    """(slug, label, our backend, their run factory, their name, our settings) per setup."""
    # transformers can only be forced past EOS with min_new_tokens, which masks EOS and so
    # continues with other text than greedy: the hf rows both stop at EOS instead, so both
    # sides decode the same tokens (llama.cpp's generate continues greedily, as ours does)
    for slug in names:
        label, model, kind, theirs_name = SETUPS[slug]
        backend = load_backend({"backend": kind, "model": model, "threads": 2})
        theirs = (lambda ids, b=backend: _hf_lookup(b, ids, n, k)) if kind == "hf" else _llama_lookup(model, n, k)
        yield slug, label, backend, theirs, theirs_name, DecodeSettings(max_new_tokens=n, stop_at_eos=kind == "hf")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--setups", default="hf_fp32,llama_f16", help=f"any of {', '.join(SETUPS)}")
    ap.add_argument("--table", default="ngram", help="results/<table>.md/.json (the Qwen target: its own)")
    a = ap.parse_args()
    names = chosen_setups(ap, a.setups, SETUPS)
    n, k = a.new_tokens, a.k
    rows = []
    values, spread = {}, []
    for slug, label, backend, theirs_fn, theirs_name, settings in setups(names, n, k):
        for wl, text in (("code", CODE_PROMPTS[1]), ("chat", backend.chat_prompt(CHAT_PROMPTS[1]))):
            ids = backend.encode(text)
            times, out = paired_times(_ours(backend, ids, settings, k), theirs_fn(ids), a.repeats)
            ids_o, ids_t = out["ours"], out["theirs"]
            a_ids, b_ids = until_eos(ids_o, backend.eos_ids), until_eos(ids_t, backend.eos_ids)
            same = a_ids[:len(b_ids)] == b_ids[:len(a_ids)] and len(ids_o) == len(ids_t)
            greedy = decode_target_only(backend, ids, settings).new_ids
            ours_tps = len(ids_o) / statistics.median(times["ours"])
            theirs_tps = len(ids_t) / statistics.median(times["theirs"])
            ratio, q1, q3 = ratio_summary(times)
            rows.append([label, wl, theirs_name, k, ours_tps, theirs_tps, ratio, f"{q1:.3f}-{q3:.3f}", same,
                         divergence(backend, ids, greedy, ids_o), divergence(backend, ids, greedy, ids_t)])
            values[f"{slug}.{wl}.ratio"] = (ratio, "x")
            spread.append((f"{label} {wl}", ratio, q1, q3))
            print(rows[-1], flush=True)
        backend.close()
    write_table(a.table, "Model-free drafting: our n-gram drafter vs the libraries' prompt lookup",
                ["target", "workload", "baseline", "K", "ours tok/s", "theirs tok/s", "ours/theirs (median)",
                 "ours/theirs (quartiles)", "ids identical",
                 "ours vs target-only greedy", "theirs vs target-only greedy"],
                rows, [f"Up to {n} new tokens (the hf rows stop at EOS on both sides: transformers can only be "
                       "forced past it by masking EOS, which changes the text that follows), "
                       f"greedy, end to end (prefill included), {a.repeats} paired "
                       "repetitions after a warm-up (order alternating); tok/s are medians, ours/theirs the "
                       "median (and quartiles) of the per-pair ratios; goal ours/theirs >= 1 with identical ids "
                       "(before the first EOS, and the same length).",
                       "All three match n-grams of size 3 down to 1; ours takes the most recent match, "
                       "transformers and llama-cpp-python the earliest (max_matching_ngram_size = max_ngram_size = 3).",
                       "The last two columns compare each output with our target-only greedy run (one "
                       "position per call): 'equal', or the first divergent index i and the target's "
                       "top-2 logit margin there (prefix scored in one call). A small "
                       "margin means batched verification's float32 rounding flipped a near tie.",
                       goal_note(spread, 1.0)],
                {**values, "k": (k, "K"), "min_ratio": (min(r[6] for r in rows), "x"),
                 "max_ratio": (max(r[6] for r in rows), "x"),
                 "ids_identical": (all(r[8] for r in rows), "bool"),
                 "ours_equal_greedy": (all(r[9] == "equal" for r in rows), "bool")})


if __name__ == "__main__":
    main()
