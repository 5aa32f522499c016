"""specproof: does speculative decoding pay off here, is it lossless, and where does every ms go.

Notation follows Leviathan et al. (2023) and Chen et al. (2023): p = target distribution,
q = draft distribution, K = speculation length. Cost terms C / D_real / R_target / X.
"""

__version__ = "0.1.0"
