"""The replay's premise on the real loop (issue 21, section 3): runs of the real
speculative loop with a violation planted in its sampler emit the law the certificate's
power replay assigns them (``specproof.evidence.replay.loop_agreement``).

For one pair of a frozen record set, per violation with a planted loop (nothing planted,
skipped residual resample, 1.05x temperature; ``--violations``): one run per prompt, on the first
``--prompts`` of the prompts its sampled runs used (by id), at their temperature, fixed K
and batched verification (``--verify-mode``); each run's tokens re-scored one position per call (as the PIT
stage and the replay score them). The rows say whether the emitted tokens follow the
replay's law (z_law, and for nothing planted the KS of their PIT) and whether the runs
were enough to tell that law from the target's own (z_target). Not timed.

    python benchmarks/planted_loop.py [--set manifests/paper-qwen-v2/epyc-avx512]
        [--config config/studies/paper-qwen-v2.yaml] [--pair qwen-1b5+qwen-0b5-draft]
        [--prompts 12] [--new-tokens 64] [--k 4] [--verify-mode batched|serialized]
        [--violations null,skip_residual,temperature_1.05] [--table planted_loop]
"""
from __future__ import annotations

import argparse

from common import add_set_flags, checked_study, chosen_setups, sampled_runs, write_table
from specproof.evidence.replay import LOOP_VIOLATIONS, planted_loop_agreement
from specproof.models.loader import ModelPool
from specproof.records import read_jsonl, seed_from
from specproof.study.workloads import prompt_ids

COLUMNS = ("violation", "runs", "positions", "drafted", "log_ratio_sum", "mean_if_law", "mean_if_target",
           "z_law", "z_target", "ks_law_pvalue", "agrees", "distinguished", "rule_min_pvalue", "rule_rejected")


def values_of(pair: str, results: list[dict], alpha: float) -> dict[str, tuple]:
    """The paper's values: per violation its counts, statistics and verdicts; how many
    violations agree with the replay's law and how many the runs could tell apart."""
    units = {"runs": "runs", "positions": "tokens", "drafted": "positions", "log_ratio_sum": "nats",
             "mean_if_law": "nats", "mean_if_target": "nats", "z_law": "sd", "z_target": "sd",
             "ks_law_pvalue": "p", "rule_min_pvalue": "p"}
    out: dict[str, tuple] = {"alpha": (alpha, "level"), "violations": (len(results), "violations"),
                             "agreeing": (sum(r["agrees"] for r in results), "violations"),
                             "distinguished": (sum(bool(r["distinguished"]) for r in results), "violations")}
    for r in results:
        out |= {f"{pair}.{r['violation']}.{m}": (r[m], u) for m, u in units.items() if r[m] is not None}
        out |= {f"{pair}.{r['violation']}.{m}": (r[m], "verdict") for m in ("agrees", "rule_rejected")}
    return out


def cell(value) -> str | int | float:
    return "-" if value is None else round(value, 4) if isinstance(value, float) else value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_set_flags(ap)
    ap.add_argument("--pair", default="qwen-1b5+qwen-0b5-draft")
    ap.add_argument("--prompts", type=int, default=12, help="planted runs per violation, one per prompt")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--verify-mode", default="batched", choices=["batched", "serialized"],
                    help="the planted loop's verification (the study's sampled runs verify in batches)")
    ap.add_argument("--violations", default=",".join(LOOP_VIOLATIONS), help="comma-separated, of: "
                    + ", ".join(LOOP_VIOLATIONS))
    ap.add_argument("--table", default="planted_loop", help="the table's name under benchmarks/results/")
    a = ap.parse_args()
    violations = chosen_setups(ap, a.violations, LOOP_VIOLATIONS)
    study = checked_study(a.config, a.set, a.model_dir)
    runs = sampled_runs(a.set)
    runs = runs[runs["pair"] == a.pair]
    if runs.empty:
        ap.error(f"{a.set}/runs.parquet: no sampled speculative runs of pair {a.pair!r}")
    by_id = {r["id"]: r for r in read_jsonl(a.set / "prompts.jsonl")}
    chosen = sorted(runs["prompt_id"].unique())[:a.prompts]
    temperature, alpha = float(runs["temperature"].iloc[0]), float(study.data["certificate"]["alpha"])
    pool = ModelPool(study)
    target, draft = pool.target(runs["target"].iloc[0]), pool.draft_backend(runs["draft"].iloc[0])
    prompts = [prompt_ids(target, by_id[i]) for i in chosen]
    results = [planted_loop_agreement(target, draft, prompts, v, a.k, a.new_tokens, temperature, alpha,
                                      seed_from(f"{a.pair}/{v}"), a.verify_mode) for v in violations]
    write_table(a.table, f"The real loop with a violation planted against the replay's law ({a.pair}, "
                f"{a.set.name} of {a.set.parent.name})", list(COLUMNS),
                [[cell(r[c]) for c in COLUMNS] for r in results],
                [f"One run per prompt on {len(chosen)} of the set's sampled prompts ({', '.join(chosen)}), "
                 f"T = {temperature}, fixed K = {a.k}, {a.verify_mode} verification, up to {a.new_tokens} new tokens.",
                 "S = sum of log L_t(x_t)/p_t(x_t), L_t the replay's law of the planted violation; z_law = "
                 "(S - mean_if_law)/sd if every token follows L_t, z_target the same if every token follows "
                 f"p_t. agrees: |z_law| within the two-sided {alpha} level (nothing planted: the KS p-value of "
                 "the PIT under L_t = p_t at least alpha); distinguished: |z_target| beyond it.",
                 "rule_rejected: the certificate's whole rule on these tokens alone (a small study: its power "
                 "is the replay's, at this size)."],
                values_of(a.pair, results, alpha))


if __name__ == "__main__":
    main()
