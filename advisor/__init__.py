"""Continuity Advisor: pick a recovery design for a job that gets killed, then scaffold it.

Layers, bottom up (tests/test_architecture.py checks them): the shared helpers (errors, paths,
safe_read, safe_write, redact) → ``model`` (the catalog, answers, the decision, the template's
questions) → ``review`` / ``scaffold`` / ``inspect`` / ``probe`` / ``docgen``, side by side →
``cli`` with ``commands``, and ``tui``. The model never imports a feature or the UI.
"""

__version__ = "0.1.0"
