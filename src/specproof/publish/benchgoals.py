"""The benchmarks' goals as rows: each goal of ``paper/cited.yaml`` (``benchmark_goals``)
held against the benchmark values it names, so the paper prints a verdict the audit
recomputes instead of comparing numbers itself.

A goal compares one measured number with its target: the minimum (or, for ``agg`` "max",
the maximum) of the named values of the named tables, ``>=``, ``>`` or ``<=`` the goal; values
listed in ``must_hold`` (booleans such as identical ids) must also be true. A goal whose
tables are not all there gives no rows. Rows 'bench_goal.<goal>.{measured,goal,met}'.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

from ..errors import SpecproofError
from .numbers import Rows

QWEN_TABLES = ("llama_speculative_qwen_k1", "llama_speculative_qwen_k4")
QWEN_FA = "llama_speculative_qwen_k1_fa"
QWEN_PROMPTS = "llama_speculative_qwen_prompts"
LIBRARY_RATIOS = tuple(f"{r}.{w}.adaptive_ratio" for r in ("hf_heuristic", "hf_confidence", "llama_pmin")
                       for w in ("code", "chat"))
QWEN_VS_COMPLETION = tuple((t, f"qwen.{c}_vs_completion_q1") for t in QWEN_TABLES for c in ("fixed", "adaptive", "guard"))


@dataclass(frozen=True)
class Goal:
    name: str
    values: tuple[tuple[str, str], ...]  # (table, value name) pairs the measured number comes from
    goal: str  # key of cited.yaml benchmark_goals
    op: str = ">="
    agg: str = "min"
    must_hold: tuple[tuple[str, str], ...] = ()


def _all(table: str, *names: str) -> tuple[tuple[str, str], ...]:
    return tuple((table, n) for n in names)


def _policy_goals(table: str, suffix: str) -> tuple[Goal, ...]:
    """The policies table's three goals (adaptive vs the best fixed K and vs the library
    rules, guard vs target-only), named with ``suffix``."""
    return (Goal(f"adaptive_over_best_fixed{suffix}", _all(table, "adaptive.code.ratio", "adaptive.chat.ratio"),
                 "adaptive_over_best_fixed"),
            Goal(f"adaptive_over_library_rule{suffix}", _all(table, *LIBRARY_RATIOS), "adaptive_over_library_rule"),
            Goal(f"guard{suffix}", _all(table, "guard.code.ratio", "guard.chat.ratio"), "guard_over_target_only"))


GOALS = (
    Goal("target_only", _all("target_only", "min_ratio"), "target_only_ratio"),
    Goal("target_only_qwen", _all("target_only_qwen", "min_ratio"), "target_only_ratio"),
    Goal("ngram", _all("ngram", "min_ratio"), "ngram_ratio", must_hold=_all("ngram", "ids_identical")),
    Goal("model_draft_realized", _all("model_draft", "min_realized_over_ideal"), "realized_over_ideal"),
    Goal("model_draft_best", _all("model_draft", "best.realized"), "best_speedup"),
    *_policy_goals("policies", ""),
    Goal("llama_spec_fixed", _all("llama_speculative", "min_fixed_ratio"), "llama_spec_ratio"),
    Goal("llama_spec_policy", _all("llama_speculative", "min_policy_ratio"), "llama_spec_ratio"),
    # over both Qwen runs: each times our target-only decoding against llama-completion's
    Goal("qwen_target_vs_completion", tuple((t, "qwen.target_only_vs_completion") for t in QWEN_TABLES),
         "target_only_vs_completion"),
    *(Goal(f"qwen_fixed_{t.rpartition('_')[2]}", _all(t, "qwen.fixed_ratio"), "llama_spec_ratio_qwen")
      for t in QWEN_TABLES),
    Goal("qwen_policy", tuple((t, "qwen.policy_ratio") for t in QWEN_TABLES), "llama_spec_ratio"),
    # our fastest speculative configuration beats llama-completion by its lower quartile
    Goal("qwen_beat_completion", QWEN_VS_COMPLETION, "beat_completion", op=">", agg="max"),
    # the same at K = 1 with flash attention on in both loops (matched settings)
    Goal("qwen_fa_target_vs_completion", _all(QWEN_FA, "qwen.target_only_vs_completion"), "target_only_vs_completion"),
    Goal("qwen_fa_fixed", _all(QWEN_FA, "qwen.fixed_ratio"), "llama_spec_ratio_qwen"),
    Goal("qwen_fa_policy", _all(QWEN_FA, "qwen.policy_ratio"), "llama_spec_ratio"),
    Goal("qwen_fa_beat_completion", _all(QWEN_FA, *(f"qwen.{c}_vs_completion_q1" for c in ("fixed", "adaptive", "guard"))),
         "beat_completion", op=">", agg="max"),
    # on the study's own prompts, each ratio with its interval over prompts: the best of ours
    # beats llama-completion by its interval's lower end; our target-only loop against it
    Goal("qwen_prompts_beat_completion",
         _all(QWEN_PROMPTS, *(f"qwen.{c}_vs_completion_low" for c in ("fixed", "adaptive", "guard"))),
         "beat_completion", op=">", agg="max"),
    Goal("qwen_prompts_target_vs_completion", _all(QWEN_PROMPTS, "qwen.target_only_vs_completion_gmean"),
         "target_only_vs_completion"),
    # the other benchmarks on the Qwen pair
    Goal("ngram_qwen", _all("ngram_qwen", "min_ratio"), "ngram_ratio", must_hold=_all("ngram_qwen", "ids_identical")),
    Goal("model_draft_qwen_realized", _all("model_draft_qwen", "min_realized_over_ideal"), "realized_over_ideal"),
    Goal("model_draft_qwen_micro", _all("model_draft_qwen", "min_realized_over_micro"), "realized_over_micro"),
    *_policy_goals("policies_qwen", "_qwen"),
    # advise on unseen prompts: every pair within 10% of its realized speedup, every interval covering it
    Goal("advise_check", _all("advise_check", "max_abs_error"), "advise_within", op="<=", agg="max",
         must_hold=_all("advise_check", "all_covered")),
)
OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le}


def goal_rows(bench: dict, goals: dict, cited_path: str) -> dict:
    """Rows for every goal of GOALS whose values are all among the ``bench`` rows
    ('bench.<table>.<name>', as benchtables.bench_numbers writes them); ``goals`` is
    cited.yaml's benchmark_goals."""
    rows = Rows()
    for g in GOALS:
        keys = [f"bench.{t}.{n}" for t, n in (*g.values, *g.must_hold)]
        if not all(k in bench for k in keys):
            continue
        if g.goal not in goals:
            raise SpecproofError(f"{cited_path}: field benchmark_goals.{g.goal} is missing (goal {g.name} of "
                                 f"{', '.join(sorted({t for t, _ in g.values}))})")
        values = [bench[f"bench.{t}.{n}"]["value"] for t, n in g.values]
        if any(v is None for v in values):
            continue
        measured = (max if g.agg == "max" else min)(values)
        met = OPS[g.op](measured, goals[g.goal]) and all(bench[f"bench.{t}.{n}"]["value"] is True
                                                        for t, n in g.must_hold)
        tables = sorted({t for t, _ in (*g.values, *g.must_hold)})
        source = ", ".join([bench[f"bench.{t}.{n}"]["source"] for t, n in g.values[:1]] + [cited_path])
        put = rows.at("bench_goal", {"tables": tables, "op": g.op}, goal=g.name)
        put("measured", measured, bench[keys[0]]["unit"], source)
        put("goal", goals[g.goal], bench[keys[0]]["unit"], cited_path)
        put("met", bool(met), "bool", source)
    return rows.out


def cited_goal_rows(bench: dict, cited) -> dict:
    """goal_rows with the goals of the cited.yaml at ``cited`` (none when it is None)."""
    if cited is None:
        return {}
    from .cited import read_cited
    goals = read_cited(cited).get("benchmark_goals") or {}
    return goal_rows(bench, goals, str(cited))
