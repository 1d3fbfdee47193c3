"""The advisor's terminal UI (Textual): the app (app.py, base.py), its session, screens/ and widgets/.

Start it with ``advisor`` (no arguments) or ``make_app().run()``. The TUI only renders what the
core computes (``advisor.model``, ``advisor.review``, ``advisor.scaffold``, ``advisor.probe``,
``advisor.inspect``); it holds no decision logic of its own.
"""
