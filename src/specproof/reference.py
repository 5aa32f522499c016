"""Sealed target-only references: greedy ids per (target, prompt), sealed before any
speculative run. The seal is sha256(canonical ids) together with the provenance's
sha256; every later stage calls ``check_seal`` and refuses a changed reference."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from .decoding import DecodeSettings, decode_target_only
from .errors import SpecproofError
from .loader import ModelPool
from .records import canonical_json, read_json, read_parquet, sha256_file, sha256_text, write_json, write_parquet
from .study import Study
from .workloads import prompt_ids


def reference_ids_sha256(df: pd.DataFrame) -> str:
    rows = sorted((r.target, r.prompt_id, [int(x) for x in r.ids]) for r in df.itertuples())
    return sha256_text(canonical_json(rows))


def run_reference(study: Study, prompt_set: list[dict], provenance: Path, out: Path, seal: Path) -> None:
    settings = DecodeSettings(max_new_tokens=study.settings["max_new_tokens"], temperature=0.0,
                              seed=study.settings["seed"])
    pool, rows = ModelPool(study), []
    bar = tqdm(total=len(study.target_names) * len(prompt_set), desc="reference", unit="run")
    for tname in study.target_names:
        target = pool.target(tname)
        for rec in prompt_set:
            ids = prompt_ids(target, rec)
            r = decode_target_only(target, ids, settings)
            rows.append({"target": tname, "prompt_id": rec["id"], "workload": rec["workload"],
                         "prompt_ids": ids, "ids": r.new_ids, "text": r.text,
                         "stop_reason": r.stop_reason})
            bar.update()
        pool.release_target(tname)
    bar.close()
    df = pd.DataFrame(rows)
    write_parquet(df, out)
    write_json({"study": study.name, "ids_sha256": reference_ids_sha256(df),
                "provenance_sha256": sha256_file(provenance),
                "sealed_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}, seal)


def check_seal(reference: Path, seal: Path) -> pd.DataFrame:
    """The sealed reference, or an error naming the file whose content changed."""
    sealed = read_json(seal)
    df = read_parquet(reference)
    actual = reference_ids_sha256(df)
    if actual != sealed.get("ids_sha256"):
        raise SpecproofError(f"{reference}: reference ids changed since they were sealed in {seal} "
                             f"(ids_sha256 {actual[:12]} != sealed {str(sealed.get('ids_sha256'))[:12]}); "
                             "refusing to run against a changed reference")
    return df


def reference_lookup(df: pd.DataFrame) -> dict[tuple[str, str], dict]:
    return {(r.target, r.prompt_id): {"ids": [int(x) for x in r.ids], "text": r.text}
            for r in df.itertuples()}
