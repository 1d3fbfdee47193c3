"""Continuity Advisor: pick a recovery design for a job that gets killed, then scaffold it.

Layers, bottom up: ``catalog`` (YAML data) → ``engine`` (pure decisions) →
``scaffold`` (Copier) / ``review`` (decision records) → ``cli`` / ``tui``.
The core never imports the UI.
"""

__version__ = "0.1.0"
