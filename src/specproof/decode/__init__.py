"""decode: one speculative round and everything it is made of.

Holds the decoding loops (``decoding``), the float64 sampler (``sampling``), the drafters,
the K policies, the run trace, the ``Backend`` base class every model backend implements
(``backend``) and the cost model policies and ``advise`` use (``costmodel``: E[C|K],
expected round cost, acceptance by position).

May import: ``specproof.errors``, ``specproof.records``, numpy/pandas. Nothing from the
rooms above (models, study, evidence, analysis, publish, cli), and no torch,
transformers or llama_cpp: a backend brings those.
"""
