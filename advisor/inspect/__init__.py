"""``advisor inspect``: read a generated project's state (SQLite, PostgreSQL, checkpoint files),
read only, and say where its job would resume and why — one reader per strategy family."""
