"""study: what a study asks for.

Holds study config loading and validation against the JSON schemas (``config``),
the prompt sets (``prompts``: chat, HumanEval, user JSONL) and the workloads built from
them (``workloads``).

May import: ``decode``, ``models``, ``errors``, ``records``. Loads no model.
"""
