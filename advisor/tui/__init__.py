"""The advisor's terminal UI (Textual).

Start it with ``advisor`` (no arguments) or ``make_app().run()``. The TUI only
renders what the core computes: the catalog, ``engine.recommend``, ``review``
and ``scaffold``. It holds no decision logic of its own.
"""
