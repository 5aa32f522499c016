"""Audit checks of the timing family: the chain of recorded times (provenance captured,
reference sealed, predictions sealed, reserved runs started, manifest created), each
run's times against its rounds, its pair's other runs and the wall clock, and the
micro-benchmarks' medians against their samples.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import SpecproofError
from ...records import read_json, read_parquet
from .common import identity_error, ngram_drafts, parsed_time
from .registry import MANIFEST, SetAudit, register


TPS_REL = 1e-6  # relative tolerance of tokens_per_s against new_tokens / decode time


def run_starts(dest: Path) -> list[tuple[str, pd.DataFrame]]:
    """(file, table) of every live-run table holding ``started_at``."""
    out = []
    for name in ("runs.parquet", "qualification.parquet", "prediction_live.parquet"):
        if (dest / name).is_file():
            table = read_parquet(dest / name)
            if "started_at" in table:
                out.append((name, table))
    return out


def check_time_chain(dest: Path, manifest: dict) -> None:
    """provenance captured_at <= reference.seal sealed_at <= prediction_seal sealed_at <
    the first reserved run's started_at; reserved runs started in their recorded order;
    every time <= the manifest's created."""
    from ...evidence.prediction import load_sealed
    chain = [(f"{dest / 'provenance.json'}: field captured_at", read_json(dest / "provenance.json").get("captured_at")),
             (f"{dest / 'reference.seal.json'}: field sealed_at", read_json(dest / "reference.seal.json").get("sealed_at")),
             (f"{dest / 'prediction_seal.json'}: field sealed_at", read_json(dest / "prediction_seal.json").get("sealed_at"))]
    times = [(where, parsed_time(v, where)) for where, v in chain]
    for (w0, t0), (w1, t1) in zip(times, times[1:]):
        if t1 < t0:
            raise SpecproofError(f"{w1} ({t1.isoformat()}) is before {w0} ({t0.isoformat()}); provenance "
                                 "is captured, then the reference sealed, then the predictions")
    doc, _ = load_sealed(dest / "predictions.json", dest / "prediction_seal.json")
    tables = run_starts(dest)
    first = first_reserved(dest, tables, doc.get("reserved_prompts") or [])
    if first is not None and not times[-1][1] < first[1]:
        raise SpecproofError(f"{times[-1][0]} ({times[-1][1].isoformat()}) is not before the first reserved "
                             f"run's started_at ({first[0]}, {first[1].isoformat()}); predictions must be sealed first")
    check_run_order(dest, tables, doc.get("reserved_prompts") or [])
    check_reserved_split(dest, doc.get("reserved_prompts") or [])
    created = parsed_time(manifest.get("created"), f"{dest / 'manifest.json'}: field created")
    check_before_created(dest, times, tables, created)


def check_reserved_split(dest: Path, reserved: list[str]) -> None:
    """predictions.json's reserved_prompts are prompts.jsonl's prompts of split 'reserved',
    in order, and qualification.parquet's runs are on exactly those prompts (a set whose
    prompts record no split is not compared)."""
    import json
    prompts = [json.loads(line) for line in (dest / "prompts.jsonl").read_text().splitlines() if line.strip()]
    if not all("split" in p for p in prompts):
        return
    split = [p["id"] for p in prompts if p["split"] == "reserved"]
    if reserved != split:
        extra = sorted(set(reserved) ^ set(split)) or ["(the order)"]
        raise SpecproofError(f"{dest / 'predictions.json'}: field reserved_prompts differs from prompts.jsonl's "
                             f"reserved split at {extra[0]}")
    qual = read_parquet(dest / "qualification.parquet")
    if not qual.empty and set(qual["prompt_id"]) != set(split):
        extra = sorted(set(qual["prompt_id"]) ^ set(split))[0]
        raise SpecproofError(f"{dest / 'qualification.parquet'}: field prompt_id: its prompts differ from "
                             f"prompts.jsonl's reserved split at {extra}")


def first_reserved(dest: Path, tables, reserved: list[str]) -> tuple[str, dt.datetime] | None:
    """(where, time) of the earliest started_at of a live run on a reserved prompt; a
    reserved run without one is an error."""
    best = None
    for name, table in tables:
        rows = table[table["prompt_id"].isin(reserved)]["started_at"]
        if rows.isna().any():
            raise SpecproofError(f"{dest / name}: row {rows.isna().idxmax()}, field started_at is null on a reserved "
                                 "prompt's run; every reserved run must say when it started (after the seal)")
        for i, v in rows.items():
            t = parsed_time(v, f"{dest / name}: row {i}, field started_at")
            if best is None or t < best[1]:
                best = (f"{name} row {i}", t)
    return best


def check_run_order(dest: Path, tables, reserved: list[str]) -> None:
    """runs.parquet's reserved runs of each pair (one job each) started in their
    recorded ``order``."""
    runs = dict(tables).get("runs.parquet")
    if runs is None or "order" not in runs:
        return
    live = runs[runs["prompt_id"].isin(reserved) & runs["started_at"].notna()].sort_values("order")
    for _, group in live.groupby("pair", sort=False):
        stamps = [parsed_time(v, f"{dest / 'runs.parquet'}: row {i}, field started_at") for i, v in group["started_at"].items()]
        for (i0, t0), (i1, t1) in zip(zip(group.index, stamps), zip(group.index[1:], stamps[1:])):
            if t1 < t0:
                raise SpecproofError(
                    f"{dest / 'runs.parquet'}: row {i1}, field started_at ({t1.isoformat()}) is before that of "
                    f"row {i0} ({t0.isoformat()}), which field order puts first")


def check_before_created(dest: Path, times, tables, created: dt.datetime) -> None:
    """Every time above and every run's started_at is no later than the manifest's created."""
    rows = list(times)
    for name, table in tables:
        col = table["started_at"].dropna()
        if len(col):
            i = col.map(lambda v: parsed_time(v, f"{dest / name}: field started_at")).idxmax()
            rows.append((f"{dest / name}: row {i}, field started_at", parsed_time(col[i], name)))
    for where, t in rows:
        if t > created:
            raise SpecproofError(f"{where} ({t.isoformat()}) is after the set was frozen "
                                 f"({dest / 'manifest.json'}: field created, {created.isoformat()})")


def check_run_timings(dest: Path) -> None:
    """Every run's tokens_per_s is new_tokens / (decode_ns / 1e9) (relative ``TPS_REL``),
    and its decode_ns the sum of its rounds' round_ns (integers, exactly)."""
    runs = read_parquet(dest / "runs.parquet")
    want = runs["new_tokens"] / (runs["decode_ns"] / 1e9)
    off = ~np.isclose(runs["tokens_per_s"], want, rtol=TPS_REL, atol=0) & (runs["decode_ns"] > 0)
    if off.any():
        i = off.idxmax()
        raise SpecproofError(f"{dest / 'runs.parquet'}: row {i}, field tokens_per_s is {float(runs.loc[i, 'tokens_per_s'])!r}; "
                             f"new_tokens / decode_ns give {float(want[i])!r}")
    rounds = read_parquet(dest / "rounds.parquet")
    total = rounds.groupby("run_id")["round_ns"].sum()
    have = runs["run_id"].map(total)
    off = have.notna() & (have != runs["decode_ns"])
    if off.any():
        i = off.idxmax()
        raise SpecproofError(f"{dest / 'runs.parquet'}: row {i}, field decode_ns is {int(runs.loc[i, 'decode_ns'])}; "
                             f"its rounds' round_ns in rounds.parquet sum to {int(have[i])}")
    wall_clock(dest, runs)
    prefill_consistency(dest, runs)


# A configuration's prefill: the median over its runs of prefill_ns over the median of its
# pair, path and prompt (every frozen set: 0.85-1.23), within [1 / PREFILL_BAND, PREFILL_BAND];
# per pair, the median over speculative runs of their prefill over the same prompt's
# target-only prefill (which the speculative run repeats, plus the draft's) at least
# PREFILL_SPEC_FLOOR (every frozen set: 0.96 or more). Time moved from decode into prefill,
# which keeps the wall clock whole, moves one of them. Only runs timed on a quiet machine
# are compared (other_cpu_share at most specproof.load.BUSY_SHARE, or not recorded): a run
# that shared the CPUs was slowed by an amount the records do not hold, and the paper
# counts such runs (runs.busy), so a forger who marks runs busy to escape shows them.
PREFILL_BAND, PREFILL_SPEC_FLOOR = 1.5, 0.9


def quiet_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs whose timing no other process disturbed: other_cpu_share <= BUSY_SHARE,
    or not recorded (sets timed before specproof.load watched each run)."""
    from ...load import BUSY_SHARE
    if "other_cpu_share" not in runs:
        return runs
    return runs[~(runs["other_cpu_share"] > BUSY_SHARE)]


def prefill_consistency(dest: Path, runs: pd.DataFrame) -> None:
    """Every run's prefill_ns and decode_ns positive, and each configuration's prefill
    like its pair's on the same prompts over the quiet runs (PREFILL_BAND,
    PREFILL_SPEC_FLOOR)."""
    path = dest / "runs.parquet"
    for field in ("prefill_ns", "decode_ns"):
        bad = runs.index[runs[field] <= 0]
        if len(bad):
            raise SpecproofError(f"{path}: row {bad[0]}, field {field} is {int(runs.loc[bad[0], field])}; a run's "
                                 "time is positive")
    runs = quiet_runs(runs)
    ratio = runs["prefill_ns"] / runs.groupby(["pair", "path", "prompt_id"])["prefill_ns"].transform("median")
    config = ratio.groupby([runs["pair"], runs["config"]]).median()
    off = config[(config > PREFILL_BAND) | (config < 1 / PREFILL_BAND)]
    if len(off):
        (pair, name), r = off.index[0], off.iloc[0]
        raise SpecproofError(f"{path}: field prefill_ns: the runs of {pair} {name} prefill a median {r:.2f}x their "
                             "pair's runs on the same prompts (every frozen set: 0.85-1.23x)")
    target = (runs[runs["path"] == "target"].groupby(["pair", "prompt_id"])["prefill_ns"].median()
              .rename("target_prefill_ns"))
    spec = runs[runs["path"] == "speculative"].join(target, on=["pair", "prompt_id"])
    floor = (spec["prefill_ns"] / spec["target_prefill_ns"]).groupby(spec["pair"]).median()
    if (floor < PREFILL_SPEC_FLOOR).any():
        pair = floor.idxmin()
        raise SpecproofError(f"{path}: field prefill_ns: {pair}'s speculative runs prefill a median "
                             f"{floor[pair]:.2f}x its target-only runs on the same prompts, though they prefill the "
                             "same target (and the draft)")
    model_free_prefill(path, spec, set(ngram_drafts(dest)))


def model_free_prefill(path: Path, spec: pd.DataFrame, free: set[str]) -> None:
    """A draft that runs no model prefills nothing of its own, so a pair's speculative runs
    prefill a median of at most 1 / PREFILL_SPEC_FLOOR times the same prompts' target-only
    runs, the floor's mirror (decode time moved into the prefill of every speculative
    configuration of a pair moves this ratio, not the per-configuration band). Per pair,
    not per configuration: one configuration of an honest quick-tier set reached 1.24x,
    its pair 0.97x."""
    own = spec[spec["draft"].isin(free)]
    ratio = (own["prefill_ns"] / own["target_prefill_ns"]).groupby(own["pair"]).median()
    high = ratio[ratio > 1 / PREFILL_SPEC_FLOOR]
    if len(high):
        pair, r = high.index[0], high.iloc[0]
        raise SpecproofError(f"{path}: field prefill_ns: {pair}'s speculative runs prefill a median {r:.2f}x the "
                             "target-only runs of the same prompts, though its draft runs no model and "
                             f"prefills nothing (at most {1 / PREFILL_SPEC_FLOOR:.2f}x)")


# a run's unaccounted wall time (the next run's start - its start - prefill - decode), ms:
# a few ms of bookkeeping in every frozen set (medians per configuration 3-6 ms, at most 3
# runs of a set over 50 ms); more than SLACK_MS in more than max(SLACK_RUNS, 0.5%) runs, or
# a configuration's median over SLACK_MEDIAN_MS, means recorded times shorter than the clock's
SLACK_MS, SLACK_RUNS, SLACK_MEDIAN_MS, SLACK_TOLERANCE_MS = 50.0, 3, 25.0, 1.0


def wall_clock(dest: Path, runs: pd.DataFrame) -> None:
    """Each pair's runs, in started_at order, against the wall clock: prefill_ns +
    decode_ns of a run fit in the time until the pair's next run started (an error
    otherwise: the recorded times are longer than the clock allows); at most
    max(SLACK_RUNS, 0.5%) runs leave more than SLACK_MS unaccounted, and no configuration
    of a pair leaves a median over SLACK_MEDIAN_MS (more: times shortened, a faster run
    than the clock saw), both over the quiet runs (``quiet_runs``). Sets recorded without
    started_at are skipped."""
    timed = runs[runs["started_at"].notna()] if "started_at" in runs else runs.iloc[:0]
    slack = []
    for _, g in timed.groupby("pair", sort=False):
        t = pd.to_datetime(g["started_at"], format="ISO8601", utc=True).sort_values()
        gap_ns = (t.shift(-1) - t).dt.total_seconds() * 1e9
        slack.append(((gap_ns - g.loc[t.index, "prefill_ns"] - g.loc[t.index, "decode_ns"]) / 1e6).dropna())
    if not slack:
        return
    slack = pd.concat(slack)
    if (slack < -SLACK_TOLERANCE_MS).any():
        i = slack.idxmin()
        raise SpecproofError(f"{dest / 'runs.parquet'}: row {i}, field decode_ns ({int(runs.loc[i, 'decode_ns'])}) "
                             f"with prefill_ns is {-slack[i]:.1f} ms longer than the time until its pair's next run "
                             "started (started_at)")
    slack = slack[slack.index.isin(quiet_runs(runs).index)]  # a busy machine's bookkeeping is slower
    wide = slack[slack > SLACK_MS]
    median = slack.groupby([runs.loc[slack.index, "pair"], runs.loc[slack.index, "config"]]).median()
    if (median > SLACK_MEDIAN_MS).any():
        (pair, config), ms = median.idxmax(), median.max()
        raise SpecproofError(f"{dest / 'runs.parquet'}: field decode_ns: the runs of {pair} {config} end a median "
                             f"{ms:.1f} ms before the pair's next run started (started_at; every frozen set: a few "
                             "ms); their recorded times are shorter than the clock's")
    if len(wide) > max(SLACK_RUNS, len(slack) // 200):
        raise SpecproofError(f"{dest / 'runs.parquet'}: field decode_ns: {len(wide)} runs (row {wide.index[0]} first) "
                             f"end more than {SLACK_MS:.0f} ms before their pair's next run started (started_at); "
                             "their recorded times are shorter than the clock's")


def check_micro_medians(dest: Path) -> None:
    """Every micro.parquet row's median_ms is the median of its samples_ms."""
    micro = read_parquet(dest / "micro.parquet")
    if "samples_ms" not in micro or micro.empty:
        return
    want = micro["samples_ms"].map(lambda s: float(np.median(np.asarray(list(s), dtype=float))))
    bad = pd.Series(~np.isclose(micro["median_ms"], want, rtol=1e-12, atol=0), index=micro.index)
    identity_error(dest / "micro.parquet", micro, bad, "median_ms", want, "the median of its samples_ms")


@register("time_chain", ("provenance.json", "reference.seal.json", "prediction_seal.json", "predictions.json",
                         "prompts.jsonl", "runs.parquet", "qualification.parquet", "prediction_live.parquet",
                         MANIFEST),
          "provenance was captured, then the reference sealed, then the predictions, before the first reserved "
          "run started; reserved runs started in their recorded order on the reserved prompts; nothing is "
          "dated after the set was frozen")
def _time_chain(s: SetAudit) -> None:
    check_time_chain(s.dest, s.manifest)


@register("run_timings", ("runs.parquet", "rounds.parquet", "provenance.json"),
          "each run's tokens_per_s is new_tokens over its decode time, its decode time the sum of its rounds', "
          "its prefill like its pair's on the same prompts, and its recorded times fit the wall clock between "
          "its pair's runs, so time cannot be moved or shortened alone")
def _run_timings(s: SetAudit) -> None:
    check_run_timings(s.dest)


@register("micro_medians", ("micro.parquet",), "every micro-benchmark's median_ms is the median of its samples")
def _micro_medians(s: SetAudit) -> None:
    check_micro_medians(s.dest)
