"""The stage summaries recomputed from the raw records they summarize, so the audit never
takes a summary file's word for a number.

    calibration.json   <- calibration.parquet (the null and planted-violation repetitions)
                          and calibration_power.parquet (the power curve's repetitions)
    level1.json        <- level1.parquet (each case's p, q and its draws' tally per token)
    level2.json        <- level2.parquet (the PIT values of the sampled tokens)
    prediction.json    <- predictions.json (sealed predictions, discovery checks; sealed by
                          prediction_seal.json) and the live reserved runs' ids, read from
                          qualification.parquet (prediction_live.parquet is their copy,
                          which the audit matches against them); earlier sets:
                          prediction_seal.json holds both
    advise.parquet     <- advise_micro.parquet and advise_rounds.parquet (prediction),
                          advise_runs.parquet (realized speedup)

The formulas are the stages' own (``evidence.calibration``, ``evidence.qualification``,
``evidence.advise``), applied here to the frozen rows. A record set frozen before a raw
record was written lacks it; its numbers then come from the summary file, and
``Summaries.sources`` names that file, so the audit can say how many numbers it could only
check against a summary.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..catalog import of_stage, record
from ..evidence.advise import predict, predict_loop, realized_from_runs, run_phases, with_confirmation
from ..evidence.calibration import (LEVEL2_COLUMNS, level1_case, level1_summary, level2_tests,
                                    power_curve, summarize_calibration)
from ..evidence.prediction import first_reserved_start, load_sealed, prediction_counts, reserved_live
from ..errors import SpecproofError
from ..records import read_json, read_parquet

@dataclass
class Summaries:
    calibration: dict
    level1: dict
    level2: dict
    prediction: dict
    advise: pd.DataFrame | None
    # number group -> the file its numbers are computed from: calibration, power (the
    # detectable TVs), level1, level2, prediction.P, prediction.discovery,
    # advise.predicted (k, predicted, enable), advise.realized
    sources: dict[str, str] = field(default_factory=dict)


def recompute(d: Path, alpha: float, n_tokens: int) -> Summaries:
    """Every summary of record set ``d`` from its raw records where the set holds them.
    ``alpha`` is the certificate's level, ``n_tokens`` the speculative tokens in
    pit.parquet (the calibration's study size)."""
    d = Path(d)
    src: dict[str, str] = {}
    has = lambda name: (d / name).is_file()  # noqa: E731

    cal_json = read_json(d / "calibration.json")
    if has("calibration_power.parquet"):
        power = read_parquet(d / "calibration_power.parquet")
        curves = {o: power_curve(g, alpha) for o, g in power.groupby("order", sort=False)}
        src["power"] = "calibration_power.parquet"
    else:
        curves = cal_json["power_curve"]
        src["power"] = "calibration.json"
    calibration = summarize_calibration(read_parquet(d / "calibration.parquet"), curves, alpha, n_tokens)
    src["calibration"] = "calibration.parquet"

    if has("level1.parquet"):
        draws = read_parquet(d / "level1.parquet").sort_values(["case", "token"], kind="stable")
        level1 = level1_summary([level1_case(int(g["vocab"].iloc[0]), int(g["p_support"].iloc[0]),
                                             int(g["q_support"].iloc[0]), g["p"].to_numpy(),
                                             g["q"].to_numpy(), g["count"].to_numpy())
                                 for _, g in draws.groupby("case", sort=True)])
        src["level1"] = "level1.parquet"
    else:
        level1, src["level1"] = read_json(d / "level1.json"), "level1.json"

    if has("level2.parquet"):
        level2 = level2_tests(read_parquet(d / "level2.parquet")[LEVEL2_COLUMNS].to_numpy())
        src["level2"] = "level2.parquet"
    else:
        level2, src["level2"] = read_json(d / "level2.json"), "level2.json"

    doc, seal = load_sealed(d / "predictions.json", d / "prediction_seal.json")
    src["prediction.discovery"] = "predictions.json" if has("predictions.json") else "prediction_seal.json"
    if has("prediction_live.parquet"):
        # P from the reserved live runs' own ids in qualification.parquet, never from the
        # copy in prediction_live.parquet (the audit checks that the copy equals them)
        qual = read_parquet(d / "qualification.parquet")
        live = reserved_live(qual, doc["reserved_prompts"]).to_dict(orient="records")
        prediction = prediction_counts(doc, live)
        prediction["sealed_at"] = seal["sealed_at"]
        prediction["first_reserved_run_at"] = first_reserved_start(
            qual, read_parquet(d / "runs.parquet"), doc["reserved_prompts"])
        src["prediction.P"] = "prediction_live.parquet"
    else:
        old = read_json(d / "prediction.json")
        prediction = {**prediction_counts(doc, []),
                      **{k: old[k] for k in ("live", "per_target", "per_path", "P_matched", "P_total")
                         if k in old}}
        src["prediction.P"] = "prediction.json"

    advise = read_parquet(d / "advise.parquet") if has("advise.parquet") else None
    if advise is not None and all(has(f) for f in of_stage("advise") if record(f).kind == "raw"):
        advise = recompute_advise(advise, read_parquet(d / "advise_micro.parquet"),
                                  read_parquet(d / "advise_rounds.parquet"),
                                  read_parquet(d / "advise_runs.parquet"))
        src["advise.predicted"], src["advise.realized"] = "advise_rounds.parquet", "advise_runs.parquet"
    else:
        src["advise.predicted"] = src["advise.realized"] = "advise.parquet"
    return Summaries(calibration, level1, level2, prediction, advise, src)


def recompute_advise(summary: pd.DataFrame, micro: pd.DataFrame, rounds: pd.DataFrame,
                     runs: pd.DataFrame) -> pd.DataFrame:
    """advise.parquet's rows with k, predicted_speedup, enable and draft_to_target_ratio
    recomputed for every pair the raw records hold, from its timed calls, probe rounds and
    runs (``advise_prediction``), and realized_speedup from its check runs
    (``realized_from_runs``); the other columns (target, draft, timing of the stage) are
    shown as the summary has them. A pair only the summary holds gets no row, so the
    audit reports its numbers as not recomputed."""
    out, shown = [], {row["pair"]: row for row in summary.to_dict(orient="records")}
    for pair in dict.fromkeys(rounds["pair"]):
        row = shown.get(pair, {"pair": pair})
        r, m, n = rounds[rounds["pair"] == pair], micro[micro["pair"] == pair], runs[runs["pair"] == pair]
        confirm, check = run_phases(n)
        if not (len(r) and len(m) and len(check)):
            continue
        res, extra = advise_prediction(row, m, r, confirm, check)
        out.append({**row, "k": res["k"], "predicted_speedup": res["predicted_speedup"],
                    "enable": res["enable"], "draft_to_target_ratio": res["draft_to_target_ratio"],
                    "realized_speedup": realized_from_runs(check), **extra})
    return pd.DataFrame(out, columns=summary.columns)


def advise_prediction(row: dict, micro: pd.DataFrame, rounds: pd.DataFrame, confirm: pd.DataFrame,
                      check: pd.DataFrame) -> tuple[dict, dict]:
    """One pair's advice as its ``model`` says it was made, and the summary columns that
    go with it: 'confirmed' or 'loop', ``with_confirmation`` of ``predict_loop`` over
    ``confirm`` (empty for 'loop', so the loop's own prediction stands, with
    ``loop_predicted_speedup`` and ``confirm_prompts`` 0 as the stage writes them), its
    interval and the micro-benchmark model's prediction at its K; a row written before
    the loop model, ``predict``."""
    k_max = int(rounds["k_max"].iloc[0])
    micro_model = predict(micro, rounds, k_max)
    made = "confirmed" if len(confirm) else "loop" if "predicted_low" in row else None
    if row.get("model") != made:
        raise SpecproofError(f"advise.parquet: pair {row['pair']}, field model is {row.get('model')!r}; its records "
                             f"give {made!r} (confirmation runs make it 'confirmed', a loop-model row 'loop')")
    if made is None:  # written before the loop model
        return micro_model, {}
    interval = _interval_of(row, check)
    res = with_confirmation(predict_loop(micro, rounds, k_max, **interval), confirm,
                            interval.get("future_prompts"))
    extra = {"predicted_low": res["predicted_low"], "predicted_high": res["predicted_high"],
             "micro_predicted_speedup": micro_model["table"][res["k"] - 1]["predicted_speedup"]}
    columns = [c for c in ("interval_unit", "probe_prompts", "future_prompts", "loop_predicted_speedup",
                           "confirm_prompts") if c in row]
    return res, extra | {c: res[c] for c in columns}


def _interval_of(row: dict, runs: pd.DataFrame) -> dict:
    """``predict_loop``'s interval arguments for a loop row: over prompts, for as many new
    prompts as the realized runs hold, where the row says 'prompts'; a row written before
    the interval over prompts (no ``interval_unit``) had the rounds interval."""
    if row.get("interval_unit", "rounds") != "prompts":
        return {"unit": "rounds"}
    return {"unit": "prompts", "future_prompts": int(runs["prompt"].nunique())}
