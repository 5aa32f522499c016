import numpy as np
import pytest

from specproof.models.mock import MockBackend


@pytest.fixture
def mock_pair():
    """A mock target and a noisy mock draft sharing its seed (acceptance well below 1)."""
    target = MockBackend(vocab_size=50, seed=3, scale=4.0)
    draft = MockBackend(vocab_size=50, seed=3, scale=4.0, noise=1.5)
    return target, draft


def random_dist(rng: np.random.Generator, v: int, support: int | None = None) -> np.ndarray:
    p = rng.gamma(0.5, size=v)
    if support is not None:
        p[rng.permutation(v)[support:]] = 0.0
    return p / p.sum()
