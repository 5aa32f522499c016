"""Agreement with the sealed reference: three endpoints that are never interchanged.

H: decoded text equal to the reference's text.
Q: token ids equal to the sealed reference ids.
P: a sealed prediction equals the live ids (prediction.json; see ``evidence.qualification``).
Counts are reported per path as matched/total; every mismatch keeps its first divergent
index and the target's top-2 logit margin there (margins.parquet, from the
``margins`` stage, which re-scores the reference on the target-only path:
``evidence.reference.score_margins``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from ..evidence.reference import first_divergence, reference_lookup


def agreement_table(runs: pd.DataFrame, qualification: pd.DataFrame, reference: pd.DataFrame,
                    margins: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per greedy run (grid and qualification) with H, Q and divergence."""
    ref = reference_lookup(reference)
    rows = []
    greedy = runs[runs["temperature"] == 0]
    for r in greedy.itertuples():
        rows.append(_row("grid", r.target, r.draft, r.path, r.config, r.verify_mode,
                         r.prompt_id, r.workload, r.ids, r.text, ref, r.run_id))
    for i, r in enumerate(qualification.itertuples()):
        rows.append(_row("qualification", r.target, r.draft, "speculative", f"K{r.k}-qualification",
                         r.verify_mode, r.prompt_id, r.workload, r.ids, None, ref, f"qual-{i}"))
    df = pd.DataFrame(rows)
    if margins is not None and not margins.empty:
        df = df.merge(margins[["target", "prompt_id", "index", "top2_margin"]].rename(
            columns={"index": "first_divergence"}), on=["target", "prompt_id", "first_divergence"],
            how="left")
    else:
        df["top2_margin"] = np.nan
    df.loc[df["Q"], "top2_margin"] = np.nan
    return df.drop_duplicates(subset=["row_id"]).drop(columns=["row_id"])


def _row(source, target, draft, path, config, mode, prompt_id, workload, ids, text, ref, row_id):
    want = ref[(target, prompt_id)]
    ids = [int(x) for x in ids]
    return {"row_id": row_id, "source": source, "target": target, "draft": draft, "path": path,
            "config": config, "verify_mode": mode, "prompt_id": prompt_id, "workload": workload,
            "H": (text == want["text"]) if text is not None else ids == want["ids"],
            "Q": ids == want["ids"], "first_divergence": first_divergence(ids, want["ids"])}


def kept_by_config(table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per greedy speculative configuration (pair, config) and workload ('all' and each):
    ``prompts`` it ran, ``Q_prompts`` the prompts on which every one of its runs' ids equal
    the sealed reference's, ``H_prompts`` those on which every run's text equals it, from
    the agreement table's grid rows (``agreement_table``; the pair is the runs' for that
    target and draft). A speed is a lossless speed only where Q_prompts == prompts."""
    grid = table[(table["source"] == "grid") & (table["path"] == "speculative")]
    pairs = runs[["target", "draft", "pair"]].drop_duplicates()
    per_prompt = grid.merge(pairs, on=["target", "draft"]).groupby(
        ["pair", "config", "workload", "prompt_id"], sort=False)[["Q", "H"]].all().reset_index()
    both = pd.concat([per_prompt.assign(workload="all"), per_prompt], ignore_index=True)
    return both.groupby(["pair", "config", "workload"], sort=False).agg(
        prompts=("prompt_id", "size"), Q_prompts=("Q", "sum"), H_prompts=("H", "sum")).reset_index()


def no_change_counts(table: pd.DataFrame, live: list[dict]) -> dict[tuple[str, str], dict]:
    """The trivial prediction "the path changes nothing" scored as P is: per (target,
    verify path), how many of P's live runs (``live``: target, verify_mode, prompt_id) have
    ids equal to the sealed reference (Q of those qualification runs), of how many. A
    sealed prediction that does not beat it has predicted nothing the reference did not."""
    qual = table[table["source"] == "qualification"]
    keys = {(x["target"], x.get("verify_mode"), x["prompt_id"]) for x in live}
    out: dict[tuple[str, str], dict] = {}
    for r in qual.itertuples():
        if (r.target, r.verify_mode, r.prompt_id) in keys:
            c = out.setdefault((r.target, r.verify_mode), {"matched": 0, "total": 0})
            c["matched"] += bool(r.Q)
            c["total"] += 1
    return out


def recomputed_q(qualification: pd.DataFrame, reference: pd.DataFrame) -> pd.Series:
    """Q of each qualification run, recomputed: its ids equal the sealed reference's ids
    for its target and prompt (what the run's stored ``ids_equal`` claims; the numbers
    use this, never the stored column)."""
    ref = reference_lookup(reference)
    return pd.Series([[int(x) for x in r.ids] == ref[(r.target, r.prompt_id)]["ids"]
                      for r in qualification.itertuples()], index=qualification.index, dtype=bool)


def agreement_counts(table: pd.DataFrame) -> pd.DataFrame:
    """matched / total of H and Q per (source, target, path, verify_mode)."""
    g = table.groupby(["source", "target", "path", "verify_mode"], sort=True)
    return g.agg(H_matched=("H", "sum"), Q_matched=("Q", "sum"), total=("Q", "size")).reset_index()


CHANGE_RATE_CI = 0.95  # exact (Clopper-Pearson) interval on the per-token rate of first changes


def change_rate(qualification: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """Per target and verify path of the qualification runs: ``changed`` runs (ids unlike
    the sealed reference's), ``tokens`` compared (a changed run's tokens up to and
    including its first changed one, an unchanged run's all), and ``rate`` = changed /
    tokens, the per-token rate at which the path first changes a greedy output: unlike
    the share of changed runs it does not grow with the output length. ``ci_low`` and
    ``ci_high``: an exact binomial interval that treats each compared token as a trial
    (a constant per-token hazard has the binomial's likelihood)."""
    ref = reference_lookup(reference)
    rows = []
    for r in qualification.itertuples():
        want = ref[(r.target, r.prompt_id)]["ids"]
        d = first_divergence([int(x) for x in r.ids], want)
        rows.append({"target": r.target, "verify_mode": r.verify_mode, "changed": d >= 0,
                     "tokens": d + 1 if d >= 0 else len(want)})
    if not rows:
        return pd.DataFrame(columns=["target", "verify_mode", "changed", "tokens", "rate", "ci_low", "ci_high"])
    g = pd.DataFrame(rows).groupby(["target", "verify_mode"], sort=True)
    out = g.agg(changed=("changed", "sum"), tokens=("tokens", "sum")).reset_index()
    cis = [binomtest(int(c), int(n)).proportion_ci(CHANGE_RATE_CI, "exact") for c, n in zip(out["changed"], out["tokens"])]
    return out.assign(rate=out["changed"] / out["tokens"], ci_low=[c.low for c in cis], ci_high=[c.high for c in cis])


def same_function(reference: pd.DataFrame) -> pd.DataFrame:
    """Per two targets of a set that tokenized every shared prompt alike (one tokenizer):
    the shared prompts, on how many their sealed greedy ids are equal (``ids_equal``) and
    their texts (``text_equal``). Two stored precisions of one network compute one function
    exactly when every prompt's ids are equal; a count below ``prompts`` measures how far
    the storage moved the greedy choice."""
    by_target = {t: g.set_index("prompt_id") for t, g in reference.groupby("target", sort=False)}
    names, rows = list(by_target), []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = by_target[a].index.intersection(by_target[b].index)
            ra, rb = by_target[a].loc[shared], by_target[b].loc[shared]
            if not len(shared) or any(list(x) != list(y) for x, y in zip(ra["prompt_ids"], rb["prompt_ids"])):
                continue
            rows.append({"target_a": a, "target_b": b, "prompts": len(shared),
                         "ids_equal": sum(list(x) == list(y) for x, y in zip(ra["ids"], rb["ids"])),
                         "text_equal": int((ra["text"] == rb["text"]).sum())})
    return pd.DataFrame(rows, columns=["target_a", "target_b", "prompts", "ids_equal", "text_equal"])
