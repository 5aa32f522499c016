"""``specproof advise``: should speculation be enabled on this machine, and at which K?

Measures, for a target and a drafter: the target's verify cost v(B) for B = 1..K_max+1,
the draft step cost c_draft, and acceptance by draft position alpha_i from a short
speculative probe at K_max on the user's prompts (greedy unless a temperature is given;
a position the drafter was asked for but did not propose, as an n-gram lookup without a
long enough match does, counts as rejected).
It then predicts, for every K,

    S(K) = t_T * E[C|K] / E[T|K],   E[C|K] = 1 + sum_j prod_{i<=j} alpha_i,
    E[T|K] = mean over probe rounds of (d_K c_draft + v(d_K + 1)) + x,  d_K = min(K, d)

with d the tokens the drafter proposed in a probe round (K_max for a model drafter, so
E[T|K] = K c_draft + v(K+1) + x; an n-gram lookup proposes fewer, or none, and a round
that proposes none costs one target step), t_T = v(1) + x_T the target-only cost per
token (x_T its per-step residual, x the per-round residual, both measured in the probe).
It recommends K* = argmax S(K); speculation is enabled only if S(K*) > 1.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..decode.backend import Backend
from ..decode.costmodel import acceptance_by_position, expected_committed, expected_round_ms
from ..decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from ..decode.drafters import Drafter, ModelDrafter
from ..decode.policies import FixedPolicy
from ..models.loader import ModelPool
from ..records import write_parquet
from ..study.config import Study
from ..study.workloads import prompt_ids, split_of
from .micro import time_forward


def advise(target: Backend, drafter: Drafter, prompts: list[list[int]], k_max: int = 8,
           temperature: float = 0.0, probe_tokens: int = 48, repeats: int = 5, seed: int = 0,
           records: dict | None = None) -> dict:
    """Measure (verify cost, draft step cost, a probe at K_max per prompt) and predict
    with ``predict``. ``records``, when given, receives the measurements the prediction
    is computed from: ``records["micro"]`` (one row per timed call kind: measure
    'verify' at B or 'draft', samples_ms) and ``records["rounds"]`` (the probe's rounds:
    path 'target' or 'speculative', prompt index, requested, k_max, the round columns)."""
    t0 = time.perf_counter()
    ctx = prompts[0]
    block = (ctx * (k_max + 2))[: k_max + 1]
    micro = [{"measure": "verify", "B": b, "samples_ms": time_forward(target, ctx, block[:b], repeats)}
             for b in range(1, k_max + 2)]
    if isinstance(drafter, ModelDrafter):
        micro.append({"measure": "draft", "B": 1,
                      "samples_ms": time_forward(drafter.backend, ctx, block[:1], repeats * 2, last_only=True)})
    # model-free drafters: the draft step cost comes from the probe's rounds (see predict)
    settings = DecodeSettings(probe_tokens, temperature, seed)
    frames = []
    for i, ids in enumerate(prompts):
        base = decode_target_only(target, ids, settings).rounds_frame()
        frames.append(base.assign(path="target", prompt=i, requested=0))
        run = decode_speculative(target, drafter, ids, settings, FixedPolicy(k_max)).rounds_frame()
        # what the decoder asked for: K_max, or fewer where the token budget ran out
        run["requested"] = np.minimum(k_max, probe_tokens - (run["committed"].cumsum() - run["committed"]) - 1)
        frames.append(run.assign(path="speculative", prompt=i))
    import pandas as pd
    rounds = pd.concat(frames, ignore_index=True).assign(k_max=k_max)
    micro = pd.DataFrame(micro)
    if records is not None:
        records["micro"], records["rounds"] = micro, rounds
    return {**predict(micro, rounds, k_max), "seconds": time.perf_counter() - t0}


def predict(micro: "pd.DataFrame", rounds: "pd.DataFrame", k_max: int) -> dict:
    """The prediction from the measurements alone (the audit recomputes it from
    advise_micro.parquet and advise_rounds.parquet): v(B) and c_draft (ms) the medians of
    their samples (c_draft, for a model-free drafter, the probe's draft time per proposed
    token); x_T and x (ms) the means over prompts of each probe run's mean residual per
    round (x adds the draft replay); alpha by requested position over the speculative
    rounds; S(K) = t_T E[C|K] / E[T|K] with t_T = v(1) + x_T, for K = 1..k_max."""
    verify = {int(r.B): statistics.median(list(r.samples_ms))
              for r in micro[micro["measure"] == "verify"].itertuples()}
    draft = micro[micro["measure"] == "draft"]
    target_rounds, spec = rounds[rounds["path"] == "target"], rounds[rounds["path"] == "speculative"]
    target_x = [float(g["residual_ns"].mean()) / 1e6 for _, g in target_rounds.groupby("prompt", sort=True)]
    spec_x = [float((g["residual_ns"] + g["replay_ns"]).mean()) / 1e6 for _, g in spec.groupby("prompt", sort=True)]
    alpha = acceptance_by_position(spec, k_max, requested=spec["requested"])
    if len(draft):
        draft_ms = statistics.median(list(draft["samples_ms"].iloc[0]))
    else:
        draft_ms = float(spec["draft_ns"].sum() / max(spec["k"].sum(), 1) / 1e6)
    x_t, x_s = float(np.mean(target_x)), float(np.mean(spec_x))
    t_target = verify[1] + x_t
    # proposal lengths when K_max was asked for: at K the drafter proposes min(K, length)
    full = spec[spec["requested"] == k_max]
    lengths = (full if len(full) else spec)["k"].to_numpy()
    table = []
    for k in range(1, k_max + 1):
        e_c = expected_committed(alpha, k)
        round_ms = expected_round_ms(k, lengths, draft_ms, verify, x_s)
        table.append({"k": k, "expected_committed": e_c, "round_ms": round_ms,
                      "predicted_speedup": t_target * e_c / round_ms})
    best = max(table, key=lambda r: r["predicted_speedup"])
    return {"k": best["k"], "predicted_speedup": best["predicted_speedup"],
            "enable": best["predicted_speedup"] > 1.0, "table": table,
            "verify_ms": verify, "draft_step_ms": draft_ms, "target_ms_per_token": t_target,
            "alpha": [None if not np.isfinite(a) else float(a) for a in alpha],
            "draft_to_target_ratio": draft_ms / verify[1]}


def realized_speedup(target: Backend, drafter: Drafter, prompts: list[list[int]], k: int,
                     temperature: float = 0.0, max_new_tokens: int = 64, seed: int = 0,
                     records: list | None = None) -> float:
    """Measured tokens/s ratio at fixed K (target-only and speculative alternate per
    prompt), see ``realized_from_runs``; ``records`` receives one row per run (path,
    prompt index, k, new_tokens, decode_ns)."""
    s = DecodeSettings(max_new_tokens, temperature, seed)
    runs = []
    for i, ids in enumerate(prompts):
        for path, r in (("target", decode_target_only(target, ids, s)),
                        ("speculative", decode_speculative(target, drafter, ids, s, FixedPolicy(k)))):
            runs.append({"path": path, "prompt": i, "k": k, "new_tokens": r.new_tokens, "decode_ns": r.decode_ns})
    if records is not None:
        records += runs
    import pandas as pd
    return realized_from_runs(pd.DataFrame(runs))


def realized_from_runs(runs: "pd.DataFrame") -> float:
    """(sum tokens_spec / sum decode_ns_spec) / (sum tokens_target / sum decode_ns_target):
    the ratio of total tokens over total decode time, speculative over target-only."""
    s, t = runs[runs["path"] == "speculative"], runs[runs["path"] == "target"]
    return (int(s["new_tokens"].sum()) / int(s["decode_ns"].sum())) / \
        (int(t["new_tokens"].sum()) / int(t["decode_ns"].sum()))


def advise_study(study: Study, prompt_set: list[dict], out: Path, micro_out: Path | None = None,
                 rounds_out: Path | None = None, runs_out: Path | None = None) -> None:
    """Per pair: the advised K and predicted speedup (probe on the discovery prompts),
    and the realized speedup at that K on the reserved prompts (greedy). The summary goes
    to ``out``; the measurements it is computed from, each row with its pair, to
    ``micro_out`` (timed calls), ``rounds_out`` (probe rounds) and ``runs_out`` (the
    realized runs), the raw records the audit recomputes the summary from."""
    import pandas as pd
    discovery, reserved = split_of(prompt_set, study.section("prediction", discovery_fraction=0.5)
                                   ["discovery_fraction"])
    pool, rows = ModelPool(study), []
    micro, rounds, runs = [], [], []
    for _, pair, target in tqdm(pool.each_pair(study.pairs), total=len(study.pairs), desc="advise",
                                unit="pair"):
        drafter = pool.drafter(pair["draft"], target, 0.0, study.settings["seed"])
        probe = [prompt_ids(target, r) for r in discovery[:2]]
        rec: dict = {}
        res = advise(target, drafter, probe, k_max=8, probe_tokens=study.settings["max_new_tokens"],
                     records=rec)
        realized: list[dict] = []
        real = realized_speedup(target, drafter, [prompt_ids(target, r) for r in reserved], res["k"],
                                max_new_tokens=study.settings["max_new_tokens"], records=realized)
        micro.append(rec["micro"].assign(pair=pair["name"]))
        rounds.append(rec["rounds"].assign(pair=pair["name"]))
        runs.append(pd.DataFrame(realized).assign(pair=pair["name"]))
        rows.append({"pair": pair["name"], "target": pair["target"], "draft": pair["draft"],
                     "k": res["k"], "predicted_speedup": res["predicted_speedup"],
                     "realized_speedup": real, "enable": res["enable"],
                     "draft_to_target_ratio": res["draft_to_target_ratio"],
                     "advise_seconds": res["seconds"]})
    for frames, path in ((micro, micro_out), (rounds, rounds_out), (runs, runs_out)):
        if path is not None:
            write_parquet(pd.concat(frames, ignore_index=True), path)
    write_parquet(pd.DataFrame(rows), out)
