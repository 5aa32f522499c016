"""evidence: the stages that run models and write the raw records of a study.

Holds the stage registry (``stages``), the A/B grid runner (``grid``), the target-only
reference and its seal (``reference``), forward-pass micro-benchmarks (``micro``),
batch-invariance probe and qualification (``qualification``), PIT scoring (``pit``),
provenance capture (``provenance``), the K advisor (``advise``) and the certificate's
model-side evidence (``calibration``: levels 1-2, the mock PIT, planted violations).

May import: ``decode``, ``models``, ``study``, ``errors``, ``records``.
"""
