"""Generators of the reference pages that restate the catalog: ``docs/catalog.md`` and
``docs/decision-model.md`` (``make docs`` writes them, tests/test_docs.py checks they are current)."""
