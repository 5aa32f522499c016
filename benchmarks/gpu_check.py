"""GPU check: the headline pair's cost terms on an accelerator, and the speedup they project.

The pair's two architectures (Qwen2.5-Coder-1.5B-Instruct target, 0.5B draft; configs in
benchmarks/gpu_configs/, read from the GGUF headers by ``--write-configs``) are built with
random weights (``--dtype``, default bfloat16) on ``--device``: no model file travels to a
lent GPU. Timing of dense kernels does not depend on weight values; acceptance does, so it
is not measured here but borrowed from the frozen CPU record set (``--set``; pair
qwen-1b5+qwen-0b5-draft, greedy fixed-K runs). Measured, through specproof's hf backend
(``HFBackend._forward``: logits copied to the host as float32) and decoding loop:

  v(B)  ms of one target forward of B new tokens after a cached context of ``--context``
        tokens (B = 1..16; all B rows of logits), device-synchronised before and after;
  c     ms of one draft step (one token, last-position logits);
  x(K)  ms per round of the loop outside its draft, replay and verify calls
        (``RoundRecord.residual_ns``), at full acceptance: the target drafts for itself
        (greedy, same weights), K = 1..8; the acceptance it reached is reported;
  x_T   ms per target-only step outside the target call (round_ns - verify_ns);
  D2H   bytes the backends return to the host per round (sum of the logits' nbytes: at
        full acceptance (2K + 1) rows of V float32 values, 4 V (2K + 1) bytes).

Every quantity is ``--samples`` samples (>= 30; the rounds rotate over every B and the
draft step so drift hits all alike), summarised by its median with a distribution-free
95% interval from order statistics (``median_interval``). Projected per K (decode.costmodel,
analysis.costs), alpha_i the CPU set's acceptance by position:

  E[C|K] = 1 + sum_{j<=K} prod_{i<=j} alpha_i                      (tokens per round)
  S(K)   = (v(1) + x_T) E[C|K] / (K c + v(K+1) + x(K))              (loop, x included)
  S_0(K) = v(1) E[C|K] / (K c + v(K+1))                             (ideal, x = 0)

with 95% percentile intervals from ``--resamples`` bootstrap resamples of every timing
sample set and of the set's prompts. Writes <out>/gpu_check.{md,json} (projection),
<out>/gpu_check_timings.{md,json} and the raw samples <out>/gpu_check/samples.json
(rewritten after every phase, so a run stopped early leaves what it measured).
``--budget-s`` bounds the run: a phase that would pass it is cut and the tables say so.
"""
from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
import time
from pathlib import Path

import numpy as np

from specproof.analysis.costs import model_speedup
from specproof.decode.backend import Backend, BackendInfo, timed_forward_ms
from specproof.decode.costmodel import expected_committed, expected_round_ms
from specproof.decode.decoding import DecodeSettings, decode_speculative, decode_target_only
from specproof.decode.drafters import ModelDrafter
from specproof.decode.policies import FixedPolicy
from specproof.models.hf import HFBackend

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = Path(__file__).resolve().parent / "gpu_configs"
MODELS = {"target": ("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-q4_k_m"),
          "draft": ("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-q4_k_m")}
PAIR = "qwen-1b5+qwen-0b5-draft"
MAX_B, K_MAX, LEVEL = 16, 8, 0.95
TINY = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 1024}


class Stopped(BaseException):
    """SIGTERM (e.g. from ``timeout``): write what was measured, then exit. A BaseException,
    as KeyboardInterrupt is, so that no library's ``except Exception`` swallows it."""


def _stop(signum, frame):
    raise Stopped(f"signal {signum}")


def _log(text: str) -> None:
    print(f"gpu_check: {text}", file=sys.stderr, flush=True)


# --- statistics ----------------------------------------------------------------------

def median_interval(samples, level: float = LEVEL) -> tuple[float, float, float]:
    """(median, low, high): the distribution-free interval [x_(k), x_(n-k+1)] of the sorted
    samples, k = max(1, binom.ppf((1 - level) / 2, n, 1/2)), which covers the population
    median with probability 1 - 2 P(Bin(n, 1/2) <= k - 1) >= level (n >= 6 for 95%)."""
    from scipy.stats import binom
    x = np.sort(np.asarray(samples, dtype=float))
    n = x.size
    k = max(1, int(binom.ppf((1 - level) / 2, n, 0.5)))
    return float(np.median(x)), float(x[k - 1]), float(x[n - k])


def boot_medians(samples, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Medians of ``resamples`` resamples (with replacement, same size) of ``samples``."""
    x = np.asarray(samples, dtype=float)
    return np.median(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)


# --- acceptance, borrowed from the CPU record set ------------------------------------

def set_rounds(set_dir: Path, pair: str):
    """The rounds (with their run's prompt) of the set's greedy fixed-K speculative runs of
    ``pair``, and the K values those runs used."""
    import pandas as pd
    runs = pd.read_parquet(set_dir / "runs.parquet")
    runs = runs[(runs["pair"] == pair) & (runs["path"] == "speculative") & (runs["policy"] == "fixed")
                & (runs["temperature"] == 0)]
    if runs.empty:
        raise SystemExit(f"gpu_check.py: error: {set_dir}/runs.parquet has no greedy fixed-K runs of {pair}")
    rounds = pd.read_parquet(set_dir / "rounds.parquet", columns=["run_id", "k", "accepted"])
    rounds = rounds.merge(runs[["run_id", "prompt_id"]], on="run_id")
    return rounds, sorted(int(k) for k in runs["k"].unique())


def acceptance_counts(rounds, k_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Per prompt, (reached, accepted) counts at positions i = 1..k_max over its rounds that
    drafted: reached_i = #(k >= i, accepted >= i - 1), accepted_i = #(k >= i, accepted >= i);
    pooled, alpha_i = sum accepted_i / sum reached_i (= costmodel.acceptance_by_position)."""
    r = rounds[rounds["k"] > 0]
    i = np.arange(1, k_max + 1)
    k, acc = r["k"].to_numpy()[:, None], r["accepted"].to_numpy()[:, None]
    reached = ((k >= i) & (acc >= i - 1)).astype(int)
    accepted = ((k >= i) & (acc >= i)).astype(int)
    prompts = r["prompt_id"].to_numpy()
    keys = np.unique(prompts)
    return (np.array([reached[prompts == p].sum(0) for p in keys]),
            np.array([accepted[prompts == p].sum(0) for p in keys]))


def alpha_of(reached: np.ndarray, accepted: np.ndarray) -> np.ndarray:
    """alpha_i = sum accepted_i / sum reached_i over the rows (NaN where none reached i)."""
    num, den = accepted.sum(0).astype(float), reached.sum(0).astype(float)
    return np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)


# --- models on the device --------------------------------------------------------------

def load_config(name: str, tiny: bool) -> dict:
    """benchmarks/gpu_configs/<name>.json without its provenance keys (``_*``); ``tiny``:
    the TINY sizes instead (a CPU smoke run), the draft half the target's width."""
    cfg = {k: v for k, v in json.loads((CONFIGS / f"{name}.json").read_text()).items()
           if not k.startswith("_")}
    if tiny:
        cfg = {k: v for k, v in cfg.items() if k not in ("bos_token_id", "eos_token_id")} | TINY
        if "0.5b" in name:
            cfg |= {"hidden_size": TINY["hidden_size"] // 2, "intermediate_size": TINY["intermediate_size"] // 2}
    return cfg


def build_model(cfg: dict, device: str, dtype: str, seed: int):
    """A Qwen2ForCausalLM of config ``cfg`` with random weights (transformers' own
    initialisation, seeded), created directly on ``device`` in ``dtype``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    config = Qwen2Config(**{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")})
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2ForCausalLM._from_config(config, dtype=getattr(torch, dtype))
    return model.to(device=device, dtype=getattr(torch, dtype)).eval()


class MeteredHF(HFBackend):
    """specproof's hf backend over a model built in memory (``HFBackend`` itself loads one
    from files); ``d2h_bytes`` counts the bytes its forward calls return to the host."""

    def __init__(self, model, device: str, dtype: str, name: str):
        Backend.__init__(self)
        import torch
        from transformers import DynamicCache
        self._check_device(torch, device)
        self.path, self.device, self.dtype, self.source = Path(name), device, dtype, None
        self.tokenizer, self.model = None, model
        self._torch, self._cache_cls = torch, DynamicCache
        self.cache = DynamicCache(config=model.config)
        self._vocab = int(model.get_output_embeddings().weight.shape[0])
        self._positions = int(model.config.max_position_embeddings)
        self._eos = frozenset()  # random weights: run to max_new_tokens
        self.d2h_bytes = 0

    def _forward(self, ids: list[int], last_only: bool) -> np.ndarray:
        out = super()._forward(ids, last_only)
        self.d2h_bytes += out.nbytes
        return out

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError("random weights have no tokenizer")

    def decode(self, ids: list[int]) -> str:
        return " ".join(map(str, ids))

    def info(self) -> BackendInfo:
        return BackendInfo(backend="hf", model=self.path.name, vocab_size=self._vocab, device=self.device,
                           dtype=self.dtype, settings={"weights": "random"})


class MeteredPolicy(FixedPolicy):
    """Fixed K that also records, per round, the bytes ``backends`` returned to the host
    since the previous round ended (round 0 includes the draft's prefill)."""

    def __init__(self, k: int, backends: list[MeteredHF]):
        super().__init__(k)
        self.backends, self.bytes = backends, []
        self._last = 0

    def observe(self, obs) -> None:
        total = sum(b.d2h_bytes for b in self.backends)
        self.bytes.append(total - self._last)
        self._last = total

    def observe_prefill(self, positions: int, ns: int) -> None:
        self._last = sum(b.d2h_bytes for b in self.backends)


# --- measurements --------------------------------------------------------------------

def measure_forwards(target, draft, context: list[int], samples: int, warmup: int, until: float,
                     out: dict) -> None:
    """v(B) for B = 1..MAX_B and the draft step into ``out`` ("verify_ms" {B: [ms]},
    "draft_ms" [ms]): ``samples`` rounds after ``warmup``, each round timing every B then
    the draft step; stops early (fewer samples) at ``until`` (time.monotonic)."""
    for b in (target, draft):
        b.reset()
        b.forward(context, last_only=True)
    block = (context * (MAX_B // len(context) + 1))[:MAX_B]
    for b in range(1, MAX_B + 1):
        out["verify_ms"].setdefault(b, [])
    for r in range(warmup + samples):
        if r >= warmup and time.monotonic() > until:
            break
        times = {b: timed_forward_ms(target, block[:b], False) for b in range(1, MAX_B + 1)}
        step = timed_forward_ms(draft, block[:1], True)
        if r >= warmup:
            for b, t in times.items():
                out["verify_ms"][b].append(t)
            out["draft_ms"].append(step)


def measure_loop(target, self_draft, prompt: list[int], k: int, rounds: int) -> dict:
    """The loop at full acceptance: greedy decode_speculative at fixed K with the target
    drafting for itself (``self_draft``: a second backend over the target's model), for
    ``rounds`` rounds of K drafts. Per round after the first with k = K: residual ms and
    bytes to the host; also accepted / drafted over those rounds."""
    policy = MeteredPolicy(k, [target, self_draft])
    settings = DecodeSettings(max_new_tokens=(rounds + 2) * (k + 1), temperature=0.0, stop_at_eos=False)
    run = decode_speculative(target, ModelDrafter(self_draft), prompt, settings, policy=policy)
    keep = [i for i, r in enumerate(run.rounds) if i > 0 and r.k == k]
    return {"residual_ms": [run.rounds[i].residual_ns / 1e6 for i in keep],
            "d2h_bytes": [policy.bytes[i] for i in keep],
            "accepted": sum(run.rounds[i].accepted for i in keep), "drafted": k * len(keep)}


def measure_target_only(target, prompt: list[int], steps: int) -> dict:
    """Target-only decoding for ``steps`` + 1 steps: per step after the first, the ms
    outside the target call (round_ns - verify_ns) and the bytes returned to the host."""
    before = target.d2h_bytes
    run = decode_target_only(target, prompt, DecodeSettings(max_new_tokens=steps + 1, stop_at_eos=False))
    rows = run.rounds[1:]
    return {"residual_ms": [(r.round_ns - r.verify_ns) / 1e6 for r in rows],
            "d2h_bytes_per_step": (target.d2h_bytes - before - target.vocab_size * 4) // len(run.rounds)}


# --- projection ----------------------------------------------------------------------

def speedups(alpha: np.ndarray, k: int, verify: dict[int, float], draft: float, x_k: float,
             x_t: float) -> tuple[float, float]:
    """(S, S_0) at K = k from the cost terms (ms): S = (v(1) + x_T) E[C|K] / E[T|K] with
    E[T|K] = K c + v(K+1) + x(K) (costmodel.expected_round_ms, a model drafter proposing K),
    S_0 = analysis.costs.model_speedup (x = 0, t_T = v(1))."""
    ec = expected_committed(alpha, k)
    loop = (verify[1] + x_t) * ec / expected_round_ms(k, np.array([k]), draft, verify, x_k)
    return float(loop), model_speedup(alpha, k, draft, verify, verify[1])


def point_terms(m: dict) -> dict:
    """Median cost terms (ms) of the measurements ``m``: verify {B: v}, draft, x {K: x}, x_T."""
    return {"verify": {b: float(np.median(s)) for b, s in m["verify_ms"].items() if s},
            "draft": float(np.median(m["draft_ms"])),
            "x": {k: float(np.median(r["residual_ms"])) for k, r in m["loop"].items() if r["residual_ms"]},
            "x_t": float(np.median(m["target_only"]["residual_ms"]))}


def boot_terms(m: dict, rng: np.random.Generator, n: int) -> dict:
    """``n`` bootstrap replicates of point_terms (each a median of a resample)."""
    return {"verify": {b: boot_medians(s, rng, n) for b, s in m["verify_ms"].items() if s},
            "draft": boot_medians(m["draft_ms"], rng, n),
            "x": {k: boot_medians(r["residual_ms"], rng, n) for k, r in m["loop"].items() if r["residual_ms"]},
            "x_t": boot_medians(m["target_only"]["residual_ms"], rng, n)}


def projection(m: dict, reached: np.ndarray, accepted: np.ndarray, resamples: int, seed: int) -> list[dict]:
    """Per K with v(K+1) and x(K) measured: E[C|K], S and S_0 at the point estimates, and
    their 95% percentile intervals over ``resamples`` joint bootstrap replicates (every
    timing sample set resampled, and the set's prompts: alpha from their summed counts)."""
    rng = np.random.default_rng(seed)
    alpha, terms, boot = alpha_of(reached, accepted), point_terms(m), boot_terms(m, rng, resamples)
    pick = rng.integers(0, len(reached), size=(resamples, len(reached)))
    alphas = [alpha_of(reached[p], accepted[p]) for p in pick]
    q = [(1 - LEVEL) / 2, (1 + LEVEL) / 2]
    rows = []
    for k in range(1, K_MAX + 1):
        if k + 1 not in terms["verify"] or k not in terms["x"]:
            continue
        s, s0 = speedups(alpha, k, terms["verify"], terms["draft"], terms["x"][k], terms["x_t"])
        reps = np.array([speedups(alphas[r], k, {b: v[r] for b, v in boot["verify"].items()},
                                  boot["draft"][r], boot["x"][k][r], boot["x_t"][r]) for r in range(resamples)])
        (lo, lo0), (hi, hi0) = np.quantile(reps, q, axis=0)
        rows.append({"k": k, "expected_committed": expected_committed(alpha, k), "S": s, "S_low": float(lo),
                     "S_high": float(hi), "S0": s0, "S0_low": float(lo0), "S0_high": float(hi0),
                     "x_ms": terms["x"][k], "d2h_bytes": float(np.median(m["loop"][k]["d2h_bytes"]))})
    return rows


# --- tables --------------------------------------------------------------------------

def _iv(lo: float, hi: float) -> str:
    return f"[{lo:.3g}, {hi:.3g}]"


def timing_rows(m: dict, vocab: int) -> tuple[list[list], dict]:
    """Rows and values of the timings table: per quantity its samples, median and 95%
    interval (ms, ``median_interval``), bytes to the host per call or round, acceptance."""
    rows, values = [], {}

    def add(label, key, at, samples, host, accept=""):
        med, lo, hi = median_interval(samples)
        rows.append([label, at, len(samples), med, _iv(lo, hi), host, accept])
        values.update({f"{key}_ms": (med, "ms"), f"{key}_low_ms": (lo, "ms"), f"{key}_high_ms": (hi, "ms"),
                       f"{key}_samples": (len(samples), "samples")})

    for b, s in m["verify_ms"].items():
        if s:
            add("target forward v(B)", f"v{b}", f"B={b}", s, 4 * vocab * b)
    if m["draft_ms"]:
        add("draft step c", "draft", "B=1", m["draft_ms"], 4 * vocab)
    if m["target_only"]["residual_ms"]:
        add("target-only step overhead x_T", "x_t", "K=0", m["target_only"]["residual_ms"],
            m["target_only"]["d2h_bytes_per_step"])
    for k, r in m["loop"].items():
        if r["residual_ms"]:
            share = r["accepted"] / r["drafted"]
            host = int(np.median(r["d2h_bytes"]))
            add("loop overhead x(K), full acceptance", f"x{k}", f"K={k}", r["residual_ms"], host, f"{share:.3f}")
            values |= {f"x{k}_acceptance": (share, "share"), f"x{k}_d2h_bytes": (host, "bytes")}
    return rows, values


def projection_rows(rows: list[dict]) -> tuple[list[list], dict]:
    """Rows and values of the projection table (see ``projection``); best K by S."""
    out, values = [], {}
    for r in rows:
        out.append([r["k"], r["expected_committed"], r["S"], _iv(r["S_low"], r["S_high"]), r["S0"],
                    _iv(r["S0_low"], r["S0_high"]), r["x_ms"], r["d2h_bytes"] / 1024])
        k = f"k{r['k']}"
        values |= {f"{k}.expected_committed": (r["expected_committed"], "tokens"),
                   f"{k}.projected_speedup": (r["S"], "x"), f"{k}.projected_low": (r["S_low"], "x"),
                   f"{k}.projected_high": (r["S_high"], "x"), f"{k}.projected_ideal": (r["S0"], "x"),
                   f"{k}.projected_ideal_low": (r["S0_low"], "x"), f"{k}.projected_ideal_high": (r["S0_high"], "x"),
                   f"{k}.d2h_bytes_per_round": (r["d2h_bytes"], "bytes")}
    if rows:
        best = max(rows, key=lambda r: r["S"])
        values |= {"best_k": (best["k"], "K"), "best_projected_speedup": (best["S"], "x"),
                   "best_projected_low": (best["S_low"], "x"), "best_projected_high": (best["S_high"], "x")}
    return out, values


def device_info(device: str) -> dict:
    """The accelerator as torch sees it (name, capability, memory, CUDA and cuDNN
    versions) and nvidia-smi's driver; for a CPU run, torch's version and threads."""
    import torch
    from specproof.evidence.provenance import gpu_info
    out = {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda}
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(torch.device(device))
        out |= {"name": p.name, "capability": f"{p.major}.{p.minor}", "memory_gib": round(p.total_memory / 2**30, 1),
                "multiprocessors": p.multi_processor_count, "cudnn": torch.backends.cudnn.version(),
                "driver": next((g["driver"] for g in gpu_info()), None)}
    else:
        out |= {"name": "cpu", "threads": torch.get_num_threads()}
    return out


def provenance(device: str, commit: str | None) -> dict:
    """specproof.evidence.provenance.capture of this checkout, with ``device`` (device_info);
    ``commit`` (``--commit``) stands in for git where the copy has none (a lent device)."""
    from specproof.evidence.provenance import capture
    prov = capture(ROOT)
    prov["device"] = device_info(device)
    if commit:
        here = prov["git"]
        prov["git"] = {"commit": commit, "given": "--commit", "checkout_commit": here["commit"],
                       "dirty": here["dirty"] if here["commit"] == commit else None}
    return prov


def notes(args, m: dict, alpha: np.ndarray, ks: list[int], prompts: int, dev: dict) -> list[str]:
    """What the tables measure, what they borrow and what they do not show."""
    names = ", ".join(f"benchmarks/gpu_configs/{MODELS[r][0]}.json" for r in ("target", "draft"))
    out = [("TINY smoke configuration (2 layers, small widths): not the pair's architectures. " if args.tiny else "")
           + f"Random {args.dtype} weights on {dev['name']} ({args.device}); architectures from {names} "
           "(the embedded GGUFs' headers). Timing of dense kernels does not depend on weight values.",
           f"Acceptance NOT measured here: alpha_1..{K_MAX} = [{', '.join(f'{a:.3f}' for a in alpha)}] borrowed from "
           f"the CPU record set {args.set.relative_to(ROOT) if args.set.is_relative_to(ROOT) else args.set} "
           f"(pair {PAIR}, greedy fixed K in {ks}, {prompts} prompts). The speedups are PROJECTED, not realized.",
           "S(K) = (v(1) + x_T) E[C|K] / (K c + v(K+1) + x(K)); S_0(K) = v(1) E[C|K] / (K c + v(K+1)) "
           "(analysis.costs.model_speedup). v, c, x, x_T: medians (ms) of the timings table.",
           "x(K) measured at full acceptance (the target drafting for itself, greedy; acceptance reached in the "
           "timings table); rejections, a real draft and sampling (T > 0) are not timed.",
           f"Intervals: medians with distribution-free order-statistic {LEVEL:.0%} intervals; S and S_0 with "
           f"{LEVEL:.0%} percentile intervals over {args.resamples} bootstrap resamples (seed {args.seed}) of every "
           "timing sample set and of the set's prompts.",
           f"Context {args.context} random ids before each timed forward; {args.samples} samples requested per "
           f"quantity after {args.warmup} warm-up rounds. Host bytes: the float32 logits the hf backend copies "
           "to the host (4 V bytes per row).",
           f"Wall time {m.get('wall_s', float('nan')):.0f} s of a {args.budget_s:.0f} s budget."]
    if m["partial"]:
        out.append("PARTIAL: " + "; ".join(m["partial"]))
    return out


def save_samples(out: Path, table: str, m: dict) -> None:
    """<out>/<table>/samples.json: every raw sample so far (atomically replaced)."""
    d = out / table
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / "samples.json.tmp"
    tmp.write_text(json.dumps(m, indent=1, default=float))
    tmp.replace(d / "samples.json")


def write_outputs(args, m: dict, counts, ks: list[int], vocab: int) -> list[Path]:
    """Both tables (specproof.publish.benchtables, provenance and the exact command) and
    the samples; the projection only where its terms were measured."""
    from specproof.publish import benchtables
    save_samples(args.out, args.table, m)
    reached, accepted = counts
    alpha = alpha_of(reached, accepted)
    ready = m["draft_ms"] and m["target_only"]["residual_ms"] and m["loop"]
    proj = projection(m, reached, accepted, args.resamples, args.seed) if ready else []
    prov = provenance(args.device, args.commit)
    command = " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])
    note = notes(args, m, alpha, ks, len(reached), prov["device"])
    gpu = prov["device"]["name"]
    header = ["K", "E[C|K] (CPU set)", "S projected", f"{LEVEL:.0%} interval", "S_0 projected (x = 0)",
              f"{LEVEL:.0%} interval", "x(K) ms", "to host KiB/round"]
    rows, values = projection_rows(proj)
    values |= {"device": (gpu, "text"), "weights": ("random " + args.dtype, "text"),
               "acceptance": ("borrowed from the CPU set", "text"), "partial": (bool(m["partial"]), "bool")}
    paths = [benchtables.write_table(args.out, args.table, f"GPU check: projected speedup of the Qwen pair on {gpu}",
                                     header, rows, note, values, command, prov)]
    rows, values = timing_rows(m, vocab)
    header = ["quantity", "at", "samples", "median ms", f"{LEVEL:.0%} interval (ms)", "to host (bytes)",
              "acceptance reached"]
    paths.append(benchtables.write_table(args.out, f"{args.table}_timings", f"GPU check: cost terms on {gpu}",
                                         header, rows, note, values | {"device": (gpu, "text")}, command, prov))
    return paths


# --- the run -------------------------------------------------------------------------

def write_configs() -> list[Path]:
    """benchmarks/gpu_configs/<name>.json for both models, from the embedded GGUFs' headers
    (specproof.models.archconfig; the first chunk package of each is enough)."""
    from specproof.models.archconfig import embedded_config
    out = []
    for name, embedded in MODELS.values():
        cfg = embedded_config(embedded) | {"_command": "python benchmarks/gpu_check.py --write-configs"}
        path = CONFIGS / f"{name}.json"
        CONFIGS.mkdir(exist_ok=True)
        path.write_text(json.dumps(cfg, indent=1) + "\n")
        out.append(path)
    return out


def check_device(device: str) -> None:
    """One line and exit 2 where ``device`` is CUDA and torch sees none."""
    import torch
    if device.startswith("cuda") and not torch.cuda.is_available():
        built = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a build without CUDA"
        print(f"gpu_check.py: error: --device {device}: torch {torch.__version__} ({built}) sees no CUDA device",
              file=sys.stderr)
        raise SystemExit(2)


def run(args, m: dict, vocab_out: list) -> None:
    """Build both models, then time the forwards, target-only steps and the loop per K
    (saving the samples after each phase); a phase past the budget is cut and noted."""
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    start, until = time.monotonic(), time.monotonic() + args.budget_s
    _log(f"building both models with random {args.dtype} weights on {args.device}")
    models = {r: build_model(load_config(MODELS[r][0], args.tiny), args.device, args.dtype, args.seed + i)
              for i, r in enumerate(("target", "draft"))}
    target, draft = (MeteredHF(models[r], args.device, args.dtype, MODELS[r][0]) for r in ("target", "draft"))
    vocab_out.append(target.vocab_size)
    m["build_s"] = time.monotonic() - start
    ids = np.random.default_rng(args.seed).integers(0, target.vocab_size, args.context).tolist()
    _log(f"models built in {m['build_s']:.1f} s; timing v(B), B = 1..{MAX_B}, and the draft step")
    measure_forwards(target, draft, ids, args.samples, args.warmup, start + 0.45 * args.budget_s, m)
    save_samples(args.out, args.table, m)
    _log("timing target-only steps")
    m["target_only"] = measure_target_only(target, ids, args.samples)
    save_samples(args.out, args.table, m)
    self_draft = MeteredHF(models["target"], args.device, args.dtype, MODELS["target"][0] + " (self-draft)")
    last = 0.0  # seconds the previous K took; the next one takes about (K + 1) / K of it
    for k in range(1, K_MAX + 1):
        if time.monotonic() + last * (k + 1) / k > until:
            m["partial"].append(f"loop overhead measured for K = 1..{k - 1} only (budget)")
            break
        t0 = time.monotonic()
        _log(f"timing the loop at full acceptance, K = {k}")
        m["loop"][k] = measure_loop(target, self_draft, ids, k, args.samples)
        last = time.monotonic() - t0
        save_samples(args.out, args.table, m)
    if len(m["draft_ms"]) < args.samples:
        m["partial"].append(f"{len(m['draft_ms'])} of {args.samples} forward samples (budget)")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="torch device (default cuda; cpu with --tiny for a smoke run)")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    ap.add_argument("--tiny", action="store_true", help="2-layer, narrow configs (the CPU test), not the pair")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results", help="directory of the tables")
    ap.add_argument("--table", default="gpu_check", help="table name (default gpu_check)")
    ap.add_argument("--samples", type=int, default=50, help="samples per quantity, 30..400 (default 50)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed rounds before the forward samples")
    ap.add_argument("--context", type=int, default=128, help="cached tokens before each timed forward")
    ap.add_argument("--budget-s", type=float, default=330.0, help="stop measuring after this many seconds")
    ap.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--set", type=Path, default=ROOT / "manifests/paper-qwen-v2/epyc-avx512",
                    help="the CPU record set acceptance is borrowed from")
    ap.add_argument("--commit", default=None, help="the git commit of the tree, where the copy has no .git")
    ap.add_argument("--write-configs", action="store_true",
                    help="write benchmarks/gpu_configs/*.json from the embedded GGUF headers, then exit")
    args = ap.parse_args(argv)
    if not 30 <= args.samples <= 400:  # 400: the loop's (samples + 2) (K + 1) tokens stay within max_new_tokens
        ap.error("--samples must be between 30 and 400")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.write_configs:
        for path in write_configs():
            print(path)
        return 0
    check_device(args.device)
    rounds, ks = set_rounds(args.set, PAIR)
    counts = acceptance_counts(rounds, K_MAX)
    m = {"verify_ms": {}, "draft_ms": [], "target_only": {"residual_ms": []}, "loop": {}, "partial": []}
    vocab: list[int] = []
    signal.signal(signal.SIGTERM, _stop)
    start = time.monotonic()
    try:
        run(args, m, vocab)
    except Stopped as exc:
        m["partial"].append(f"stopped by {exc}")
    m["wall_s"] = time.monotonic() - start
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the tables get written (timeout -k kills a hang)
    _log(f"measured for {m['wall_s']:.0f} s; writing the tables")
    for path in write_outputs(args, m, counts, ks, vocab[0] if vocab else 0):
        print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
