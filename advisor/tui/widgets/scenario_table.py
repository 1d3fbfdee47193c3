"""The scenario table (typical jobs and their strategy), with the row that matches the answers marked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.widgets import Static


class ScenarioTable(Static):
    DEFAULT_CSS = """
    ScenarioTable { height: auto; }
    """

    def show(self, scenarios: Sequence[Any], matched: str | None, name_of: Callable[[str], str]) -> None:
        table = Table(expand=True, show_edge=False, pad_edge=False, header_style="bold")
        table.add_column(" ", width=1, no_wrap=True)
        table.add_column("scenario", ratio=4)
        table.add_column("strategy", ratio=3)
        table.add_column("why", ratio=4)
        for row in scenarios:
            hit = row.id == matched
            table.add_row(
                "▶" if hit else "",
                row.scenario,
                name_of(row.strategy),
                row.why,
                style="bold reverse" if hit else None,
            )
        if matched is None:
            table.caption = "No row matches these answers exactly (mixed or open answers)."
        self.update(table)


def scenario_caption(matched: Any) -> Text:
    if matched is None:
        return Text("No scenario row matches exactly.", style="italic")
    return Text.assemble(("Your job looks like: ", "bold"), matched.scenario)
