"""A small text chart of drill progress over time, with each kill marked under the bars."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

BLOCKS = " ▁▂▃▄▅▆▇█"


class ProgressChart(Widget):
    """Records done (bars) against time (columns); ``✕`` under a column marks a kill."""

    DEFAULT_CSS = """
    ProgressChart { height: 7; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.points: list[tuple[float, int]] = []
        self.kills: list[float] = []
        self.total = 0

    def reset(self, total: int = 0) -> None:
        self.points, self.kills, self.total = [], [], total
        self.refresh()

    def add_progress(self, t: float, done: int, total: int | None = None) -> None:
        if total:
            self.total = total
        self.points.append((t, done))
        self.refresh()

    def add_kill(self, t: float) -> None:
        self.kills.append(t)
        self.refresh()

    def columns(self, width: int) -> list[int]:
        """The records done at the end of each of ``width`` equal time slices."""
        if not self.points or width <= 0:
            return [0] * max(width, 0)
        end = max(self.points[-1][0], max(self.kills, default=0.0)) or 1.0
        values, i, last = [], 0, 0
        for col in range(width):
            limit = end * (col + 1) / width
            while i < len(self.points) and self.points[i][0] <= limit:
                last = self.points[i][1]
                i += 1
            values.append(last)
        return values

    def kill_columns(self, width: int) -> set[int]:
        if not self.points or width <= 0:
            return set()
        end = max(self.points[-1][0], max(self.kills, default=0.0)) or 1.0
        return {min(width - 1, int(t / end * width)) for t in self.kills}

    def render(self) -> Text:
        width, height = self.size.width, max(self.size.height - 1, 1)
        total = self.total or max((d for _, d in self.points), default=0) or 1
        values = self.columns(width)
        text = Text()
        for row in range(height, 0, -1):  # top row first
            for value in values:
                eighths = round(value / total * height * 8) - (row - 1) * 8
                text.append(BLOCKS[max(0, min(8, eighths))], style="green")
            text.append("\n")
        marks = self.kill_columns(width)
        for col in range(width):
            text.append("✕" if col in marks else "─", style="bold red" if col in marks else "dim")
        return text
