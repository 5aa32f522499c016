"""analysis: turns a study's raw records into derived tables. Never loads a model.

Holds the study analysis (``analyze``), the stages' summaries recomputed from their raw
records (``summaries``), target/draft agreement (``agreement``), the
complete-cost identity and its counterfactuals (``costs``), acceptance and speedup
statistics (``statistics``) and the certificate's statistics (``certificate``).

May import: ``decode``, ``models``, ``study``, ``evidence``, ``errors``, ``records``
(pure helpers only: nothing here constructs a backend).
"""
