"""Benchmark values recomputed from the raw samples a table stores: one producer per
kind, used by the benchmark that writes the table and by the audit that checks it.

A table of a kind registered in ``PRODUCERS`` stores ``kind`` and ``samples`` (one dict
per paired unit: a pair of models, a prompt, a repetition) beside its ``values``; the
audit reruns the kind's producer on the samples and compares every value it yields.
Tables written before samples were stored carry neither field and are named by the
audit as checked against their rows only.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import SpecproofError

OURS = ("ours target-only", "ours fixed", "ours adaptive", "ours guard")
THEIRS = ("theirs target-only", "theirs fixed", "theirs default")
ACCEPTANCE_RUNS = ("ours fixed", "theirs fixed", "theirs default")


def spread(values: list[float]) -> tuple[float, float, float]:
    """(median, lower quartile, upper quartile) by statistics.quantiles (exclusive
    method); one value is its own spread."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4)
    return statistics.median(values), q1, q3


def _acceptance(samples: list[dict], run: str) -> float:
    """accepted / drafted tokens of ``run`` summed over samples (NaN when none drafted)."""
    drafted = sum(s["drafted"][run] for s in samples)
    return sum(s["accepted"][run] for s in samples) / drafted if drafted else math.nan


def speculative_summary(samples: list[dict]) -> dict:
    """One pair's llama_speculative result from its samples, each {tokens_per_s: {run:
    tok/s}, drafted: {run: n}, accepted: {run: n}, ids_equal, text_equal}: medians of
    tok/s; ratios as spread() of per-sample ratios; speedup = median of speculative /
    the same side's target-only; vs_completion = each of ours / theirs target-only."""
    def ratio(num, den):
        return spread([s["tokens_per_s"][num] / s["tokens_per_s"][den] for s in samples])

    return {"n_pairs": len(samples),
            "median": {n: statistics.median(s["tokens_per_s"][n] for s in samples) for n in OURS + THEIRS},
            "fixed_ratio": ratio("ours fixed", "theirs fixed"),
            "adaptive_ratio": ratio("ours adaptive", "theirs default"),
            "guard_ratio": ratio("ours guard", "theirs default"),
            "vs_completion": {n: ratio(n, "theirs target-only") for n in OURS},
            "speedup": {**{n: ratio(n, "ours target-only")[0] for n in OURS[1:]},
                        **{n: ratio(n, "theirs target-only")[0] for n in THEIRS[1:]}},
            "acceptance": {n: _acceptance(samples, n) for n in ACCEPTANCE_RUNS},
            "ids_equal": all(s["ids_equal"] for s in samples),
            "text_equal": all(s["text_equal"] for s in samples)}


def _pair_values(key: str, r: dict) -> dict[str, tuple]:
    """The values one pair's summary gives, key -> (value, unit)."""
    m, sp, acc = r["median"], r["speedup"], r["acceptance"]
    best_ours = max(sp["ours adaptive"], sp["ours guard"])
    out = {"fixed_ratio": (r["fixed_ratio"][0], "x"), "adaptive_ratio": (r["adaptive_ratio"][0], "x"),
           "guard_ratio": (r["guard_ratio"][0], "x"),
           "policy_ratio": (max(r["adaptive_ratio"][0], r["guard_ratio"][0]), "x"),
           "ours_fixed_speedup": (sp["ours fixed"], "x"),
           "ours_best_speedup": (max(sp["ours fixed"], best_ours), "x"),
           "theirs_fixed_speedup": (sp["theirs fixed"], "x"), "theirs_default_speedup": (sp["theirs default"], "x"),
           "theirs_best_speedup": (max(sp["theirs fixed"], sp["theirs default"]), "x"),
           "target_only_ratio": (m["ours target-only"] / m["theirs target-only"], "x"),
           "fixed_speedup_ratio": (sp["ours fixed"] / sp["theirs fixed"], "x"),
           "policy_speedup_ratio": (best_ours / sp["theirs default"], "x"),
           "acceptance_ours": (acc["ours fixed"], "share"), "acceptance_theirs": (acc["theirs fixed"], "share")}
    for name in OURS:  # each of our configurations / llama-completion's target-only
        slug = name.removeprefix("ours ").replace("-", "_")
        med, q1, q3 = r["vs_completion"][name]
        out |= {f"{slug}_vs_completion": (med, "x"), f"{slug}_vs_completion_q1": (q1, "x"),
                f"{slug}_vs_completion_q3": (q3, "x")}
    return {f"{key}.{name}": v for name, v in out.items()}


def pair_summaries(samples: list[dict]) -> dict[str, dict]:
    """speculative_summary per pair: samples grouped by their ``pair`` key, in first-seen order."""
    keys = list(dict.fromkeys(s["pair"] for s in samples))
    return {k: speculative_summary([s for s in samples if s["pair"] == k]) for k in keys}


def llama_speculative_values(samples: list[dict], summaries: dict[str, dict] | None = None) -> dict[str, tuple]:
    """Every derived value of a llama_speculative table: per pair (``summaries``, by
    default pair_summaries of the samples) and across pairs (min/max ratios, which pairs
    reach a speedup > 1 only on their side, ids and text equal everywhere)."""
    summaries = pair_summaries(samples) if summaries is None else summaries
    keys = list(summaries)
    values = {}
    for k, r in summaries.items():
        values |= _pair_values(k, r)
    fixed = [values[f"{k}.fixed_ratio"][0] for k in keys]
    policy = [values[f"{k}.policy_ratio"][0] for k in keys]
    theirs_only = [k for k in keys if values[f"{k}.theirs_best_speedup"][0]
                   > max(1.0, values[f"{k}.ours_best_speedup"][0])]
    return values | {"min_fixed_ratio": (min(fixed), "x"), "max_fixed_ratio": (max(fixed), "x"),
                     "min_policy_ratio": (min(policy), "x"), "max_policy_ratio": (max(policy), "x"),
                     "pairs": (len(keys), "pairs"), "theirs_only_speedup_pairs": (len(theirs_only), "pairs"),
                     "theirs_only_speedup_keys": ("; ".join(theirs_only) or "none", "pairs"),
                     "prompts": (len({s["prompt"] for s in samples}), "prompts"),
                     "repeats": (len({s["repeat"] for s in samples}), "runs"),
                     "ids_equal": (all(r["ids_equal"] for r in summaries.values()), "bool"),
                     "text_equal": (all(r["text_equal"] for r in summaries.values()), "bool")}


def target_only_values(samples: list[dict]) -> dict[str, tuple]:
    """A target_only table's ratios: per (setup, workload), the spread of per-repetition
    ratios theirs seconds / ours seconds (ours' speed over theirs); min and max medians."""
    keys = list(dict.fromkeys((s["setup"], s["workload"]) for s in samples))
    values = {}
    for setup, wl in keys:
        med, q1, q3 = spread([s["theirs_s"] / s["ours_s"] for s in samples
                              if (s["setup"], s["workload"]) == (setup, wl)])
        values |= {f"{setup}.{wl}.ratio": (med, "x"), f"{setup}.{wl}.ratio_q1": (q1, "x"),
                   f"{setup}.{wl}.ratio_q3": (q3, "x")}
    medians = [v for k, (v, _) in values.items() if k.endswith(".ratio")]
    return values | {"min_ratio": (min(medians), "x"), "max_ratio": (max(medians), "x"),
                     "repeats": (len({s["repeat"] for s in samples}), "pairs")}


def quartile_text(r: tuple[float, float, float]) -> str:
    """A (median, q1, q3) spread as a table cell: 'median (q1-q3)', three decimals."""
    return f"{r[0]:.3f} ({r[1]:.3f}-{r[2]:.3f})"


def speculative_cells(r: dict) -> list:
    """A llama_speculative row after its label, from one pair's speculative_summary:
    medians of tok/s, ratios with their quartiles, speedups, acceptance, ids and text equal."""
    m, sp, acc = r["median"], r["speedup"], r["acceptance"]
    return [m["ours target-only"], m["theirs target-only"], m["ours fixed"], m["theirs fixed"],
            quartile_text(r["fixed_ratio"]), sp["ours fixed"], sp["theirs fixed"], m["ours adaptive"],
            m["ours guard"], m["theirs default"], quartile_text(r["adaptive_ratio"]),
            quartile_text(r["guard_ratio"]), sp["ours adaptive"], sp["ours guard"], sp["theirs default"],
            acc["ours fixed"], acc["theirs fixed"], acc["theirs default"], "yes" if r["ids_equal"] else "NO",
            "yes" if r["text_equal"] else "NO"]


def target_only_cells(samples: list[dict]) -> list[list]:
    """Per (setup, workload) row, in first-seen order: the median ratio and its quartiles' cell."""
    v = target_only_values(samples)
    keys = dict.fromkeys(f"{s['setup']}.{s['workload']}.ratio" for s in samples)
    return [[v[k][0], f"{v[k + '_q1'][0]:.3f}-{v[k + '_q3'][0]:.3f}"] for k in keys]


ADVISE_GOAL = 0.10  # advise's predicted speedup within this share of the realized one


ADVISE_RESAMPLES = 2000  # the realized speedup's percentile bootstrap over prompts (seed 0)


def _realized_interval(runs: list[dict]) -> tuple[float, float]:
    """95% percentile interval of the realized speedup (``evidence.advise.pooled_ratio``)
    over ADVISE_RESAMPLES resamples of the prompts (``bootstrap_ratios``, PCG64 seeded 0),
    each prompt bringing its runs of both paths."""
    import pandas as pd
    from ..evidence.advise import bootstrap_ratios, prompt_sums
    ratio = bootstrap_ratios(prompt_sums(pd.DataFrame(runs)), np.random.Generator(np.random.PCG64(0)),
                             ADVISE_RESAMPLES)
    low, high = np.quantile(ratio, [0.025, 0.975])
    return float(low), float(high)


def advise_sample(row: dict, micro, rounds, runs) -> dict:
    """One pair's advise_check sample from its advise.parquet ``row`` and its records
    (advise_micro, advise_rounds, advise_runs rows): k, predicted [low, high], model, probe,
    future and confirmation prompts, target_ms_pred (``predicted_target_ms``) and the
    check's runs (path, prompt, new_tokens, decode_ns)."""
    from ..evidence.advise import predicted_target_ms, run_phases
    confirm, check = run_phases(runs)
    return {"pair": row["pair"], "k": int(row["k"]), "predicted": float(row["predicted_speedup"]),
            "low": float(row["predicted_low"]), "high": float(row["predicted_high"]), "model": row["model"],
            "probe_prompts": int(row["probe_prompts"]), "future_prompts": int(row["future_prompts"]),
            "confirm_prompts": int(row.get("confirm_prompts", 0)),
            "loop_predicted": float(row.get("loop_predicted_speedup", row["predicted_speedup"])),
            "target_ms_pred": predicted_target_ms(micro, rounds, confirm),
            "runs": check[["path", "prompt", "new_tokens", "decode_ns"]]
            .astype({"prompt": int, "new_tokens": int, "decode_ns": int}).to_dict(orient="records")}


def _advise_row(s: dict) -> dict:
    """One pair's check from its sample: per path its decode ms per token (sum decode ns /
    sum tokens); realized = target-only ms / speculative ms; error = predicted / realized
    - 1; and the miss split exactly, realized / predicted = target_factor * spec_factor
    with target_factor = t_T,real / t_T,pred (the target-only step) and spec_factor =
    m_pred / m_real (m the speculative ms per token; predicted = t_T,pred / m_pred)."""
    tok, ns = {"speculative": 0, "target": 0}, {"speculative": 0, "target": 0}
    for r in s["runs"]:
        tok[r["path"]] += r["new_tokens"]
        ns[r["path"]] += r["decode_ns"]
    ms = {p: ns[p] / tok[p] / 1e6 for p in ns}
    realized = ms["target"] / ms["speculative"]
    error = s["predicted"] / realized - 1
    return {"realized": realized, "error": error, "covered": s["low"] <= realized <= s["high"],
            "within": abs(error) <= ADVISE_GOAL,
            "reserved": len({r["prompt"] for r in s["runs"] if r["path"] == "speculative"}),
            "realized_interval": _realized_interval(s["runs"]),
            "target_factor": ms["target"] / s["target_ms_pred"],
            "spec_factor": s["target_ms_pred"] / s["predicted"] / ms["speculative"]}


def advise_values(samples: list[dict]) -> dict[str, tuple]:
    """An advise_check table's values: per pair its K, predicted [low, high], realized,
    error, covered, within the goal; how many pairs are covered and within it, the
    largest |error| and whether every interval covered."""
    values: dict[str, tuple] = {}
    for s in samples:
        r, key = _advise_row(s), s["pair"]
        values |= {f"{key}.k": (s["k"], "K"), f"{key}.predicted": (s["predicted"], "x"),
                   f"{key}.low": (s["low"], "x"), f"{key}.high": (s["high"], "x"),
                   f"{key}.realized": (r["realized"], "x"), f"{key}.error": (r["error"], "share"),
                   f"{key}.realized_low": (r["realized_interval"][0], "x"),
                   f"{key}.realized_high": (r["realized_interval"][1], "x"),
                   f"{key}.covered": (r["covered"], "bool"), f"{key}.within_goal": (r["within"], "bool"),
                   f"{key}.probe_prompts": (s["probe_prompts"], "prompts"),
                   f"{key}.confirm_prompts": (s["confirm_prompts"], "prompts"),
                   f"{key}.loop_predicted": (s["loop_predicted"], "x"),
                   f"{key}.reserved_prompts": (r["reserved"], "prompts"),
                   f"{key}.target_factor": (r["target_factor"], "x"), f"{key}.spec_factor": (r["spec_factor"], "x")}
    rows = [_advise_row(s) for s in samples]
    return values | {"pairs": (len(rows), "pairs"), "covered": (sum(r["covered"] for r in rows), "pairs"),
                     "within_goal": (sum(r["within"] for r in rows), "pairs"), "goal": (ADVISE_GOAL, "share"),
                     "max_abs_error": (max(abs(r["error"]) for r in rows), "share"),
                     "all_covered": (all(r["covered"] for r in rows), "bool")}


def advise_cells(samples: list[dict]) -> list[list]:
    """Per pair, the advise_check table's row: pair, K, probe and confirmation prompts, the
    loop model's prediction, the prediction and its interval, reserved prompts, realized with its interval, error, covered, within the goal, and the miss's
    two factors (target-only step, speculative ms per token)."""
    out = []
    for s in samples:
        r = _advise_row(s)
        out.append([s["pair"], s["k"], s["probe_prompts"], s["confirm_prompts"], s["loop_predicted"], s["predicted"],
                    f"[{s['low']:.3f}, {s['high']:.3f}]",
                    r["reserved"], r["realized"], "[{:.3f}, {:.3f}]".format(*r["realized_interval"]), f"{r['error']:+.1%}", "yes" if r["covered"] else "NO",
                    "yes" if r["within"] else "NO", r["target_factor"], r["spec_factor"]])
    return out


# name -> (numerator run, denominator run): the tok/s ratios a study-prompts table gives
# with an interval over prompts
PROMPT_RATIOS = {"target_only_vs_completion": ("ours target-only", "theirs target-only"),
                 "fixed_vs_completion": ("ours fixed", "theirs target-only"),
                 "adaptive_vs_completion": ("ours adaptive", "theirs target-only"),
                 "guard_vs_completion": ("ours guard", "theirs target-only"),
                 "fixed_ratio": ("ours fixed", "theirs fixed"),
                 "theirs_fixed_speedup": ("theirs fixed", "theirs target-only"),
                 "theirs_default_speedup": ("theirs default", "theirs target-only")}


def prompt_interval_values(samples: list[dict]) -> dict[str, tuple]:
    """Per pair and PROMPT_RATIOS entry: the geometric mean over prompts (each prompt's
    mean log ratio over its repetitions) and its 95% Student-t interval over prompts
    (``statistics.t_interval``), '<pair>.<name>_gmean/_low/_high'; and, of our three
    speculative configurations, the one whose ratio to llama-completion's target-only
    decoding is highest ('<pair>.best_vs_completion*', its name in '_config': chosen
    after the fact, so its interval is optimistic)."""
    from ..analysis.statistics import t_interval
    out: dict[str, tuple] = {}
    for pair in dict.fromkeys(s["pair"] for s in samples):
        group = [s for s in samples if s["pair"] == pair]
        prompts = sorted({s["prompt"] for s in group})
        for name, (num, den) in PROMPT_RATIOS.items():
            logs = [np.log([s["tokens_per_s"][num] / s["tokens_per_s"][den] for s in group if s["prompt"] == p])
                    for p in prompts]
            low, high = t_interval(logs)
            out |= {f"{pair}.{name}_gmean": (float(np.exp(np.mean([x.mean() for x in logs]))), "x"),
                    f"{pair}.{name}_low": (float(np.exp(low)), "x"), f"{pair}.{name}_high": (float(np.exp(high)), "x")}
        best = max(("fixed", "adaptive", "guard"), key=lambda c: out[f"{pair}.{c}_vs_completion_gmean"][0])
        out |= {f"{pair}.best_vs_completion{end}": out[f"{pair}.{best}_vs_completion{end}"]
                for end in ("_gmean", "_low", "_high")}
        out[f"{pair}.best_vs_completion_config"] = (best, "text")
    return out


PRODUCERS: dict[str, Callable[[list[dict]], dict[str, tuple]]] = {
    "llama_speculative": llama_speculative_values, "target_only": target_only_values,
    "advise_check": advise_values,
    "llama_speculative_prompts": lambda samples: llama_speculative_values(samples) | prompt_interval_values(samples)}
# kind -> (the cells of each row its samples give, in row order; the column they start at)
_SPECULATIVE_CELLS = (lambda samples: [speculative_cells(r) for r in pair_summaries(samples).values()], 1)
ROW_CELLS: dict[str, tuple[Callable[[list[dict]], list[list]], int]] = {
    "llama_speculative": _SPECULATIVE_CELLS, "llama_speculative_prompts": _SPECULATIVE_CELLS,
    "target_only": (target_only_cells, 5), "advise_check": (advise_cells, 0)}
# tables written since samples were stored: they must keep them (a table stripped of its
# samples would otherwise pass as an older one)
SAMPLED_TABLES = ("target_only", "target_only_qwen", "llama_speculative_qwen_k1", "llama_speculative_qwen_k4",
                  "llama_speculative_qwen_k1_fa", "advise_check", "llama_speculative_qwen_prompts")


def same_value(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        number = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)  # noqa: E731
        return number(a) and number(b) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def check_values(record: dict, path) -> int:
    """A table's stored values against its kind's producer rerun on its samples: an error
    naming the first value that differs (or is missing); the number of values checked.
    A table without ``kind`` and ``samples`` (written before they were stored) checks 0."""
    if "kind" not in record and "samples" not in record:
        if Path(path).stem in SAMPLED_TABLES:
            raise SpecproofError(f"{path}: fields kind and samples are missing (this table stores its samples)")
        return 0
    kind = record.get("kind")
    if kind not in PRODUCERS or not isinstance(record.get("samples"), list) or not record["samples"]:
        raise SpecproofError(f"{path}: fields kind and samples must name a known kind ({', '.join(PRODUCERS)}) "
                             "and hold its samples")
    try:
        derived = PRODUCERS[kind](record["samples"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise SpecproofError(f"{path}: field samples cannot give its values ({type(exc).__name__}: {exc})") from None
    stored = record["values"]
    for key, (value, unit) in derived.items():
        entry = stored.get(key)
        value = _plain_nan(value)
        if entry is None or entry.get("unit") != unit or not same_value(entry.get("value"), value):
            found = "missing" if entry is None else repr(entry.get("value"))
            raise SpecproofError(f"{path}: field values.{key} is {found}; its samples give {value!r}")
    return len(derived) + _check_rows(record, path)


def _plain_nan(value):
    """NaN as the JSON writer stores it (null)."""
    return None if isinstance(value, float) and math.isnan(value) else value


def _check_rows(record: dict, path) -> int:
    """A sampled table's rows against the cells its samples give (ROW_CELLS): an error
    naming the first cell that differs; the number of cells checked."""
    cells_of, start = ROW_CELLS[record["kind"]]
    expected, rows = cells_of(record["samples"]), record.get("rows")
    if not isinstance(rows, list) or len(rows) != len(expected):
        raise SpecproofError(f"{path}: field rows has {len(rows) if isinstance(rows, list) else 'no'} rows; "
                             f"its samples give {len(expected)}")
    for i, (row, cells) in enumerate(zip(rows, expected)):
        for j, cell in enumerate(cells, start):
            found = row[j] if isinstance(row, list) and j < len(row) else "missing"
            if not same_value(found, _plain_nan(cell)):
                raise SpecproofError(f"{path}: field rows[{i}][{j}] is {found!r}; its samples give {cell!r}")
    return sum(map(len, expected))


def check_bench_values(tables: dict) -> str:
    """Every table of ``tables`` (benchtables.read_tables: path -> record) through
    check_values; a report line naming the tables whose values were recomputed and those
    stored without samples."""
    checked, without = {}, []
    for path, record in tables.items():
        n = check_values(record, path)
        if n:
            checked[path.stem] = n
        else:
            without.append(path.stem)
    line = (f"{sum(checked.values())} values of {len(checked)} tables recomputed from their samples "
            f"({', '.join(checked) or 'none'})")
    return line + (f"; storing no samples (older or derived tables), checked against their rows only: "
                   f"{', '.join(without)}"
                   if without else "")
