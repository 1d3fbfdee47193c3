"""The TUI's widgets: the pieces the screens are built from (tables, charts, the step bar, the
recovery point), each rendering what the core computed, nothing decided here."""
