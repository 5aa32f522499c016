"""The audit's checks of frozen record sets, one registry (``registry``, run in order by
``checks``), one module per family: ``provenance`` (records, provenance, seals, the
committed manifest and config), ``timing`` (recorded times), ``identities`` (what every
run holds by construction), ``endpoints`` (H, Q and P), ``certificate`` (the PIT rows),
``recomputed`` (derived files and summaries) and ``benchmarks`` (tables and the paper's
rows); ``common`` holds what they share. ``specproof audit --list`` prints the registry.
"""
