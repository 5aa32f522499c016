"""publish: what leaves the pipeline for a reader.

Holds per-study numbers (``numbers``), figures (``figures``), frozen manifests with
freeze/audit/drift (``manifests``), the audit's registry of checks (``audit``), benchmark
tables (``benchtables``) and the paper build: numbers.json and the Typst compile
(``paper``).

May import every room below it: ``decode``, ``models``, ``study``, ``evidence``,
``analysis``, plus ``errors`` and ``records``.
"""
