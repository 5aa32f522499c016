"""The audit reads raw records only: each attack below, made on a copy of the frozen
record set paper-smollm2@epyc-avx512 by a careful tamperer (the manifest re-hashed, the
paper's numbers set to what the tampered record claims, every manifest_sha256 updated), makes
`specproof audit` exit 2 with one line naming the field or number and the file.

Raw records are never changed by the attacks on derived files and summaries, so those tests
reuse one analysis of the untouched set (``analysis``) instead of recomputing it each time;
one test runs the whole audit unaided."""
import shutil
from pathlib import Path

import pytest

from specproof.cli import main
from specproof.publish.manifests import manifest_sha256, set_dir
from specproof.records import read_json, read_parquet, sha256_file, write_json, write_parquet

ROOT = Path(__file__).resolve().parents[2]
SET = "paper-smollm2@epyc-avx512"


@pytest.fixture(scope="module")
def analysis():
    from specproof.analysis.analyze import analyze
    return analyze(set_dir(ROOT / "manifests", SET))


@pytest.fixture
def copy(tmp_path, analysis):
    """The frozen set and its numbers (the set's, computed here, whether or not the
    committed paper reports it, and the benchmarks') in tmp_path."""
    from specproof.publish.numbers import study_numbers
    shutil.copytree(set_dir(ROOT / "manifests", SET), set_dir(tmp_path / "manifests", SET))
    numbers = read_json(ROOT / "paper" / "build" / "numbers.json")
    bench = {k: v for k, v in numbers.items() if k.startswith(("bench.", "bench_goal.", "cited."))}
    own = study_numbers(analysis, manifest_sha256(ROOT / "manifests", SET), prefix=SET)
    write_json({**own, **bench}, tmp_path / "numbers.json")
    return tmp_path


@pytest.fixture
def cached(monkeypatch, analysis):
    """The audit's analysis of a copy whose raw records are untouched: the one computed."""
    monkeypatch.setattr("specproof.analysis.analyze.analyze", lambda d: analysis)


def rehash(tmp: Path, edits: dict | None = None, drop: str | None = None) -> None:
    """What a careful tamperer does: drop a record from the manifest (if asked), re-hash
    every listed file and the provenance, and set the edited numbers and every number's
    manifest_sha256 to match."""
    d = set_dir(tmp / "manifests", SET)
    manifest = read_json(d / "manifest.json")
    if drop:
        (d / drop).unlink()
        del manifest["files"][drop]
    for name in manifest["files"]:
        manifest["files"][name] = {"sha256": sha256_file(d / name), "bytes": (d / name).stat().st_size}
    manifest["provenance_sha256"] = manifest["files"]["provenance.json"]["sha256"]
    write_json(manifest, d / "manifest.json")
    numbers = read_json(tmp / "numbers.json")
    for key, value in (edits or {}).items():
        numbers[f"{SET}.{key}"]["value"] = value
    for key, rec in numbers.items():
        if key.startswith(f"{SET}."):
            rec["manifest_sha256"] = manifest_sha256(tmp / "manifests", SET)
    write_json(numbers, tmp / "numbers.json")


def audit_line(tmp: Path, capsys) -> str:
    """Run `specproof audit` on the copy; it must exit 2 with one line on stderr."""
    rc = main(["audit", "--studies", SET, "--manifests", str(tmp / "manifests"),
               "--numbers", str(tmp / "numbers.json"), "--benchmarks", str(ROOT / "benchmarks" / "results")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    return err


def edit_json(path: Path, change) -> None:
    data = read_json(path)
    change(data)
    write_json(data, path)


# ---------------------------------------------------------------- raw-record attacks

def _q_flags(d):
    """Set ids_equal True on the failing runs of the first path that has any."""
    q = read_parquet(d / "qualification.parquet")
    failing = q[~q["ids_equal"].astype(bool)]
    target, mode = failing["target"].iloc[0], failing["verify_mode"].iloc[0]
    path = (q["target"] == target) & (q["verify_mode"] == mode)
    q.loc[path, "ids_equal"] = True
    write_parquet(q, d / "qualification.parquet")
    base = f"qualification.{target}.{mode}"
    return {f"{base}.matched": int(path.sum()), f"{base}.qualifies": True}, \
        ["qualification.parquet", "field ids_equal", "reference.parquet"]


def _q_ids_forged(d):
    """A batched qualification run that missed the reference given the reference's ids
    (ids_equal and text_equal to match, so Q recomputed from ids agrees); its twin in the
    timed grid, the same greedy batched computation, still decodes the old ids."""
    q, runs = read_parquet(d / "qualification.parquet"), read_parquet(d / "runs.parquet")
    ref = read_parquet(d / "reference.parquet")
    grid = runs[(runs["path"] == "speculative") & (runs["policy"] == "fixed") & (runs["temperature"] == 0)
                & (runs["verify_mode"] == "batched")]
    twins = q.reset_index().merge(grid, on=["target", "draft", "prompt_id", "k"], suffixes=("", "_g"))
    twins = twins[(twins["verify_mode"] == "batched")]
    i = int(twins.sort_values("ids_equal")["index"].iloc[0])  # a missed run if any has a twin
    want = ref[(ref["target"] == q.at[i, "target"]) & (ref["prompt_id"] == q.at[i, "prompt_id"])]
    q.at[i, "ids"] = list(want["ids"].iloc[0]) if not q.at[i, "ids_equal"] else list(q.at[i, "ids"])[:-1] + [0]
    q.at[i, "ids_equal"] = q.at[i, "text_equal"] = not q.at[i, "ids_equal"]
    write_parquet(q, d / "qualification.parquet")
    return {}, ["qualification.parquet", f"field ids of row {i}", "twin", "runs.parquet"]


def _p_live(d):
    """Give the missed reserved runs their predicted ids in prediction_live.parquet."""
    doc = read_json(d / "predictions.json")
    live = read_parquet(d / "prediction_live.parquet")
    live["ids"] = [doc["predictions"][f"{r.target}|{r.verify_mode}|{r.prompt_id}"] for r in live.itertuples()]
    write_parquet(live, d / "prediction_live.parquet")
    return {"prediction.P_matched": len(live)}, ["prediction_live.parquet", "field ids", "qualification.parquet"]


def _git_dirty(d):
    edit_json(d / "provenance.json", lambda p: p["git"].update(dirty=not p["git"]["dirty"]))
    return {}, ["provenance.json", "field git.dirty", "manifest"]


def _git_commit(d):
    edit_json(d / "provenance.json", lambda p: p["git"].update(commit="0" * 40))
    return {"software.git_commit": "0" * 10}, ["provenance.json", "field git.commit", "manifest"]


@pytest.mark.parametrize("tamper", [_q_flags, _q_ids_forged, _p_live, _git_dirty, _git_commit], ids=lambda f: f.__name__.strip("_"))
def test_a_consistent_edit_of_a_raw_record_fails_the_audit(copy, capsys, tamper):
    edits, names = tamper(set_dir(copy / "manifests", SET))
    rehash(copy, edits)
    line = audit_line(copy, capsys)
    assert all(name in line for name in names), line


@pytest.mark.parametrize("record", ["margins.parquet", "prediction_live.parquet", "level1.parquet",
                                    "calibration_power.parquet", "advise_runs.parquet"])
def test_a_deleted_raw_record_is_an_error_not_a_fallback(copy, capsys, record):
    """The set's manifest format (inferred: it lists the newer raw records) holds the
    record, so its loss is named, not silently replaced by a summary."""
    rehash(copy, drop=record)
    line = audit_line(copy, capsys)
    assert record in line and "missing" in line and "manifest format 2" in line, line


# ---------------------------------------------------------------- derived files and summaries

def _certificate(d):
    edit_json(d / "certificate.json", lambda c: c.update(rejected=not c["rejected"]))
    return ["certificate.json", "field rejected", "pit.parquet"]


def _certificate_pair(d):
    def flip(c):
        pair = next(iter(c["per_pair"]))
        c["per_pair"][pair]["min_pvalue"] *= 0.5
    edit_json(d / "certificate.json", flip)
    return ["certificate.json", "field per_pair.", ".min_pvalue"]


def _stats(d):
    edit_json(d / "stats.json", lambda s: s["speedup"][0].update(gmean_speedup=s["speedup"][0]["gmean_speedup"] * 1.5))
    return ["stats.json", "field speedup[0].gmean_speedup", "runs.parquet"]


def _calibration(d):
    edit_json(d / "calibration.json", lambda c: c["orders"]["id"].update(null_rejection_rate=0.9))
    return ["calibration.json", "field orders.id.null_rejection_rate", "calibration.parquet"]


def _prediction(d):
    edit_json(d / "prediction.json", lambda p: p.update(P_matched=p["P_total"]))
    return ["prediction.json", "field P_matched", "qualification.parquet"]


def _costs(d):
    costs = read_parquet(d / "costs.parquet")
    costs.loc[0, "S_measured"] *= 2
    write_parquet(costs, d / "costs.parquet")
    return ["costs.parquet", "row 0, field S_measured", "rounds.parquet"]


def _agreement(d):
    agree = read_parquet(d / "agreement.parquet")
    row = agree.index[~agree["Q"]][0]
    agree.loc[row, "Q"] = True
    write_parquet(agree, d / "agreement.parquet")
    return ["agreement.parquet", f"row {row}, field Q", "reference.parquet"]


def _advise(d):
    adv = read_parquet(d / "advise.parquet")
    adv.loc[0, "realized_speedup"] *= 2
    write_parquet(adv, d / "advise.parquet")
    return ["advise.parquet", "row 0, field realized_speedup", "advise_runs.parquet"]


@pytest.mark.parametrize("tamper", [_certificate, _certificate_pair, _stats, _calibration, _prediction, _costs,
                                    _agreement, _advise], ids=lambda f: f.__name__.strip("_"))
def test_a_derived_file_or_summary_unlike_its_recomputation_fails_the_audit(copy, capsys, cached, tamper):
    names = tamper(set_dir(copy / "manifests", SET))
    rehash(copy)
    line = audit_line(copy, capsys)
    assert all(name in line for name in names), line


def test_the_copy_rehashed_untouched_passes(copy, capsys, cached):
    """The harness itself changes nothing the audit checks."""
    rehash(copy)
    rc = main(["audit", "--studies", SET, "--manifests", str(copy / "manifests"),
               "--numbers", str(copy / "numbers.json"), "--benchmarks", str(ROOT / "benchmarks" / "results")])
    assert rc == 0, capsys.readouterr().err


def test_the_whole_audit_unaided_catches_a_flipped_certificate(copy, capsys):
    """As ``_certificate``, with the audit computing its own analysis of the copy."""
    names = _certificate(set_dir(copy / "manifests", SET))
    rehash(copy)
    line = audit_line(copy, capsys)
    assert all(name in line for name in names), line


# ---------------------------------------------------------------- times, seals, identities (red-team attacks)

def _shift(stamp, **delta):
    import pandas as pd
    return (pd.Timestamp(stamp) + pd.Timedelta(**delta)).isoformat()


def _first_reserved_start(d):
    doc = read_json(d / "predictions.json")
    runs, q = read_parquet(d / "runs.parquet"), read_parquet(d / "qualification.parquet")
    return min(t[t["prompt_id"].isin(doc["reserved_prompts"])]["started_at"].min() for t in (runs, q))


def _seal_after_reserved(d):
    """a03a: the predictions sealed after the reserved runs began (before the freeze)."""
    late = _shift(_first_reserved_start(d), seconds=1)
    edit_json(d / "prediction_seal.json", lambda s: s.update(sealed_at=late))
    return {"prediction.sealed_before_reserved_runs": 0}, \
        ["prediction_seal.json", "field sealed_at", "not before the first reserved run's started_at"]


def _reference_sealed_late(d):
    """a03b: the reference sealed after the predictions (the chain reversed)."""
    late = _shift(read_json(d / "prediction_seal.json")["sealed_at"], seconds=1)
    edit_json(d / "reference.seal.json", lambda s: s.update(sealed_at=late))
    return {}, ["prediction_seal.json: field sealed_at", "is before", "reference.seal.json: field sealed_at"]


def _runs_shifted(d):
    """a03b: every started_at moved 3 h later (past a late seal): after the freeze."""
    for name in ("runs.parquet", "qualification.parquet", "prediction_live.parquet"):
        t = read_parquet(d / name)
        t["started_at"] = t["started_at"].map(lambda s: _shift(s, hours=3))
        write_parquet(t, d / name)
    return {}, ["field started_at", "after the set was frozen", "field created"]


def _run_order(d):
    """Two reserved runs of one pair given each other's start times."""
    doc, runs = read_json(d / "predictions.json"), read_parquet(d / "runs.parquet")
    live = runs[runs["prompt_id"].isin(doc["reserved_prompts"])].sort_values("order")
    first = live[live["pair"] == live["pair"].iloc[0]].index[:2]
    runs.loc[first, "started_at"] = list(runs.loc[first[::-1], "started_at"])
    write_parquet(runs, d / "runs.parquet")
    return {}, ["runs.parquet", f"row {first[1]}, field started_at", "field order"]


def _provenance(d):
    """a04: the machine in provenance.json changed (the manifest's git and hash kept true)."""
    edit_json(d / "provenance.json", lambda p: p["cpu"].update(model="Intel(R) Xeon(R) Platinum 8480+"))
    return {}, ["reference.seal.json", "field provenance_sha256", "provenance.json"]


def _provenance_other_cpu(d):
    """Forger, provenance: the record claims an AVX2-only CPU (flags and fingerprint moved to
    another machine's) while its llama.cpp build ran AVX-512 instructions here."""
    def other(p):
        p["cpu"]["simd_flags"] = [f for f in p["cpu"]["simd_flags"] if not f.startswith("avx512")]
    edit_json(d / "provenance.json", other)
    return {}, ["provenance.json", "field llama_cpp.system_info", "avx512f"]


def _prompts(d):
    """a08: a prompt deleted from prompts.jsonl."""
    lines = (d / "prompts.jsonl").read_text().splitlines(keepends=True)
    (d / "prompts.jsonl").write_text("".join(lines[1:]))
    return {}, ["provenance.json", "field prompts_sha256", "prompts.jsonl"]


def _pit_uniform(d):
    """a12: u, u_rank, u_ratio replaced by evenly spaced quantiles (a perfect certificate)."""
    import numpy as np
    pit = read_parquet(d / "pit.parquet")
    rng = np.random.default_rng(0)
    for col in ("u", "u_rank", "u_ratio"):
        pit[col] = rng.permutation((np.arange(len(pit)) + 0.5) / len(pit))
    write_parquet(pit, d / "pit.parquet")
    return {}, ["pit.parquet", "field u", "cdf_below"]


def _pit_rank(d):
    """u_rank alone moved outside what its V and p(x) allow."""
    pit = read_parquet(d / "pit.parquet")
    pit.loc[0, "u_rank"] = pit.loc[0, "u"] - pit.loc[0, "cdf_below"] + 1.0
    write_parquet(pit, d / "pit.parquet")
    return {}, ["pit.parquet", "row 0, field u_rank"]


def _tokens_per_s(d):
    """a14: the speculative runs' tokens_per_s doubled, decode_ns and the rounds untouched."""
    runs = read_parquet(d / "runs.parquet")
    runs.loc[runs["path"] == "speculative", "tokens_per_s"] *= 2
    write_parquet(runs, d / "runs.parquet")
    return {}, ["runs.parquet", "field tokens_per_s", "new_tokens / decode_ns"]


def _decode_ns(d):
    """decode_ns and tokens_per_s of a run halved together; its rounds still sum to the old time."""
    runs = read_parquet(d / "runs.parquet")
    runs.loc[0, "decode_ns"] //= 2
    runs.loc[0, "tokens_per_s"] = runs.loc[0, "new_tokens"] / (runs.loc[0, "decode_ns"] / 1e9)
    write_parquet(runs, d / "runs.parquet")
    return {}, ["runs.parquet", "row 0, field decode_ns", "round_ns"]


def _pit_moved_with_its_bounds(d):
    """One PIT row's cdf_below and u lowered together (V and every bound kept), in a row
    whose token and prefix another run of the same prompt and temperature also scored."""
    pit, runs = read_parquet(d / "pit.parquet"), read_parquet(d / "runs.parquet").set_index("run_id")
    key = pit.apply(lambda r: (r["target"], r["prompt_id"], float(runs.at[r["run_id"], "temperature"]),
                               tuple(runs.at[r["run_id"], "ids"][:r["t"] + 1])), axis=1)
    shared = key.map(key.value_counts()) > 1
    i = pit.index[shared & (pit["cdf_below"] > 0.01)][0]
    pit.loc[i, ["cdf_below", "u"]] -= 0.005
    write_parquet(pit, d / "pit.parquet")
    return {}, ["pit.parquet", "field cdf_below", "same token after the same prefix"]


def _retimed(d, scale: float, which) -> None:
    """The rounds of the runs ``which`` selects scaled by ``scale``, their decode_ns and
    tokens_per_s made to match: every identity between runs and rounds still holds."""
    runs, rounds = read_parquet(d / "runs.parquet"), read_parquet(d / "rounds.parquet")
    ids = runs.loc[which(runs), "run_id"]
    hit = rounds["run_id"].isin(ids)
    rounds.loc[hit, "round_ns"] = (rounds.loc[hit, "round_ns"] * scale).astype("int64")
    total = rounds.groupby("run_id")["round_ns"].sum()
    sel = runs["run_id"].isin(ids)
    runs.loc[sel, "decode_ns"] = runs.loc[sel, "run_id"].map(total)
    runs.loc[sel, "tokens_per_s"] = runs.loc[sel, "new_tokens"] / (runs.loc[sel, "decode_ns"] / 1e9)
    write_parquet(rounds, d / "rounds.parquet")
    write_parquet(runs, d / "runs.parquet")


def _faster_than_the_clock(d):
    """Every speculative run's rounds 15% shorter, consistently: speculation looks faster,
    but the runs now end well before the next one started."""
    _retimed(d, 0.85, lambda runs: runs["path"] == "speculative")
    return {}, ["runs.parquet", "field decode_ns", "shorter than the clock"]


def _slower_than_the_clock(d):
    """One target-only run's rounds made twice as long: speculation looks faster against
    it, but the run now outlasts the time until its pair's next run started."""
    _retimed(d, 2.0, lambda runs: runs.index == runs.index[runs["path"] == "target"][5])
    return {}, ["runs.parquet", "field decode_ns", "longer than the time until its pair's next run"]


def _moved_into_prefill(d, which, scale: float) -> None:
    """The runs ``which`` selects retimed by ``scale`` (``_retimed``), the decode time they
    lost or gained taken from or given to their prefill: the wall clock stays whole."""
    before = read_parquet(d / "runs.parquet")["decode_ns"]
    _retimed(d, scale, which)
    runs = read_parquet(d / "runs.parquet")
    runs["prefill_ns"] = runs["prefill_ns"] + (before - runs["decode_ns"])
    write_parquet(runs, d / "runs.parquet")


def _decode_into_prefill(d):
    """One speculative configuration's rounds 40% shorter, the time moved into its
    prefill (a red-team forgery: prefill + decode unchanged, so the clock holds)."""
    config = read_parquet(d / "runs.parquet").query("path == 'speculative'")["config"].iloc[0]
    _moved_into_prefill(d, lambda runs: runs["config"] == config, 0.6)
    return {}, ["runs.parquet", "field prefill_ns", "pair's runs on the same prompts"]


def _target_decode_from_prefill(d):
    """Every target-only run's rounds 1.3x longer, the time taken from its prefill: the
    baseline slower, the clock whole, its prefill below the speculative runs' share of it."""
    _moved_into_prefill(d, lambda runs: runs["path"] == "target", 1.3)
    return {}, ["runs.parquet", "field prefill_ns"]


def _downgrade(d):
    """a09: the newer raw records deleted (the seal folded back into its earlier form), so
    the set reads as format 1 and its numbers would come from editable summaries."""
    from specproof.catalog import newer_records
    from specproof.records import canonical_json, sha256_text
    doc, seal = read_json(d / "predictions.json"), read_json(d / "prediction_seal.json")
    write_json({**doc, "predictions_sha256": sha256_text(canonical_json(doc["predictions"])),
                "sealed_at": seal["sealed_at"]}, d / "prediction_seal.json")
    manifest = read_json(d / "manifest.json")
    for name in newer_records():
        (d / name).unlink()
        del manifest["files"][name]
    write_json(manifest, d / "manifest.json")
    return {}, ["manifest.json", "field files lacks calibration_power.parquet", "(manifest format 1)",
                "not one of the legacy sets"]


def _ids_cut(d):
    """A run's last token dropped from its ids, new_tokens left as it was."""
    runs = read_parquet(d / "runs.parquet")
    runs.at[0, "ids"] = list(runs.at[0, "ids"])[:-1]
    write_parquet(runs, d / "runs.parquet")
    return {}, ["runs.parquet", "row 0, field new_tokens", "len(ids)"]


def _fewer_tokens(d):
    """A run's ids, new_tokens and tokens_per_s cut by one token together; its rounds still
    commit the old count."""
    runs = read_parquet(d / "runs.parquet")
    runs.at[0, "ids"] = list(runs.at[0, "ids"])[:-1]
    runs.loc[0, "new_tokens"] -= 1
    runs.loc[0, "tokens_per_s"] = runs.loc[0, "new_tokens"] / (runs.loc[0, "decode_ns"] / 1e9)
    write_parquet(runs, d / "runs.parquet")
    return {}, ["runs.parquet", "row 0, field new_tokens", "committed"]


def _text_apart(d):
    """A run whose ids equal the sealed reference's given another text (H flips, Q stays)."""
    from specproof.analysis.agreement import recomputed_q
    runs = read_parquet(d / "runs.parquet")
    i = recomputed_q(runs, read_parquet(d / "reference.parquet")).idxmax()
    runs.loc[i, "text"] = runs.loc[i, "text"] + " changed"
    write_parquet(runs, d / "runs.parquet")
    return {}, ["runs.parquet", f"row {i}, field text", "sealed reference"]


def _text_equal_off(d):
    """A qualification run whose ids equal the sealed reference's marked text_equal False."""
    from specproof.analysis.agreement import recomputed_q
    qual = read_parquet(d / "qualification.parquet")
    i = recomputed_q(qual, read_parquet(d / "reference.parquet")).idxmax()
    qual.loc[i, "text_equal"] = False
    write_parquet(qual, d / "qualification.parquet")
    return {}, ["qualification.parquet", f"row {i}, field text_equal"]


def _micro_median(d):
    """A micro-benchmark's median halved, its samples untouched."""
    micro = read_parquet(d / "micro.parquet")
    micro.loc[0, "median_ms"] /= 2
    write_parquet(micro, d / "micro.parquet")
    return {}, ["micro.parquet", "row 0, field median_ms", "samples_ms"]


def _start_erased(d):
    """A reserved qualification run's started_at erased, so no time order can be checked."""
    from specproof.evidence.prediction import load_sealed
    doc, _ = load_sealed(d / "predictions.json", d / "prediction_seal.json")
    qual = read_parquet(d / "qualification.parquet")
    i = qual.index[qual["prompt_id"].isin(doc["reserved_prompts"])][0]
    qual.loc[i, "started_at"] = None
    write_parquet(qual, d / "qualification.parquet")
    return {}, ["qualification.parquet", f"row {i}, field started_at is null"]


def _reserved_dropped(d):
    """A reserved prompt dropped from predictions.json (its prediction with it) and the
    predictions resealed: P would count only the prompts kept."""
    doc = read_json(d / "predictions.json")
    gone = doc["reserved_prompts"].pop()
    doc["predictions"] = {key: ids for key, ids in doc["predictions"].items() if not key.endswith(f"|{gone}")}
    write_json(doc, d / "predictions.json")
    edit_json(d / "prediction_seal.json", lambda s: s.update(predictions_sha256=sha256_file(d / "predictions.json")))
    return {}, ["predictions.json", "field reserved_prompts", gone]


def _workload_relabelled(d):
    """A code prompt's runs filed under chat (per-kind speedups move)."""
    runs = read_parquet(d / "runs.parquet")
    i = runs.index[runs["workload"] == "code"][0]
    runs.loc[runs["prompt_id"] == runs.loc[i, "prompt_id"], "workload"] = "chat"
    write_parquet(runs, d / "runs.parquet")
    return {}, ["runs.parquet", "field workload", "prompts.jsonl"]


def _target_only_apart(d):
    """A greedy target-only run given other ids and their text (so H and Q stay consistent)."""
    runs = read_parquet(d / "runs.parquet")
    i = runs.index[(runs["path"] == "target") & (runs["temperature"] == 0)][0]
    runs.at[i, "ids"] = list(runs.at[i, "ids"])[::-1]
    runs.loc[i, "text"] = "reversed"
    write_parquet(runs, d / "runs.parquet")
    return {}, ["runs.parquet", f"row {i}, field ids", "sealed reference.parquet"]


def _accepted_raised(d):
    """A speculative round's accepted raised to its k, committed left as it was."""
    rounds = read_parquet(d / "rounds.parquet")
    first = rounds.groupby("run_id")["round"].transform("min") == rounds["round"]
    i = rounds.index[(rounds["k"] > 0) & (rounds["accepted"] < rounds["k"]) & first][0]
    rounds.loc[i, "accepted"] = rounds.loc[i, "k"]
    write_parquet(rounds, d / "rounds.parquet")
    return {}, ["rounds.parquet", f"row {i}, field committed", "accepted + 1"]


def _pit_draws_moved(d):
    """V moved to 0.999 on a third of the PIT rows, u, u_rank and u_ratio with it, so every
    row stays within its bounds (the certificate would reject)."""
    pit = read_parquet(d / "pit.parquet")
    rows = pit.index[::3]
    shift = pit.loc[rows, "cdf_below"] + 0.999 * pit.loc[rows, "p_token"] - pit.loc[rows, "u"]
    for col in ("u", "u_rank", "u_ratio"):
        pit.loc[rows, col] = pit.loc[rows, col] + shift
    write_parquet(pit, d / "pit.parquet")
    first = next(i for i in rows if abs(shift[i]) > 1e-9)
    return {}, ["pit.parquet", f"row {first}, field u", "seed draws"]


def _rounds_merged(d):
    """Two neighbouring rounds of a speculative run, the first cut short by a rejection,
    merged into one: drafts, accepted (+1 for the correction), committed and every time
    summed, so every count and the wall clock still add up and acceptance rises."""
    rounds = read_parquet(d / "rounds.parquet")
    nxt = rounds.shift(-1)
    i = rounds.index[(rounds["k"] > 0) & (rounds["accepted"] < rounds["k"]) & (nxt["run_id"] == rounds["run_id"])
                     & (nxt["k"] > 0) & (nxt["committed"] == nxt["accepted"] + 1)][0]
    j = i + 1
    rounds.at[i, "drafted"] = [*rounds.at[i, "drafted"], *rounds.at[j, "drafted"]]
    rounds.loc[i, "k"] = len(rounds.at[i, "drafted"])
    rounds.loc[i, "verify_positions"] = rounds.loc[i, "k"] + 1
    rounds.loc[i, "accepted"] = rounds.loc[i, "accepted"] + rounds.loc[j, "accepted"] + 1
    for col in ("committed", "replay_tokens", "draft_ns", "replay_ns", "verify_ns", "residual_ns", "round_ns"):
        rounds.loc[i, col] = rounds.loc[i, col] + rounds.loc[j, col]
    rounds = rounds.drop(index=j)
    later = (rounds["run_id"] == rounds.loc[i, "run_id"]) & (rounds["round"] > rounds.loc[i, "round"])
    rounds.loc[later, "round"] -= 1
    write_parquet(rounds.reset_index(drop=True), d / "rounds.parquet")
    return {}, ["rounds.parquet", f"row {i}, field drafted", "the run's ids at"]


def _diverged_ids_to_reference(d):
    """Forger, Q: every greedy grid run that left the sealed reference at one divergence
    (target, prompt, position) no qualification run shares has its ids and text rewritten
    to the reference's, so Q would count them as kept; margins.parquet still scores it."""
    from specproof.evidence.reference import divergences, first_divergence
    from specproof.records import check_seal
    runs, qual = read_parquet(d / "runs.parquet"), read_parquet(d / "qualification.parquet")
    ref = check_seal(d / "reference.parquet", d / "reference.seal.json")
    want = {(r.target, r.prompt_id): r for r in ref.itertuples()}
    in_qual = {tuple(r) for r in divergences(runs.iloc[:0], qual, ref).itertuples(index=False)}
    key = next(k for k in divergences(runs, qual.iloc[:0], ref).itertuples(index=False) if tuple(k) not in in_qual)
    t, p, at = key
    hit = [i for i, r in runs[runs["temperature"] == 0].iterrows()
           if (r["target"], r["prompt_id"]) == (t, p) and list(r["ids"]) != list(want[(t, p)].ids)
           and first_divergence([int(x) for x in r["ids"]], [int(x) for x in want[(t, p)].ids]) == at]
    for i in hit:
        runs.at[i, "ids"], runs.at[i, "text"] = list(want[(t, p)].ids), want[(t, p)].text
    write_parquet(runs, d / "runs.parquet")
    return {}, ["rounds.parquet", "field drafted", "runs.parquet"]  # the rounds still hold the old ids


def _rounds_removed(d):
    """A run's rounds deleted (its slow rounds gone from the cost decomposition)."""
    runs, rounds = read_parquet(d / "runs.parquet"), read_parquet(d / "rounds.parquet")
    run_id = runs.at[runs.index[runs["path"] == "speculative"][0], "run_id"]
    write_parquet(rounds[rounds["run_id"] != run_id].reset_index(drop=True), d / "rounds.parquet")
    return {}, ["runs.parquet", "has no rounds in rounds.parquet"]


def _ngram_rejected_draft(d):
    """Forger, acceptance: in a fixed-K n-gram run, a rejected draft rewritten to another
    token (not the committed correction), so the rounds still replay the run's ids; only
    the lookup, re-run on the same context, proposes otherwise."""
    runs, rounds = read_parquet(d / "runs.parquet"), read_parquet(d / "rounds.parquet")
    ngram = set(runs.loc[(runs["draft"] == "ngram") & (runs["policy"] == "fixed"), "run_id"])
    rows = rounds[rounds["run_id"].isin(ngram) & (rounds["accepted"] < rounds["drafted"].map(len))]
    i = rows.index[0]
    drafted = [int(x) for x in rounds.at[i, "drafted"]]
    a = int(rounds.at[i, "accepted"])
    drafted[a] += 1  # not the correction here: the audit would then name the greedy rejection
    rounds.at[i, "drafted"] = drafted
    write_parquet(rounds, d / "rounds.parquet")
    return {}, ["rounds.parquet", f"row {i}, field drafted", "n-gram lookup"]


def _spec_ids_apart(d):
    """A speculative run's ids changed at a position where its rounds accepted a draft
    (its text and token count left alone: nothing compares them with a reference)."""
    runs, rounds = read_parquet(d / "runs.parquet"), read_parquet(d / "rounds.parquet")
    i = runs.index[runs["path"] == "speculative"][0]
    g = rounds[rounds["run_id"] == runs.at[i, "run_id"]].sort_values("round")
    p = 0
    for row in g.itertuples():
        if row.accepted > 0:
            break
        p += row.committed
    ids = list(runs.at[i, "ids"])
    ids[p] = ids[p] + 1
    runs.at[i, "ids"] = ids
    write_parquet(runs, d / "runs.parquet")
    return {}, ["rounds.parquet", "field drafted", f"positions {p} to"]


def _mean_accepted_raised(d):
    """A speculative run's stored mean_accepted raised by one, its rounds left alone."""
    runs = read_parquet(d / "runs.parquet")
    i = runs.index[runs["path"] == "speculative"][0]
    runs.loc[i, "mean_accepted"] = runs.loc[i, "mean_accepted"] + 1
    write_parquet(runs, d / "runs.parquet")
    return {}, ["runs.parquet", f"row {i}, field mean_accepted", "rounds' mean accepted"]


def _greedy_correction_drafted(d):
    """A greedy speculative run's rejected draft rewritten to the token committed in its
    place (what rewriting a changed greedy output to the reference under its rounds
    leaves: the forger helper's 'lossy configuration made lossless')."""
    runs, rounds = read_parquet(d / "runs.parquet"), read_parquet(d / "rounds.parquet")
    greedy = runs[(runs["path"] == "speculative") & (runs["temperature"] == 0)]
    for run_id, out in zip(greedy["run_id"], greedy["ids"]):
        p = 0
        for row in rounds[rounds["run_id"] == run_id].sort_values("round").itertuples():
            if row.accepted < len(row.drafted) and row.committed > row.accepted:
                drafted = list(row.drafted)
                drafted[row.accepted] = out[p + row.accepted]
                rounds.at[row.Index, "drafted"] = drafted
                write_parquet(rounds, d / "rounds.parquet")
                return {}, ["rounds.parquet", f"row {row.Index}, field accepted", "rejected draft"]
            p += row.committed
    raise AssertionError("no greedy round rejected a draft")


@pytest.mark.parametrize("tamper", [_ids_cut, _fewer_tokens, _text_apart, _text_equal_off, _micro_median, _start_erased,
                                    _reserved_dropped, _workload_relabelled, _target_only_apart, _accepted_raised,
                                    _pit_draws_moved, _rounds_merged, _spec_ids_apart, _diverged_ids_to_reference, _ngram_rejected_draft, _rounds_removed,
                                    _mean_accepted_raised, _greedy_correction_drafted],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_run_unlike_its_own_identities_fails_the_audit(copy, capsys, cached, tamper):
    """The ids, text, token counts and times a run holds by construction: checked before
    the analysis."""
    edits, names = tamper(set_dir(copy / "manifests", SET))
    rehash(copy, edits)
    line = audit_line(copy, capsys)
    assert all(name in line for name in names), line


@pytest.mark.parametrize("tamper", [_seal_after_reserved, _reference_sealed_late, _runs_shifted, _run_order,
                                    _provenance, _provenance_other_cpu, _prompts, _pit_uniform, _pit_rank, _tokens_per_s, _decode_ns,
                                    _downgrade, _faster_than_the_clock, _slower_than_the_clock,
                                    _pit_moved_with_its_bounds, _decode_into_prefill, _target_decode_from_prefill],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_raw_record_unlike_its_seals_times_or_identities_fails_the_audit(copy, capsys, cached, tamper):
    """Checked before the analysis, so the cached one of the untouched set never serves."""
    edits, names = tamper(set_dir(copy / "manifests", SET))
    rehash(copy, edits)
    line = audit_line(copy, capsys)
    assert all(name in line for name in names), line


def test_an_edited_legacy_set_is_no_longer_legacy(tmp_path, capsys):
    """a10: a format-1 set's summary edited and the manifest re-hashed: its manifest's sha256
    is no longer a legacy set's, so its missing raw records are an error."""
    legacy = "cpu-smollm2@xeon-avx512"
    d = set_dir(tmp_path / "manifests", legacy)
    shutil.copytree(set_dir(ROOT / "manifests", legacy), d)
    edit_json(d / "level1.json", lambda l1: l1.update(max_exact_error=1e-9))
    edit_json(d / "manifest.json", lambda m: m["files"]["level1.json"].update(
        sha256=sha256_file(d / "level1.json"), bytes=(d / "level1.json").stat().st_size))
    write_json({}, tmp_path / "numbers.json")
    rc = main(["audit", "--studies", legacy, "--manifests", str(tmp_path / "manifests"),
               "--numbers", str(tmp_path / "numbers.json"), "--benchmarks", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "xeon-avx512/manifest.json" in err \
        and "not one of the legacy sets" in err, err


def test_a_number_row_of_no_audited_set_fails_the_audit(copy, capsys, cached):
    """a11: a row under a set the audit was not given is recomputed from nothing."""
    numbers = read_json(copy / "numbers.json")
    numbers["paper-qwen@epyc-zen4.best.x.speedup"] = {"value": 3.0, "unit": "x", "source": "runs.parquet"}
    write_json(numbers, copy / "numbers.json")
    line = audit_line(copy, capsys)
    assert "paper-qwen@epyc-zen4.best.x.speedup: in numbers.json but recomputed from no audited" in line, line


@pytest.mark.parametrize("metric,value", [("title", "Speculative decoding pays 2x"), ("study", "cpu-smollm2@epyc-avx2"),
                                          ("frozen", False), ("break_even", ["cpu-smollm2@epyc-avx2"])])
def test_a_changed_paper_row_fails_the_audit(copy, cached, metric, value):
    """a11: paper.* rows are recomputed from the config the audit is given."""
    import yaml
    from specproof.errors import SpecproofError
    from specproof.publish.audit.checks import paper_numbers
    from specproof.publish.manifests import audit
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["studies"], config["replicates"], config["retired"], config["pending"] = [SET], [], [], []
    config["break_even"] = [SET]
    (copy / "config.yaml").write_text(yaml.safe_dump(config))
    numbers = read_json(copy / "numbers.json")
    rows, note = paper_numbers([SET], copy / "manifests", copy / "config.yaml")
    assert note is None and set(rows) == {"paper.title", "paper.study", "paper.frozen", "paper.break_even"}
    write_json({**numbers, **rows}, copy / "numbers.json")
    audit([SET], copy / "manifests", copy / "numbers.json", ROOT / "benchmarks" / "results", copy / "config.yaml",
          cited=ROOT / "paper" / "cited.yaml")
    rows[f"paper.{metric}"]["value"] = value
    write_json({**numbers, **rows}, copy / "numbers.json")
    with pytest.raises(SpecproofError, match=rf"numbers\.json: paper\.{metric}: numbers\.json has"):
        audit([SET], copy / "manifests", copy / "numbers.json", ROOT / "benchmarks" / "results", copy / "config.yaml",
              cited=ROOT / "paper" / "cited.yaml")


def _bench_copy(tmp: Path) -> Path:
    bench = tmp / "bench"
    shutil.copytree(ROOT / "benchmarks" / "results", bench)
    return bench


def test_a_benchmark_table_edited_apart_from_its_json_fails_the_audit(copy, capsys, cached):
    """a06: target_only.md's cells edited and the JSON's table_sha256 set to match."""
    from specproof.records import sha256_text
    bench = _bench_copy(copy)
    md = (bench / "target_only.md").read_text()
    forged = md.replace("| 1.03 ", "| 1.53 ", 1).replace("- ", "- By a wide margin: ", 1)
    assert forged != md
    (bench / "target_only.md").write_text(forged)
    edit_json(bench / "target_only.json", lambda j: j.update(table_sha256=sha256_text(forged)))
    rc = main(["audit", "--studies", SET, "--manifests", str(copy / "manifests"),
               "--numbers", str(copy / "numbers.json"), "--benchmarks", str(bench)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "target_only.md: differs from the table rendered" in err, err


def test_a_stray_benchmark_table_fails_the_audit(copy, capsys, cached):
    bench = _bench_copy(copy)
    (bench / "extra.md").write_text("# A table with no JSON\n")
    rc = main(["audit", "--studies", SET, "--manifests", str(copy / "manifests"),
               "--numbers", str(copy / "numbers.json"), "--benchmarks", str(bench)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "extra.md: a benchmark table with no extra.json" in err, err


def test_a_manifest_unlike_the_committed_one_fails_the_audit(copy, capsys, cached):
    """The anchor: in a git checkout, a set's manifest.json must be the committed one."""
    import subprocess
    git = lambda *a: subprocess.run(["git", "-C", str(copy), "-c", "user.name=t", "-c", "user.email=t@t", *a],
                                    check=True, capture_output=True)
    git("init", "-q")
    git("add", "manifests")
    git("commit", "-q", "-m", "frozen")
    rehash(copy)  # unchanged: still the committed manifest
    assert main(["audit", "--studies", SET, "--manifests", str(copy / "manifests"), "--numbers",
                 str(copy / "numbers.json"), "--benchmarks", str(ROOT / "benchmarks" / "results")]) == 0
    assert f"{SET}: manifest.json is the committed one" in capsys.readouterr().out
    edit_json(set_dir(copy / "manifests", SET) / "manifest.json", lambda m: m.update(note="re-frozen"))
    rehash(copy)
    line = audit_line(copy, capsys)
    assert "manifest.json: manifest.json differs from the committed one" in line, line
    git("add", "manifests")
    git("commit", "-q", "-m", "re-frozen in place")
    line = audit_line(copy, capsys)
    assert "manifest.json: manifest.json was changed after the commit that froze it" in line, line


def test_a_benchmark_table_unlike_the_committed_one_or_gone_fails_the_audit(tmp_path):
    """The benchmark tables' anchor: in a git checkout, each JSON is the committed one and
    none of the committed ones is gone."""
    import subprocess

    from specproof.errors import SpecproofError
    from specproof.publish.audit.benchmarks import committed_bench_line
    bench = tmp_path / "results"
    shutil.copytree(ROOT / "benchmarks" / "results", bench)
    git = lambda *a: subprocess.run(["git", "-C", str(bench), "-c", "user.name=t", "-c", "user.email=t@t", *a],
                                    check=True, capture_output=True)
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "tables")
    assert committed_bench_line(bench).endswith("tables' JSON are the committed ones")
    edit_json(bench / "ngram.json", lambda t: t["values"].update({"min_ratio": {"value": 9.0, "unit": "x"}}))
    with pytest.raises(SpecproofError, match="ngram.json: differs from the committed table"):
        committed_bench_line(bench)
    git("checkout", "--", "ngram.json")
    (bench / "policies.json").unlink()
    with pytest.raises(SpecproofError, match="policies.json: a committed benchmark table is missing"):
        committed_bench_line(bench)


def _prov_edits():
    late = lambda p: p | {"captured_at": "2020-01-01T00:00:00+00:00"}  # noqa: E731
    return [({"git": {"commit": "0" * 40, "dirty": False}}, "not a commit of this checkout's history"),
            (late, "after the provenance's captured_at"),
            ({"study_sha": "f" * 64}, "field study.config_sha256"),
            ({"alpha": 0.9}, "field study.config differs")]


@pytest.mark.parametrize("edit,message", _prov_edits(), ids=["unknown_commit", "captured_before_commit", "config_sha", "config_alpha"])
def test_a_provenance_unlike_its_commit_fails_the_audit(edit, message):
    """The provenance's commit is checked against the checkout the set is committed in:
    an unknown commit, a capture time before the commit, a config hash unlike the commit's
    study config."""
    from specproof.errors import SpecproofError
    from specproof.publish.audit.provenance import provenance_commit_line
    dest = set_dir(ROOT / "manifests", SET)
    prov = read_json(dest / "provenance.json")
    assert "is in this checkout's history" in provenance_commit_line(dest, SET, prov)
    if callable(edit):
        prov = edit(prov)
    elif "study_sha" in edit:
        prov = prov | {"study": prov["study"] | {"config_sha256": edit["study_sha"]}}
    elif "alpha" in edit:
        config = prov["study"]["config"]
        config = config | {"certificate": config.get("certificate", {}) | {"alpha": edit["alpha"]}}
        prov = prov | {"study": prov["study"] | {"config": config}}
    else:
        prov = prov | edit
    with pytest.raises(SpecproofError, match=message):
        provenance_commit_line(dest, SET, prov)


def test_a_retired_set_is_audited_too(copy):
    """A set the paper no longer reads is still audited: a value changed in its
    calibration.json, its manifest re-hashed, fails (issue 37: a reader may cite any set)."""
    import yaml
    from specproof.errors import SpecproofError
    from specproof.publish.manifests import audit_unread_sets
    config = {"studies": ["head@m"], "retired": [{"set": SET, "why": "a test"}], "pending": []}
    (copy / "config.yaml").write_text(yaml.safe_dump(config))
    lines = audit_unread_sets(["head@m"], copy / "manifests", copy / "config.yaml")
    assert any("not read by the paper" in line for line in lines)
    d = set_dir(copy / "manifests", SET)
    cal = read_json(d / "calibration.json")
    order = next(iter(cal["orders"]))
    cal["orders"][order]["null_rejection_rate"] = 0.0 if cal["orders"][order]["null_rejection_rate"] else 0.5
    write_json(cal, d / "calibration.json")
    rehash(copy)
    with pytest.raises(SpecproofError, match="calibration"):
        audit_unread_sets(["head@m"], copy / "manifests", copy / "config.yaml")
