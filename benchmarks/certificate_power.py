"""The certificate's power on the real pairs, by replay (issue 21, section 3).

For every pair with sampled speculative runs in a frozen record set: re-score the target's
and the draft's distributions along each run's emitted tokens (one position per call, as
the PIT stage does), draw every position's token from the law a planted violation gives
it (skipped residual resample, 1.05x temperature, off-by-one target row; and nothing
planted), and apply the certificate's whole rule to each simulated study
(``specproof.evidence.replay``). Power = share of simulated studies rejected, with its
Clopper-Pearson interval; at the set's own size and at 2x and 4x as many tokens (each
position drawn 2 or 4 times independently). Not timed: any machine state will do.

    python benchmarks/certificate_power.py [--set manifests/paper-qwen-v2/epyc-avx512]
        [--config config/studies/paper-qwen-v2.yaml] [--reps 400] [--table certificate_power]
"""
from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from common import ROOT, add_set_flags, checked_study, sampled_runs, write_table
from specproof.evidence.replay import VIOLATIONS, replay_runs, study_power
from specproof.models.loader import ModelPool
from specproof.records import read_jsonl, read_parquet, seed_from

MULTIPLES = (1, 2, 4)
POWER_GOAL = 0.8


def pair_rows(pair: str, draws: np.ndarray, tvs: np.ndarray, drafted: int, alpha: float) -> pd.DataFrame:
    power = pd.concat([study_power(draws, alpha, m) for m in MULTIPLES], ignore_index=True)
    tv = dict(zip(VIOLATIONS, tvs.mean(axis=0)))
    return power.assign(pair=pair, drafted=drafted, tv_per_token=power["violation"].map(tv))


def values_of(table: pd.DataFrame) -> dict[str, tuple]:
    """The paper's values: per pair and violation, power at each multiple with its
    interval; per pair, tokens and drafted positions; the pairs below the goal."""
    out: dict[str, tuple] = {}
    for r in table.itertuples():
        base = f"{r.pair}.{r.violation}.x{r.multiple}"
        out |= {f"{base}.rate": (r.rate, "share"), f"{base}.ci_low": (r.ci_low, "share"),
                f"{base}.ci_high": (r.ci_high, "share"), f"{base}.studies": (r.studies, "studies"),
                f"{r.pair}.{r.violation}.tv_per_token": (r.tv_per_token, "TV")}
        if r.multiple == 1:
            out |= {f"{r.pair}.tokens": (r.tokens, "tokens"), f"{r.pair}.drafted": (r.drafted, "positions")}
    skip = table[(table["violation"] == "skip_residual") & (table["multiple"] == 1)]
    short = sorted(skip.loc[skip["rate"] < POWER_GOAL, "pair"])
    out |= {"pairs": (len(skip), "pairs"), "pairs_below_goal": (len(short), "pairs"),
            "goal": (POWER_GOAL, "share"), "max_multiple": (max(MULTIPLES), "x")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_set_flags(ap)
    ap.add_argument("--reps", type=int, default=400, help="simulated studies at the set's size")
    ap.add_argument("--table", default="certificate_power", help="the table's name under benchmarks/results/")
    a = ap.parse_args()
    study = checked_study(a.config, a.set, a.model_dir)
    runs, rounds = sampled_runs(a.set), read_parquet(a.set / "rounds.parquet")
    prompts = {r["id"]: r for r in read_jsonl(a.set / "prompts.jsonl")}
    alpha = float(study.data["certificate"]["alpha"])
    pool, parts = ModelPool(study), []
    for tname, target in pool.each_target(sorted(runs["target"].unique())):
        for pair, sub in runs[runs["target"] == tname].groupby("pair"):
            draws, tvs, drafted = replay_runs(target, pool.draft_backend, sub, rounds, prompts,
                                              a.reps, seed_from(pair))
            parts.append(pair_rows(pair, draws, tvs, drafted, alpha))
            print(parts[-1].to_string(), flush=True)
    table = pd.concat(parts, ignore_index=True)
    rows = [[r.pair, r.violation, r.multiple, r.tokens, r.studies, r.rejections, r.rate,
             f"[{r.ci_low:.3f}, {r.ci_high:.3f}]", r.tv_per_token] for r in table.itertuples()]
    write_table(a.table, f"Certificate power on the real pairs by replay ({a.set.name} of "
                f"{a.set.parent.name})",
                ["pair", "violation", "tokens x", "tokens", "studies", "rejected", "power", "95% CI",
                 "TV per token"], rows,
                [f"Replayed from {a.set.relative_to(ROOT) if a.set.is_absolute() else a.set}: every sampled "
                 f"speculative run, re-scored one position per call; alpha = {alpha}, the whole rule "
                 "(KS and chi-square in id, rank and ratio order, each at alpha/6).",
                 "tokens x: each position drawn that many times independently (a study of 2x or 4x the "
                 "set's tokens with the same distributions).",
                 f"Goal: power >= {POWER_GOAL} against a skipped residual at the set's size."],
                values_of(table))


if __name__ == "__main__":
    main()
