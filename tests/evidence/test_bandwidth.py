"""The bandwidth bound's inputs: weight bytes per token read from a real GGUF's tensor
table, and a STREAM Add that measures a finite, positive bandwidth (its value is the
benchmark's business, not a test's)."""
import math

from gguf import GGUFReader

from specproof.evidence.bandwidth import bound_tokens_per_s, add_bandwidth, weight_bytes_per_token
from specproof.models.files import resolve


def test_weight_bytes_leave_out_the_embedding_lookup_only_when_the_output_matrix_is_separate():
    path = resolve("embedded:smollm2-q4_1")
    tensors = {t.name: t for t in GGUFReader(str(path)).tensors}
    total = sum(int(t.n_bytes) for t in tensors.values())
    w = weight_bytes_per_token(path)
    if "output.weight" in tensors:  # the embedding is a row lookup
        embd = tensors["token_embd.weight"]
        assert w == total - int(embd.n_bytes) + int(embd.n_bytes) // int(embd.shape[-1])
    else:  # tied: the embedding table is the output matrix, read whole
        assert w == total
    assert 0 < w <= path.stat().st_size


def test_add_bandwidth_is_a_positive_rate_and_the_bound_divides_it():
    bw = add_bandwidth(threads=2, elements=1 << 16, repeats=2)
    assert math.isfinite(bw) and bw > 0
    assert bound_tokens_per_s(bw, 1000) == bw / 1000
