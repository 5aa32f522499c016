"""The subcommands that run a study: one of its stages (what the Snakemake rules call) and
its plan (how long each stage will take here)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from ..analysis.analyze import stage_analyze
from ..errors import ConfigError
from ..evidence.plan import estimate, measured_plan
from ..evidence.stages import run_stage
from ..limits import check, output_dir
from .. import load
from ..study.config import load_study


def cmd_stage(a) -> int:
    load.end_with_parent()  # a killed job's stage ends with it
    results = output_dir(a.results, "--results")
    model_dir = a.model_dir and output_dir(a.model_dir, "--model-dir").resolve()
    if a.seed is not None:
        check("seed", a.seed, "--seed")
    if a.name == "analyze":  # reads only the raw records, no study config
        stage_analyze(results)
        return 0
    run_stage(a.name, results, config=a.config and Path(a.config), seed=a.seed, part=a.part,
              gather_jobs=a.gather, model_dir=model_dir, manifests=a.manifests and Path(a.manifests))
    return 0


def cmd_plan(a) -> int:
    if not 0 <= a.acceptance < 1:
        raise ConfigError(f"--acceptance: must be in [0, 1) (got {a.acceptance:g})")
    study = load_study(Path(a.config))
    study.model_dir = a.model_dir and output_dir(a.model_dir, "--model-dir").resolve()
    plan = measured_plan(study, a.acceptance, progress=lambda m: print(f"plan: timing {m}", file=sys.stderr))
    rows = pd.DataFrame(estimate(plan))
    if a.json:
        print(json.dumps({"study": study.name, "acceptance": a.acceptance, "stages": rows.to_dict(orient="records"),
                          "total_minutes": float(rows["minutes"].sum())}, indent=2))
        return 0
    print(f"{study.name}: estimated minutes per stage on this machine (acceptance {a.acceptance:g} assumed)")
    print(rows.to_markdown(index=False, floatfmt=".1f"))
    print(f"total: {rows['minutes'].sum():.0f} min, plus model assembly on first use, margins and the "
          "analysis (a minute or two)")
    return 0
