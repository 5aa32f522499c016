"""advise on unseen prompts (issue 24, section 4): is the predicted speedup at the advised K
within 10% of the speedup realized on prompts the probe never saw, and does the
prediction interval cover it?

For every pair of a frozen paper-tier set, run the study's advise stage again
(``evidence.advise.advise_study``): the probe on discovery prompts, taken in turn from each
workload for ``--probe-seconds`` per pair, chooses K; the confirmation at that K on the
same prompts for ``--confirm-seconds`` predicts; the realized speedup at the advised K on
reserved prompts (greedy, target-only and speculative back to back per prompt). The
prompts are fresh (``--fresh N``, default 16): N code (HumanEval) and N chat prompts the
set never used, split with the set's seed and ``--discovery-fraction`` (default half to
discovery), so neither advise's design nor the set saw them; ``--fresh 0`` uses the set's own split instead. The stage's
records (advise*.parquet, prompts.jsonl) go to ``results/<table>/``; the table's samples
are the per-pair predictions and the realized runs, from which the audit recomputes every
value. Timed: run it on a quiet machine.

    python benchmarks/advise_check.py [--set manifests/paper-qwen-v2/epyc-avx512]
        [--config config/studies/paper-qwen-v2.yaml] [--probe-seconds 60] [--confirm-seconds 60]
        [--fresh 16] [--discovery-fraction 0.5]
        [--table advise_check]
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from common import RESULTS, add_set_flags, checked_study, provenance, write_table
from specproof.evidence.advise import advise_study
from specproof.publish.audit.benchmarks import ADVISE_RECORDS
from specproof.publish.benchvalues import ADVISE_GOAL, advise_cells, advise_sample, advise_values
from specproof.records import read_jsonl, read_parquet
from specproof.study import prompts as P
from specproof.study.workloads import assign_split

HUMANEVAL_PROBLEMS = 164


def samples_of(out: Path) -> list[dict]:
    """One sample per pair (``benchvalues.advise_sample``) from the stage's records in ``out``."""
    advice, micro, rounds, runs = (read_parquet(out / name) for name in ADVISE_RECORDS)
    of = lambda df, pair: df[df["pair"] == pair]  # noqa: E731
    return [advise_sample(r, of(micro, r["pair"]), of(rounds, r["pair"]), of(runs, r["pair"]))
            for r in advice.to_dict(orient="records")]


def fresh_prompts(used: list[dict], n: int, seed: int, fraction: float) -> list[dict]:
    """n HumanEval and n chat prompts whose text is not among ``used`` (spread evenly over
    those left, chat in file order), marked discovery or reserved as a study marks its
    own (``workloads.assign_split`` with ``seed`` and ``fraction``)."""
    seen = {r["prompt"] for r in used}
    code = [r for r in P.code_prompts(HUMANEVAL_PROBLEMS) if r["prompt"] not in seen]
    chat = [r for r in P.load(P.CHAT_SET) if r["prompt"] not in seen]
    if len(code) < n or len(chat) < n:
        raise SystemExit(f"advise_check.py: --fresh {n}: only {len(code)} code and {len(chat)} chat prompts unused")
    picked = [dict(r, workload="code") for r in code[::len(code) // n][:n]] + \
        [dict(r, workload="chat") for r in chat[:n]]
    return assign_split(picked, fraction, seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_set_flags(ap)
    ap.add_argument("--probe-seconds", type=float, default=60.0, help="each pair's probe budget")
    ap.add_argument("--confirm-seconds", type=float, default=60.0,
                    help="each pair's confirmation budget (0: the loop model predicts)")
    ap.add_argument("--fresh", type=int, default=16, metavar="N",
                    help="N unused code and N unused chat prompts (0: the set's own split)")
    ap.add_argument("--discovery-fraction", type=float, default=0.5, metavar="F",
                    help="the share of the fresh prompts of each workload the probe and confirmation take")
    ap.add_argument("--table", default="advise_check", help="the table's name under benchmarks/results/")
    a = ap.parse_args()
    if not a.probe_seconds > 0:
        ap.error(f"--probe-seconds: {a.probe_seconds}: must be > 0")
    if not a.confirm_seconds >= 0:
        ap.error(f"--confirm-seconds: {a.confirm_seconds}: must be >= 0")
    study = checked_study(a.config, a.set, a.model_dir)
    study = dataclasses.replace(study, data={**study.data, "advise": {"probe_seconds": a.probe_seconds,
                                                                      "confirm_seconds": a.confirm_seconds}})
    if a.fresh < 0:
        ap.error(f"--fresh: {a.fresh}: must be >= 0")
    if not 0 < a.discovery_fraction < 1:
        ap.error(f"--discovery-fraction: {a.discovery_fraction}: must be between 0 and 1")
    provenance()  # the tree as it is before the records below are written into it
    out = RESULTS / a.table
    out.mkdir(exist_ok=True)
    prompts = read_jsonl(a.set / "prompts.jsonl")
    if a.fresh:
        prompts = fresh_prompts(prompts, a.fresh, int(study.settings["seed"]), a.discovery_fraction)
        study = dataclasses.replace(study, data={**study.data, "prediction": {
            **study.prediction, "discovery_fraction": a.discovery_fraction}})
    P.write(prompts, out / "prompts.jsonl")
    advise_study(study, prompts, out / "advise.parquet", out / "advise_micro.parquet",
                 out / "advise_rounds.parquet", out / "advise_runs.parquet")
    source = (f"{a.fresh} code and {a.fresh} chat prompts {a.set.parent.name} never used, split with its seed, "
              f"{a.discovery_fraction:.0%} of each workload to discovery"
              if a.fresh else f"{a.set.parent.name}'s own split")
    samples = samples_of(out)
    write_table(a.table, f"advise on unseen prompts ({a.set.name} of {a.set.parent.name})",
                ["pair", "K", "probe prompts", "confirmation prompts", "loop model", "predicted", "interval",
                 "reserved prompts", "realized",
                 "realized interval", "error", "covered", "within 10%", "target-only step factor", "speculative step factor"],
                advise_cells(samples),
                [f"advise run again on {source}: the probe on the discovery prompts "
                 f"(in turn from each workload, {a.probe_seconds:g} s per pair, two prompts at least) chooses "
                 "K by the loop model (its prediction: 'loop model'); the confirmation then runs target-only "
                 f"and that K back to back on the same prompts ({a.confirm_seconds:g} s, two prompts at "
                 "least), and its measured speedup is the prediction; the realized speedup is measured at "
                 "that K on the reserved prompts, which neither saw (prompts.jsonl in the records).",
                 "realized: total tokens over total decode time, speculative over target-only, with its 95% "
                 "percentile interval over prompts (seeded bootstrap of the reserved prompts).",
                 "interval: 95% prediction interval over prompts for as many new prompts as were reserved "
                 "(the confirmation's prompts drawn with replacement, then as many as were reserved from "
                 "those); error: predicted / realized - 1.",
                 "realized / predicted = target-only step factor x speculative step factor: the check's "
                 "target-only ms per token over the confirmation's, and the confirmation's speculative ms "
                 "per token over the check's; a factor below 1 lowered the realized speedup.",
                 f"Goal: |error| <= {ADVISE_GOAL:.0%} and the interval covers the realized speedup, on every "
                 f"pair. The stage's records are in results/{a.table}/."],
                advise_values(samples), ("advise_check", samples))


if __name__ == "__main__":
    main()
