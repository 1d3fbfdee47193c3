"""Where the user is in the walkthrough: ●●●○○○○○ question 3 of 8."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class StepBar(Static):
    DEFAULT_CSS = """
    StepBar { height: 1; color: $text-muted; }
    """

    def show(self, index: int, total: int, group: str, answered: set[int]) -> None:
        text = Text()
        for i in range(total):
            if i == index:
                text.append("◉", style="bold cyan")
            elif i in answered:
                text.append("●", style="green")
            else:
                text.append("○")
            text.append(" " if i != 2 else " │ ")
        label = "recovery point" if group == "recovery_point" else "your job"
        text.append(f"  question {index + 1} of {total} · {label}")
        self.update(text)
