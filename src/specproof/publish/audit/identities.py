"""Audit checks of the identities family: what every live run holds by construction (token
counts, the ids its rounds replay, an n-gram draft's lookup, agreement with the sealed
reference, its workload).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import SpecproofError
from ...records import read_parquet
from .common import identity_error, ngram_drafts, short
from .registry import SetAudit, register


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
    identity_error(dest / "runs.parquet", runs, given.notna() & (runs["workload"] != given), "workload", given,
                    "prompts.jsonl's workload for its prompt")


def _token_counts(dest: Path, runs: pd.DataFrame, rounds: pd.DataFrame) -> None:
    """Every run has rounds, new_tokens = len(ids) = the sum of its rounds' ``committed``,
    and every round but a run's last commits its accepted drafts plus one token (the correction or bonus; a
    target-only step commits one): committed = accepted + 1."""
    lengths = runs["ids"].map(len)
    identity_error(dest / "runs.parquet", runs, runs["new_tokens"] != lengths, "new_tokens", lengths, "len(ids)")
    if "committed" not in rounds or rounds.empty:
        return
    bare = ~runs["run_id"].isin(rounds["run_id"])
    if bare.any():  # every live run of every frozen set has rounds: a run decodes in rounds
        i = bare.idxmax()
        raise SpecproofError(f"{dest / 'runs.parquet'}: row {i}, field run_id {short(runs.at[i, 'run_id'])} has no "
                             "rounds in rounds.parquet, though every run decodes in rounds")
    committed = runs["run_id"].map(rounds.groupby("run_id")["committed"].sum())
    bad = committed.notna() & (committed != runs["new_tokens"])
    identity_error(dest / "runs.parquet", runs, bad, "new_tokens", committed,
                    "its rounds' committed tokens in rounds.parquet, summed")
    if "accepted" in rounds:
        last = rounds.groupby("run_id")["round"].transform("max") == rounds["round"]
        bad = ~last & (rounds["committed"] != rounds["accepted"] + 1)
        identity_error(dest / "rounds.parquet", rounds, bad, "committed", rounds["accepted"] + 1,
                        "accepted + 1 (a round before the run's last)")


def _rounds_replay_ids(dest: Path, runs: pd.DataFrame, rounds: pd.DataFrame) -> None:
    """A run's rounds, in order, replay its ids: a round drafts k = len(drafted) tokens,
    and its first min(accepted, committed) drafts are the run's next ids; a run's
    mean_accepted is its rounds' mean accepted over rounds with k > 0."""
    if rounds.empty or "drafted" not in rounds:
        return
    path = dest / "rounds.parquet"
    identity_error(path, rounds, rounds["k"] != rounds["drafted"].map(len), "k", rounds["drafted"].map(len),
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
                raise SpecproofError(f"{path}: row {i}, field drafted starts {short(d[:n])}; the run's ids at "
                                     f"positions {p} to {p + n - 1} in runs.parquet are {short(out[p:p + n])}")
            _greedy_rejection(path, i, run_id in greedy, d, int(a), int(c), out, p)
            p += int(c)
    spec = runs[runs["path"] == "speculative"]
    drafting = rounds[rounds["k"] > 0]
    want = spec["run_id"].map(drafting.groupby("run_id")["accepted"].mean())
    bad = want.notna() & ~np.isclose(spec["mean_accepted"], want, rtol=1e-9, atol=0)
    identity_error(dest / "runs.parquet", spec, bad, "mean_accepted", want,
                    "its rounds' mean accepted (rounds with k > 0) in rounds.parquet")


def _ngram_drafts(dest: Path, runs: pd.DataFrame, rounds: pd.DataFrame, reference: pd.DataFrame) -> None:
    """A fixed-K run drafted by n-gram lookup drafts what the lookup proposes: at each round,
    ``NGramDrafter(max_ngram, min_ngram).propose(prompt ids + the run's ids so far, k)`` with
    k = min(K, max_new_tokens - ids so far - 1), the loop's request (the config's drafter in
    provenance.json, the prompt ids in the sealed reference). The lookup is deterministic, so
    ids or rounds rewritten without re-running it leave a round it would not have drafted."""
    from ...decode.drafters import NGramDrafter
    from ...records import read_json
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
                raise SpecproofError(f"{path}: row {i}, field drafted is {short(drafted)}, but n-gram lookup on the "
                                     f"prompt and the run's first {p} ids proposes {short(want)} (k = {k})")
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
    from ...analysis.agreement import recomputed_q
    from ...evidence.reference import reference_lookup
    ref = reference_lookup(reference)
    want = pd.Series([ref[(r.target, r.prompt_id)] for r in runs.itertuples()], index=runs.index, dtype=object)
    same = pd.Series([[int(x) for x in ids] == w["ids"] for ids, w in zip(runs["ids"], want)], index=runs.index)
    plain = (runs["path"] == "target") & (runs["temperature"] == 0)
    identity_error(dest / "runs.parquet", runs, plain & ~same, "ids", want.map(lambda w: w["ids"]),
                    "the sealed reference.parquet's ids (a greedy target-only run)")
    identity_error(dest / "runs.parquet", runs, same & (runs["text"] != want.map(lambda w: w["text"])), "text",
                    want.map(lambda w: w["text"]), "the sealed reference's text for the same ids")
    qual = read_parquet(dest / "qualification.parquet")
    if "text_equal" in qual and not qual.empty:
        q = recomputed_q(qual, reference)
        identity_error(dest / "qualification.parquet", qual, q & ~qual["text_equal"].astype(bool), "text_equal",
                        q, "its ids, equal to the sealed reference's,")


@register("run_identities", ("runs.parquet", "rounds.parquet", "reference.parquet", "qualification.parquet",
                             "prompts.jsonl", "provenance.json"),
          "every run's token counts, the ids its rounds replay, an n-gram draft's lookup, its agreement with "
          "the sealed reference and its workload hold as the decoding makes them, so ids cannot be edited apart "
          "from their rounds")
def _run_identities(s: SetAudit) -> None:
    check_run_identities(s.dest, s.reference)
