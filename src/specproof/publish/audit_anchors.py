"""What ties a frozen record set to the outside and its records to one another, checked by
the audit beside ``audit_checks``: the sets allowed to lack raw records (the legacy sets,
by their manifest's sha256), the seals' hashes of provenance.json and prompts.jsonl, the
chain of self-reported times (provenance captured, reference sealed, predictions sealed,
reserved runs started, manifest created), identities every run and PIT row holds by
construction, the benchmark tables against their JSON, the paper's own rows, and the
manifest against the committed one. A failure is one ``SpecproofError`` line naming the
file and the field (or row) at fault.
"""
from __future__ import annotations

import datetime as dt
import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from ..catalog import of_stage
from ..errors import SpecproofError
from ..records import read_json, read_jsonl, read_parquet, sha256_file

# The frozen sets written before the stages wrote their newer raw records
# (``catalog.newer_records``), by the sha256 of their manifest.json: the only sets whose
# numbers may come from stage summaries. Any other set lacking a raw record (a format-2
# set with its newer records deleted, or one of these with its summaries edited and
# re-hashed) is an error.
LEGACY_SETS = {
    "20a559fce0d94e82594450921ff0353bb586c5dfb58c94316fdd3b6113498a8e": "cpu-smollm2@xeon-avx512",
    "dd2cbd2d9e189727a6f11ae9e429882cfdb20ff02c78e60e27e7f9237d2af5e6": "cpu-smollm2@epyc-avx2",
}
PIT_TOL = 1e-9  # float tolerance of a PIT value's bounds
TPS_REL = 1e-6  # relative tolerance of tokens_per_s against new_tokens / decode time


def check_legacy(dest: Path, fmt: int, lacks: list[str]) -> None:
    """A set lacking raw records (``lacks``, of manifest format ``fmt``) must be one of
    ``LEGACY_SETS``, its manifest.json unchanged since it was frozen."""
    if not lacks:
        return
    digest = sha256_file(dest / "manifest.json")
    if digest not in LEGACY_SETS:
        raise SpecproofError(
            f"{dest / 'manifest.json'}: field files lacks {lacks[0]} (manifest format {fmt}), and the "
            f"manifest (sha256 {digest[:12]}) is not one of the legacy sets frozen before the raw "
            "records were written; only those may have numbers from summaries")


def check_seal_hashes(dest: Path) -> None:
    """reference.seal.json's provenance_sha256 is the sha256 of provenance.json, and
    provenance.json's prompts_sha256 the sha256 of prompts.jsonl."""
    prov_sha = sha256_file(dest / "provenance.json")
    sealed = read_json(dest / "reference.seal.json").get("provenance_sha256")
    if sealed != prov_sha:
        raise SpecproofError(f"{dest / 'reference.seal.json'}: field provenance_sha256 is {str(sealed)[:12]}, "
                             f"the sha256 of provenance.json is {prov_sha[:12]}")
    prompts_sha = sha256_file(dest / "prompts.jsonl")
    recorded = read_json(dest / "provenance.json").get("prompts_sha256")
    if recorded != prompts_sha:
        raise SpecproofError(f"{dest / 'provenance.json'}: field prompts_sha256 is {str(recorded)[:12]}, "
                             f"the sha256 of prompts.jsonl is {prompts_sha[:12]}")


def parsed_time(value, where: str) -> dt.datetime:
    """An ISO time (UTC when it names no zone), or an error naming ``where``."""
    try:
        t = dt.datetime.fromisoformat(str(value))
    except ValueError:
        raise SpecproofError(f"{where} is {value!r}, not an ISO time") from None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


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
    from ..evidence.prediction import load_sealed
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


def check_pit_bounds(dest: Path) -> None:
    """Every pit.parquet row: cdf_below <= u <= cdf_below + p_token (u = F(x-1) + V p(x));
    the rank and ratio orders share V, so u_rank - V p(x) and u_ratio - V p(x) (the mass
    their order puts below x) lie in [0, 1 - p_token]; all within ``PIT_TOL``."""
    pit = read_parquet(dest / "pit.parquet")
    if pit.empty:
        return
    vp = pit["u"] - pit["cdf_below"]
    bad = (vp < -PIT_TOL) | (vp > pit["p_token"] + PIT_TOL) | vp.isna()
    _pit_error(dest, pit, bad, "u", "outside [cdf_below, cdf_below + p_token]")
    for col in ("u_rank", "u_ratio"):
        if col in pit:
            below = pit[col] - vp
            bad = pit[col].notna() & ((below < -PIT_TOL) | (below > 1 - pit["p_token"] + PIT_TOL))
            _pit_error(dest, pit, bad, col, f"{col} - (u - cdf_below) outside [0, 1 - p_token]")


def check_pit_draws(dest: Path) -> None:
    """Every pit.parquet row's V is the one its run's seed draws: the re-scoring draws V_t
    for token t = 0, 1, ... from PCG64(SeedSequence([seed_from(run_id), 3])), so
    u = cdf_below + V_t p_token within ``PIT_TOL`` (u_rank and u_ratio share V_t and are
    bound to u by ``check_pit_bounds``)."""
    from ..records import seed_from
    pit = read_parquet(dest / "pit.parquet")
    if pit.empty or "t" not in pit:
        return
    want = pd.Series(np.nan, index=pit.index)
    for run_id, rows in pit.groupby("run_id", sort=False):
        rows = rows.sort_values("t")
        v = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed_from(run_id), 3]))).random(
            int(rows["t"].max()) + 1)
        want[rows.index] = rows["cdf_below"].to_numpy() + v[rows["t"].to_numpy()] * rows["p_token"].to_numpy()
    bad = (pit["u"] - want).abs() > PIT_TOL
    _pit_error(dest, pit, bad, "u", "not cdf_below + V p_token with the V its run's seed draws")


def check_pit_prefixes(dest: Path) -> None:
    """pit.parquet rows that score the same token after the same prefix (same target,
    prompt and temperature, the run's ids up to and including position t) hold the same
    p_token and cdf_below: the scoring is deterministic (so in every frozen set), so a
    position moved in one run stands out against the runs that share its prefix."""
    pit = read_parquet(dest / "pit.parquet")
    if pit.empty:
        return
    runs = read_parquet(dest / "runs.parquet").set_index("run_id")
    ids, temp = runs["ids"], runs["temperature"]
    key = pd.Series([(r.target, r.prompt_id, float(temp[r.run_id]), tuple(int(x) for x in ids[r.run_id][:r.t + 1]))
                     for r in pit.itertuples()], index=pit.index)
    groups = key.map(hash)
    for col in ("p_token", "cdf_below"):
        off = pit[col] != pit[col].groupby(groups).transform("first")
        if off.any():
            i = off.idxmax()
            j = pit.index[(groups == groups[i]) & ~off][0]
            raise SpecproofError(f"{dest / 'pit.parquet'}: rows {j} and {i}, field {col}: {float(pit.at[j, col])!r} "
                                 f"and {float(pit.at[i, col])!r} for the same token after the same prefix (target, "
                                 "prompt, temperature, run ids up to t); the scoring is deterministic")


def _pit_error(dest: Path, pit: pd.DataFrame, bad: pd.Series, col: str, why: str) -> None:
    if bad.any():
        i = bad.idxmax()
        raise SpecproofError(f"{dest / 'pit.parquet'}: row {i}, field {col} is {float(pit.loc[i, col])!r}: {why} "
                             f"(cdf_below {float(pit.loc[i, 'cdf_below'])!r}, p_token {float(pit.loc[i, 'p_token'])!r})")


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
    _wall_clock(dest, runs)
    _prefill_consistency(dest, runs)


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
    from ..load import BUSY_SHARE
    if "other_cpu_share" not in runs:
        return runs
    return runs[~(runs["other_cpu_share"] > BUSY_SHARE)]


def _prefill_consistency(dest: Path, runs: pd.DataFrame) -> None:
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
    _model_free_prefill(path, spec, set(ngram_drafts(dest)))


def ngram_drafts(dest: Path) -> dict[str, dict]:
    """Name -> spec of the drafts in the set's config (provenance.json) that run no model
    (n-gram lookup)."""
    from ..records import read_json
    drafts = read_json(dest / "provenance.json")["study"]["config"].get("drafts") or {}
    return {name: spec for name, spec in drafts.items() if spec.get("kind") == "ngram"}


def _model_free_prefill(path: Path, spec: pd.DataFrame, free: set[str]) -> None:
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


def _wall_clock(dest: Path, runs: pd.DataFrame) -> None:
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


def check_run_identities(dest: Path, reference: pd.DataFrame) -> None:
    """Identities every live run holds by construction, runs.parquet and rounds.parquet
    read once: token counts (``_token_counts``), agreement with the sealed reference
    (``_reference_identities``) and each run's workload as prompts.jsonl gives it."""
    import json
    runs, rounds = read_parquet(dest / "runs.parquet"), read_parquet(dest / "rounds.parquet")
    _token_counts(dest, runs, rounds)
    _rounds_replay_ids(dest, runs, rounds)
    _ngram_drafts(dest, runs, rounds, reference)
    _reference_identities(dest, runs, reference)
    prompts = {p["id"]: p for p in map(json.loads, (dest / "prompts.jsonl").read_text().splitlines()) if p}
    given = runs["prompt_id"].map(lambda i: prompts.get(i, {}).get("workload"))
    _identity_error(dest / "runs.parquet", runs, given.notna() & (runs["workload"] != given), "workload", given,
                    "prompts.jsonl's workload for its prompt")


def _token_counts(dest: Path, runs: pd.DataFrame, rounds: pd.DataFrame) -> None:
    """Every run has rounds, new_tokens = len(ids) = the sum of its rounds' ``committed``,
    and every round but a run's last commits its accepted drafts plus one token (the correction or bonus; a
    target-only step commits one): committed = accepted + 1."""
    lengths = runs["ids"].map(len)
    _identity_error(dest / "runs.parquet", runs, runs["new_tokens"] != lengths, "new_tokens", lengths, "len(ids)")
    if "committed" not in rounds or rounds.empty:
        return
    bare = ~runs["run_id"].isin(rounds["run_id"])
    if bare.any():  # every live run of every frozen set has rounds: a run decodes in rounds
        i = bare.idxmax()
        raise SpecproofError(f"{dest / 'runs.parquet'}: row {i}, field run_id {_short(runs.at[i, 'run_id'])} has no "
                             "rounds in rounds.parquet, though every run decodes in rounds")
    committed = runs["run_id"].map(rounds.groupby("run_id")["committed"].sum())
    bad = committed.notna() & (committed != runs["new_tokens"])
    _identity_error(dest / "runs.parquet", runs, bad, "new_tokens", committed,
                    "its rounds' committed tokens in rounds.parquet, summed")
    if "accepted" in rounds:
        last = rounds.groupby("run_id")["round"].transform("max") == rounds["round"]
        bad = ~last & (rounds["committed"] != rounds["accepted"] + 1)
        _identity_error(dest / "rounds.parquet", rounds, bad, "committed", rounds["accepted"] + 1,
                        "accepted + 1 (a round before the run's last)")


def _rounds_replay_ids(dest: Path, runs: pd.DataFrame, rounds: pd.DataFrame) -> None:
    """A run's rounds, in order, replay its ids: a round drafts k = len(drafted) tokens,
    and its first min(accepted, committed) drafts are the run's next ids; a run's
    mean_accepted is its rounds' mean accepted over rounds with k > 0."""
    if rounds.empty or "drafted" not in rounds:
        return
    path = dest / "rounds.parquet"
    _identity_error(path, rounds, rounds["k"] != rounds["drafted"].map(len), "k", rounds["drafted"].map(len),
                    "len(drafted)")
    ids = dict(zip(runs["run_id"], runs["ids"]))
    greedy = set(runs.loc[runs["temperature"] == 0, "run_id"])
    for run_id, g in rounds.sort_values(["run_id", "round"]).groupby("run_id", sort=False):
        out, p = ids.get(run_id), 0
        if out is None:
            continue
        for i, d, a, c in zip(g.index, g["drafted"], g["accepted"], g["committed"]):
            n = min(int(a), int(c))
            if [int(x) for x in d[:n]] != [int(x) for x in out[p:p + n]]:
                raise SpecproofError(f"{path}: row {i}, field drafted starts {_short(d[:n])}; the run's ids at "
                                     f"positions {p} to {p + n - 1} in runs.parquet are {_short(out[p:p + n])}")
            _greedy_rejection(path, i, run_id in greedy, d, int(a), int(c), out, p)
            p += int(c)
    spec = runs[runs["path"] == "speculative"]
    drafting = rounds[rounds["k"] > 0]
    want = spec["run_id"].map(drafting.groupby("run_id")["accepted"].mean())
    bad = want.notna() & ~np.isclose(spec["mean_accepted"], want, rtol=1e-9, atol=0)
    _identity_error(dest / "runs.parquet", spec, bad, "mean_accepted", want,
                    "its rounds' mean accepted (rounds with k > 0) in rounds.parquet")


def _ngram_drafts(dest: Path, runs: pd.DataFrame, rounds: pd.DataFrame, reference: pd.DataFrame) -> None:
    """A fixed-K run drafted by n-gram lookup drafts what the lookup proposes: at each round,
    ``NGramDrafter(max_ngram, min_ngram).propose(prompt ids + the run's ids so far, k)`` with
    k = min(K, max_new_tokens - ids so far - 1), the loop's request (the config's drafter in
    provenance.json, the prompt ids in the sealed reference). The lookup is deterministic, so
    ids or rounds rewritten without re-running it leave a round it would not have drafted."""
    from ..decode.drafters import NGramDrafter
    from ..records import read_json
    cfg, specs = read_json(dest / "provenance.json")["study"]["config"], ngram_drafts(dest)
    own = runs[(runs["path"] == "speculative") & runs["draft"].isin(specs) & (runs["policy"] == "fixed")]
    if own.empty or "drafted" not in rounds or "prompt_ids" not in reference:
        return
    prompt = {(r.target, r.prompt_id): [int(x) for x in r.prompt_ids] for r in reference.itertuples()}
    max_new, path = int(cfg["settings"]["max_new_tokens"]), dest / "rounds.parquet"
    by_run = dict(list(rounds[rounds["run_id"].isin(own["run_id"])].sort_values("round").groupby("run_id")))
    for r in own[own["run_id"].isin(by_run)].itertuples():  # a run without rounds: _token_counts
        spec, ids, p, g = specs[r.draft], [int(x) for x in r.ids], 0, by_run[r.run_id]
        lookup = NGramDrafter(max_ngram=spec.get("max_ngram", 3), min_ngram=spec.get("min_ngram", 1))
        for i, drafted, committed in zip(g.index, g["drafted"], g["committed"]):
            k = max(0, min(int(r.k), max_new - p - 1))
            want = lookup.propose(prompt[(r.target, r.prompt_id)] + ids[:p], k).tokens if k else []
            if [int(x) for x in drafted] != want:
                raise SpecproofError(f"{path}: row {i}, field drafted is {_short(drafted)}, but n-gram lookup on the "
                                     f"prompt and the run's first {p} ids proposes {_short(want)} (k = {k})")
            p += int(committed)


def _greedy_rejection(path: Path, row, greedy: bool, drafted, accepted: int, committed: int, out, p: int) -> None:
    """In a greedy round that rejected a draft and committed its correction (accepted <
    len(drafted), committed > accepted), the correction differs from the rejected draft:
    greedy verification accepts a draft exactly when it is the target's argmax, and the
    correction is that argmax. A run whose ids were rewritten under its rounds breaks it."""
    if not greedy or accepted >= len(drafted) or committed <= accepted or p + accepted >= len(out):
        return
    if int(drafted[accepted]) == int(out[p + accepted]):
        raise SpecproofError(f"{path}: row {row}, field accepted is {accepted}, yet the rejected draft "
                             f"{int(drafted[accepted])} is the token the greedy run committed in its place "
                             "(a greedy round rejects only a draft that is not the target's argmax)")


def _reference_identities(dest: Path, runs: pd.DataFrame, reference: pd.DataFrame) -> None:
    """Against the sealed reference: a greedy target-only run decodes its ids (the
    reference is that decode, sealed), and a run whose ids equal its ids has its text too
    (the text is the ids detokenized, so Q implies H): runs.parquet's text,
    qualification.parquet's text_equal."""
    from ..analysis.agreement import recomputed_q
    from ..evidence.reference import reference_lookup
    ref = reference_lookup(reference)
    want = pd.Series([ref[(r.target, r.prompt_id)] for r in runs.itertuples()], index=runs.index, dtype=object)
    same = pd.Series([[int(x) for x in ids] == w["ids"] for ids, w in zip(runs["ids"], want)], index=runs.index)
    plain = (runs["path"] == "target") & (runs["temperature"] == 0)
    _identity_error(dest / "runs.parquet", runs, plain & ~same, "ids", want.map(lambda w: w["ids"]),
                    "the sealed reference.parquet's ids (a greedy target-only run)")
    _identity_error(dest / "runs.parquet", runs, same & (runs["text"] != want.map(lambda w: w["text"])), "text",
                    want.map(lambda w: w["text"]), "the sealed reference's text for the same ids")
    qual = read_parquet(dest / "qualification.parquet")
    if "text_equal" in qual and not qual.empty:
        q = recomputed_q(qual, reference)
        _identity_error(dest / "qualification.parquet", qual, q & ~qual["text_equal"].astype(bool), "text_equal",
                        q, "its ids, equal to the sealed reference's,")


def check_micro_medians(dest: Path) -> None:
    """Every micro.parquet row's median_ms is the median of its samples_ms."""
    micro = read_parquet(dest / "micro.parquet")
    if "samples_ms" not in micro or micro.empty:
        return
    want = micro["samples_ms"].map(lambda s: float(np.median(np.asarray(list(s), dtype=float))))
    bad = pd.Series(~np.isclose(micro["median_ms"], want, rtol=1e-12, atol=0), index=micro.index)
    _identity_error(dest / "micro.parquet", micro, bad, "median_ms", want, "the median of its samples_ms")


def _identity_error(path: Path, table: pd.DataFrame, bad: pd.Series, field: str, want: pd.Series, what: str) -> None:
    """One line naming the first row where ``bad`` holds: its ``field`` against ``want``."""
    if bad.any():
        i = bad.idxmax()
        raise SpecproofError(f"{path}: row {i}, field {field} is {_short(table.loc[i, field])}; "
                             f"{what} give {_short(want[i])}")


def _short(v) -> str:
    """A value for an error line: its repr (arrays as lists), cut to 60 characters."""
    text = repr(v.tolist() if hasattr(v, "tolist") else v)
    return text if len(text) <= 60 else text[:57] + "..."


def check_bench_tables(benchmarks: Path, tables: dict[Path, dict]) -> int:
    """Every <name>.md in ``benchmarks`` has its <name>.json, and is the table rendered
    from the fields title, command, provenance, header, rows and notes of that JSON
    (``tables``, benchtables.read_tables; a JSON null cell is a NaN the strict writer
    wrote as null). Returns how many tables were checked."""
    from ..evidence.provenance import summary_line
    from .benchtables import render_markdown
    benchmarks = Path(benchmarks)
    for md in sorted(benchmarks.glob("*.md")) if benchmarks.is_dir() else []:
        if not md.with_suffix(".json").is_file():
            raise SpecproofError(f"{md}: a benchmark table with no {md.with_suffix('.json').name} beside it")
    for path, r in tables.items():
        try:
            render = lambda rows: render_markdown(r["title"], r["command"], summary_line(r["provenance"]),
                                                  r["header"], rows, r["notes"])
            nan_rows = [[math.nan if x is None else x for x in row] for row in r["rows"]]
            candidates = {render(nan_rows), render(r["rows"])}
        except (KeyError, TypeError) as exc:
            raise SpecproofError(f"{path}: field {exc} is missing; the table cannot be rendered") from None
        if path.with_suffix(".md").read_text() not in candidates:
            raise SpecproofError(f"{path.with_suffix('.md')}: differs from the table rendered from {path.name}'s "
                                 "fields header, rows and notes (the table was edited apart from its data)")
    return len(tables)


ADVISE_RECORDS = tuple(of_stage("advise"))  # advise.parquet and the raw records it summarizes


def check_advise_records(tables: dict[Path, dict]) -> None:
    """An advise_check table's samples against the stage records beside it
    (results/<table>/): each pair's k, predicted, low, high, probe and future prompts as
    the study audit's own ``recompute_advise`` gives them from advise_micro, advise_rounds
    and advise_runs.parquet, target_ms_pred and the check's runs as ``advise_sample``
    takes them from the records. So the samples cannot move apart from the records."""
    from ..analysis.summaries import recompute_advise
    for path, record in tables.items():
        if record.get("kind") != "advise_check":
            continue
        d = path.with_suffix("")
        for name in ADVISE_RECORDS:
            if not (d / name).is_file():
                raise SpecproofError(f"{d / name}: missing; {path.name}'s samples are recomputed from it")
        summary, micro, rounds, runs = (read_parquet(d / name) for name in ADVISE_RECORDS)
        _advise_phases(d, runs)
        want = recompute_advise(summary, micro, rounds, runs).set_index("pair")
        for i, s in enumerate(record["samples"]):
            _advise_sample_check(path, i, s, want, micro, rounds, runs)


def _advise_phases(d: Path, runs: pd.DataFrame) -> None:
    """Each pair's check ran on every reserved prompt of prompts.jsonl and its confirmation
    on at most the discovery prompts (a confirmation and a check swapped cannot both hold)."""
    from ..evidence.advise import run_phases
    if "phase" not in runs or not (d / "prompts.jsonl").is_file():
        return
    splits = pd.Series([r["split"] for r in read_jsonl(d / "prompts.jsonl")]).value_counts()
    for pair, g in runs.groupby("pair", sort=False):
        confirm, check = run_phases(g)
        n = {"confirm": confirm["prompt"].nunique(), "check": check["prompt"].nunique()}
        if n["check"] != splits.get("reserved", 0) or n["confirm"] > splits.get("discovery", 0):
            raise SpecproofError(f"{d / 'advise_runs.parquet'}: field phase: {pair}'s check runs cover {n['check']} "
                                 f"prompts and its confirmation {n['confirm']}; prompts.jsonl holds "
                                 f"{splits.get('reserved', 0)} reserved and {splits.get('discovery', 0)} discovery")


def _advise_sample_check(path: Path, i: int, s: dict, want: pd.DataFrame, micro: pd.DataFrame,
                         rounds: pd.DataFrame, runs: pd.DataFrame) -> None:
    """One sample of an advise_check table against ``advise_sample`` of its pair's
    recomputed row and records."""
    from .benchvalues import advise_sample, same_value
    pair = s.get("pair")
    if pair not in want.index:
        raise SpecproofError(f"{path}: field samples[{i}].pair {pair!r} has no records in {path.with_suffix('').name}/")
    of = lambda df: df[df["pair"] == pair]  # noqa: E731
    expect = advise_sample({**want.loc[pair].to_dict(), "pair": pair}, of(micro), of(rounds), of(runs))
    for field, value in expect.items():
        have = s.get(field)
        if not (have == value if field in ("runs", "model", "pair") else same_value(have, value)):
            raise SpecproofError(f"{path}: field samples[{i}].{field} is {_short(have)}; the records in "
                                 f"{path.with_suffix('').name}/ give {_short(value)}")


def committed_manifest_line(dest: Path, set_id: str) -> str:
    """The manifest.json against the committed one (git show HEAD:<path>): an error when
    they differ; a report line saying it matched, or why it could not be compared."""
    path = dest / "manifest.json"
    git = lambda *args: subprocess.run(["git", "-C", str(dest), *args], capture_output=True)
    try:
        tracked = git("ls-files", "--error-unmatch", "manifest.json")
    except OSError:
        return f"{set_id}: not compared with a committed manifest (git is not available)"
    if tracked.returncode != 0:
        return f"{set_id}: not compared with a committed manifest ({path} is not tracked in a git checkout)"
    committed = committed_sha256(dest, "manifest.json")
    if committed is None:
        return f"{set_id}: not compared with a committed manifest ({path} is not in HEAD)"
    if committed != sha256_file(path):
        raise SpecproofError(f"{path}: manifest.json differs from the committed one (git show HEAD:{path})")
    added = git("log", "--diff-filter=A", "--format=%H", "--", "manifest.json").stdout.decode().split()
    if added and committed_sha256(dest, "manifest.json", added[-1]) != committed:
        raise SpecproofError(f"{path}: manifest.json was changed after the commit that froze it ({added[-1][:12]}); "
                             "a frozen set is never re-frozen in place")
    return f"{set_id}: manifest.json is the committed one, unchanged since it was frozen"


def provenance_commit_line(dest: Path, set_id: str, prov: dict) -> str:
    """The provenance's git commit in the checkout of specproof's code that holds the set: it
    must be a commit of HEAD's history, no later than the provenance's captured_at, and (for
    a clean tree) hold the study config
    whose sha256 the provenance records (study.config_sha256) and which parses to its
    study.config. A report line saying so, or
    why it could not be compared (no git, or the set is not in a checkout)."""
    import hashlib
    import yaml
    commit, study = (prov.get("git") or {}).get("commit"), prov.get("study") or {}
    where = f"{dest / 'provenance.json'}: field git.commit"
    git = lambda *args: subprocess.run(["git", "-C", str(dest), *args], capture_output=True)  # noqa: E731
    try:
        inside = git("rev-parse", "--is-inside-work-tree")
    except OSError:
        return f"{set_id}: provenance's commit not checked (git is not available)"
    if inside.returncode != 0 or not commit:
        return f"{set_id}: provenance's commit not checked ({dest} is not in a git checkout, or it names none)"
    top = git("rev-parse", "--show-toplevel").stdout.decode().strip()
    if not git("ls-tree", "HEAD", "--", f"{top}/src/specproof/__init__.py").stdout.strip():
        return f"{set_id}: provenance's commit not checked (the checkout holding {dest} does not hold specproof's code)"
    if git("merge-base", "--is-ancestor", str(commit), "HEAD").returncode != 0:
        raise SpecproofError(f"{where} is {commit!r}, not a commit of this checkout's history (HEAD and its ancestors)")
    dated = parsed_time(git("show", "-s", "--format=%cI", str(commit)).stdout.decode().strip(), where)
    if dated > parsed_time(prov.get("captured_at"), f"{dest / 'provenance.json'}: field captured_at"):
        raise SpecproofError(f"{where} is {commit[:12]}, committed at {dated.isoformat()}, after the provenance's "
                             f"captured_at ({prov.get('captured_at')})")
    if (prov.get("git") or {}).get("dirty") is False and study.get("name"):
        shown = git("show", f"{commit}:config/studies/{study['name']}.yaml")
        have = hashlib.sha256(shown.stdout).hexdigest() if shown.returncode == 0 else None
        if have != study.get("config_sha256"):
            raise SpecproofError(f"{dest / 'provenance.json'}: field study.config_sha256 is "
                                 f"{str(study.get('config_sha256'))[:12]}, but config/studies/{study['name']}.yaml at "
                                 f"commit {commit[:12]} has sha256 {str(have)[:12]}")
        if yaml.safe_load(shown.stdout) != study.get("config"):
            raise SpecproofError(f"{dest / 'provenance.json'}: field study.config differs from config/studies/"
                                 f"{study['name']}.yaml at commit {commit[:12]}, whose sha256 it records")
    return f"{set_id}: provenance's commit {commit[:12]} is in this checkout's history and holds its study config"


def committed_sha256(directory: Path, name: str, commit: str = "HEAD") -> str | None:
    """The sha256 of file ``name`` of ``directory`` as committed in ``commit`` (HEAD), or
    None when it is not there."""
    import hashlib
    shown = subprocess.run(["git", "-C", str(directory), "show", f"{commit}:./{name}"], capture_output=True)
    return hashlib.sha256(shown.stdout).hexdigest() if shown.returncode == 0 else None


def committed_bench_line(benchmarks: Path) -> str:
    """Each benchmark table's JSON against the committed one, and no committed table
    missing: an error naming the file when one differs or is gone; a report line otherwise
    (or why the tables could not be compared)."""
    git = lambda *args: subprocess.run(["git", "-C", str(benchmarks), *args], capture_output=True)  # noqa: E731
    try:
        listed = git("ls-files", "--", "*.json")
    except OSError:
        return "benchmarks: not compared with the committed tables (git is not available)"
    if listed.returncode != 0 or not listed.stdout.strip():
        return f"benchmarks: not compared with committed tables ({benchmarks} holds none in a git checkout)"
    names = listed.stdout.decode().split()
    for name in names:
        path = benchmarks / name
        if not path.is_file():
            raise SpecproofError(f"{path}: a committed benchmark table is missing")
        committed = committed_sha256(benchmarks, name)
        if committed is not None and committed != sha256_file(path):
            raise SpecproofError(f"{path}: differs from the committed table (git show HEAD:{path})")
    return f"benchmarks: the {len(names)} tables' JSON are the committed ones"


UNREAD_SETS = ("retired", "pending")  # config.yaml fields of frozen sets the paper does not read, with why


def check_every_set_listed(manifests: Path, cfg: dict, config: Path) -> None:
    """The paper's config must be the committed one where it is tracked, and must name
    every frozen record set under ``manifests``, in ``studies``, ``retired`` or
    ``pending`` (with why): a set left out of the paper is said so, not silently."""
    from .manifests import all_frozen_sets
    committed = committed_sha256(config.parent, config.name)
    if committed is not None and committed != sha256_file(config):
        raise SpecproofError(f"{config}: differs from the committed one (git show HEAD:{config}): it decides "
                             "which record sets the paper reads")
    named = set(cfg["studies"]) | {e["set"] for field in UNREAD_SETS for e in cfg.get(field) or []}
    for set_id in all_frozen_sets(manifests):
        if set_id not in named:
            raise SpecproofError(f"{config}: field studies: frozen record set {set_id} is neither listed, "
                                 "retired nor pending (add it to studies, or to retired or pending with why)")


def check_machine_labels(manifests: Path) -> None:
    """Every machine label under ``manifests`` names one machine: the frozen sets that
    share a label have the same fingerprint (``evidence.fingerprint``); the first set of a
    label that differs is named beside the set it differs from."""
    from ..evidence.fingerprint import fingerprint_of, identity_differences
    from .manifests import all_frozen_sets, set_dir, split_set
    first: dict[str, tuple[str, dict]] = {}
    for set_id in all_frozen_sets(manifests):
        label = split_set(set_id)[1]
        mine = fingerprint_of(read_json(set_dir(manifests, set_id) / "provenance.json"))
        other, theirs = first.setdefault(label, (set_id, mine))
        fields = identity_differences(mine, theirs)
        if fields:
            raise SpecproofError(f"{set_dir(manifests, set_id) / 'provenance.json'}: machine label {label!r} "
                                 f"also names {other}, a different machine (fields {', '.join(fields)} differ); "
                                 "relabel one (`specproof freeze <study> --relabel OLD --machine NEW`)")


def paper_numbers(studies: list[str], manifests: Path, config: Path | None) -> tuple[dict, str | None]:
    """numbers.json's paper.* rows as ``build_numbers`` writes them: the head study (the
    first listed, as the workflow's numbers rule passes it), whether it is frozen, and the
    title from ``config`` when that config lists these studies; else (rows without the
    title, a note why it was not recomputed)."""
    from .paper import paper_rows
    from ..study.config import load_config
    head, title, note, break_even = studies[0], None, None, None
    cfg = load_config(Path(config)) if config is not None and Path(config).is_file() else None
    if cfg is not None and list(cfg["studies"]) == list(studies):
        check_every_set_listed(manifests, cfg, Path(config))
        check_machine_labels(manifests)
        title = cfg.get("paper", {}).get("title", "specproof")
        break_even = cfg.get("break_even")
    else:
        note = (f"paper.title not recomputed: {config} " + ("lists other studies" if cfg else "is absent")
                + " than the audited ones")
    return paper_rows(head, manifests, title, break_even), note
