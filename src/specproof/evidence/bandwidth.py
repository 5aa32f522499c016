"""The memory-bandwidth limit of decoding (issue 24, section 2).

A target-only step of a llama.cpp model reads every weight it multiplies once, so no
implementation decodes faster than

    bound (tokens/s) = B / W,

B the machine's memory bandwidth (bytes/s), W the weight bytes read per token: every
tensor of the GGUF file except the token-embedding table, of which one row is read (when
the file has a separate output matrix; with tied embeddings the table is the output
matrix and is read whole). KV-cache reads are left out: at a few hundred positions they
are under 1% of W for the models here.

B is measured STREAM-style (McCalpin 1995) with its Add kernel, a = b + c over float64
arrays far larger than the caches: one numpy pass that reads b and c and writes a, 24
bytes per element as STREAM counts them (not the write-allocate read of a), best of
``repeats``; with ``threads`` > 1 each
thread adds its own slice (numpy releases the GIL inside the ufunc), so the threads
share the memory bus as llama.cpp's do.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ADD_BYTES_PER_ELEMENT = 24  # read b, read c, write a (float64), as STREAM counts Add


def add_bandwidth(threads: int = 1, elements: int = 1 << 25, repeats: int = 5) -> float:
    """Best-of-``repeats`` STREAM Add bandwidth in bytes/s over ``elements`` float64 per
    array (3 x 256 MiB by default), split evenly over ``threads``."""
    a, b, c = (np.full(elements, x) for x in (0.0, 1.0, 2.0))
    cuts = np.linspace(0, elements, threads + 1).astype(int)
    parts = [(a[i:j], b[i:j], c[i:j]) for i, j in zip(cuts, cuts[1:])]
    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats):
            t0 = time.perf_counter()
            list(pool.map(lambda p: np.add(p[1], p[2], out=p[0]), parts))
            best = min(best, time.perf_counter() - t0)
    return ADD_BYTES_PER_ELEMENT * elements / best


def weight_bytes_per_token(path: Path) -> int:
    """W: the bytes of the GGUF's tensors one decode step reads (see the module docstring)."""
    from gguf import GGUFReader
    tensors = {t.name: t for t in GGUFReader(str(path)).tensors}
    total = sum(int(t.n_bytes) for t in tensors.values())
    embd = tensors.get("token_embd.weight")
    if embd is None or "output.weight" not in tensors:
        return total
    rows = int(embd.shape[-1]) if len(embd.shape) > 1 else 1
    return total - int(embd.n_bytes) + int(embd.n_bytes) // max(rows, 1)


def bound_tokens_per_s(bandwidth: float, weight_bytes: int) -> float:
    """B / W: target-only tokens/s if every step streamed its weights at ``bandwidth``."""
    return bandwidth / weight_bytes
