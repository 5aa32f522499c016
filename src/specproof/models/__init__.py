"""models: the language models behind the ``Backend`` interface.

Holds the model files (``files``: the embedded GGUFs, derived quantizations, hub ids,
file records), the backends (``hf`` on torch/transformers, ``llama`` on llama.cpp,
``mock`` with an exactly known p) and backend construction (``loader``: a model spec
to a backend or drafter, the per-study ``ModelPool``).

May import: ``decode`` (the Backend base class, drafters), ``errors``, ``records``.
The heavy libraries (torch, transformers, llama_cpp) are imported inside the backend
that needs them, never at package import.
"""
from .files import embedded_path  # noqa: F401  (llama_build calls specproof.models.embedded_path)
