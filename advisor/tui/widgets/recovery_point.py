"""The recovery point, live: what `advisor inspect` shows, re-read every half second.

Mounted by the drill screen below the chart and pointed at the drill's data directory
(from its ``start`` event), it lets the user watch the offset, the prepared calls and
the subscriber position survive each kill. Hidden until it has a directory. The read
is `advisor inspect`'s own (read only) and runs in a thread, off the UI.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.widgets import Static
from textual.worker import get_current_worker

from advisor.errors import AdvisorError

SHOWN_POINTS = 6


def recovery_text(report: Mapping[str, Any]) -> Text:
    """The report, compact: where it resumes, then the rows (the ones that matter first, highlighted)."""
    from advisor.inspect.text import headline

    text = Text()
    text.append(headline(report).split(" · ")[0], style="bold")
    text.append(f" · {Path(report['data_dir']).name}\n", style="dim")
    text.append(f"resume: {report['resume']}\n", style="green")
    # The rows that matter first: in a short terminal they are what stays visible.
    points = sorted(report["recovery_points"], key=lambda p: not p["highlight"])
    for p in points[:SHOWN_POINTS]:
        text.append(("▶ " if p["highlight"] else "  ") + p["text"] + "\n",
                    style="bold reverse" if p["highlight"] else "")
    more = len(points) - SHOWN_POINTS + int(report.get("more_recovery_points") or 0)
    if more > 0:
        text.append(f"  … and {more} more\n", style="dim")
    doubt = report.get("in_doubt") or []
    if doubt:
        applied = sum(1 for d in doubt if d.get("external") == "applied")
        text.append(f"in doubt: {len(doubt)} maybe made, not done ({applied} got through): settled by key\n",
                    style="yellow")
    text.append(f"external: {report['external']['text']}")
    return text


class RecoveryPointView(Static):
    """``follow(data_dir)`` starts it; ``interval=0`` reads only when asked (tests, snapshots)."""

    DEFAULT_CSS = """
    RecoveryPointView { height: 1fr; min-height: 5; max-height: 14; border: round $secondary; padding: 0 1;
                        border-title-align: left; overflow: hidden; }
    """

    def __init__(self, data_dir: Path | None = None, *, interval: float = 0.5, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.data_dir = data_dir
        self.interval = interval
        self.border_title = "recovery point (advisor inspect, live)"
        self.shown = Text()
        """What the widget shows now (tests read it)."""
        self.display = data_dir is not None

    def on_mount(self) -> None:
        if self.interval:
            self.set_interval(self.interval, self.reload)
        self.reload()

    def follow(self, data_dir: Path | None) -> None:
        """Follow another data directory (a new drill's), or none (hidden)."""
        self.data_dir = data_dir
        self.display = data_dir is not None
        self.reload()

    def reload(self) -> None:
        if self.data_dir is not None:
            self.read(self.data_dir)

    @work(thread=True, exclusive=True, group="recovery-point")
    def read(self, data_dir: Path) -> None:
        from advisor.inspect.report import inspect_dir

        try:
            shown: Text = recovery_text(inspect_dir(data_dir))
        except AdvisorError as exc:  # not there yet (the drill is submitting), or unreadable
            shown = Text(str(exc), style="dim")
        if self.app.is_running and not get_current_worker().is_cancelled:  # a newer read replaced this one
            self.app.call_from_thread(self.show, shown)

    def show(self, shown: Text) -> None:
        self.shown = shown
        self.update(shown)
