"""Text input that follows the app's cursor-blink setting (off in snapshot tests)."""

from __future__ import annotations

from textual.widgets import Input


class TextInput(Input):
    def on_mount(self) -> None:
        self.cursor_blink = bool(getattr(self.app, "blink", True))
