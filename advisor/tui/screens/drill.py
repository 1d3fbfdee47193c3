"""Try it: run the generated project's crash drill in the background and show it live."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, ProgressBar, Static
from textual.worker import get_current_worker

from advisor.tui.widgets.drill_log import event_line, verdict
from advisor.tui.widgets.progress_chart import ProgressChart
from advisor.tui.widgets.recovery_point import RecoveryPointView

if TYPE_CHECKING:
    from advisor.tui.base import AdvisorAppBase


class DrillScreen(Screen[None]):
    """``autostart=False`` shows an empty drill (tests feed events to :meth:`apply`)."""

    class Event(Message):
        """One event from the drill's thread (post_message is thread-safe)."""

        def __init__(self, event: Mapping[str, Any]) -> None:
            super().__init__()
            self.event = event

    class Failed(Message):
        def __init__(self, reason: str) -> None:
            super().__init__()
            self.reason = reason

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("r", "rerun", "Run again"),
        Binding("s", "toggle_signal", "SIGKILL/SIGTERM"),
        Binding("e", "app.export", "Export"),
        Binding("q", "quit_asking", "Quit"),
    ]

    app: AdvisorAppBase

    def __init__(self, dest: Path, *, autostart: bool = True) -> None:
        super().__init__()
        self.dest = Path(dest)
        self.autostart = autostart
        self.running = False
        self.lines: list[Text] = []
        self.sigterm: bool | None = None
        """Set by ``s``: kill with SIGTERM (graceful) instead of SIGKILL on the next run."""

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="drill"):
            yield Static("", id="drill-title")
            yield ProgressBar(id="drill-bar", show_eta=False)
            chart = ProgressChart(id="drill-chart")
            chart.border_title = "records done over time · ✕ = kill"
            yield chart
            yield RecoveryPointView(id="drill-recovery")
            yield VerticalScroll(Static("", id="drill-lines"), id="drill-log")
            yield Static("", id="drill-verdict")
        yield Footer()

    def on_mount(self) -> None:
        self.show_title(self.options())
        if self.autostart:
            self.start()

    def show_title(self, facts: Mapping[str, Any]) -> None:
        mode = "SIGTERM" if facts.get("sigterm") or facts.get("signal") == "SIGTERM" else "SIGKILL"
        self.query_one("#drill-title", Static).update(
            Text.assemble(("Crash drill of ", "bold"), (self.dest.name, "bold"),
                          f": {facts.get('records', 2000)} records, {facts.get('kills', 10)} kills ({mode})")
        )

    def options(self) -> dict[str, Any]:
        session = self.app.session
        options = dict(session.drill_options) if session is not None else {}
        if self.sigterm is not None:
            options["sigterm"] = self.sigterm
        return options

    def start(self) -> None:
        self.lines.clear()
        self.query_one(ProgressChart).reset()
        self.query_one("#drill-lines", Static).update("")
        self.query_one("#drill-verdict", Static).update(Text("running… (escape stops it and leaves)", style="dim"))
        self.running = True
        self.run_drill(self.dest, self.options())

    @work(thread=True, exclusive=True, group="drill")
    def run_drill(self, dest: Path, options: dict[str, Any]) -> None:
        """Blocking: iterate the drill's events and hand each to the UI thread."""
        worker = get_current_worker()
        try:
            from advisor.scaffold.drill import drill_events

            events = drill_events(dest, **options)
            try:
                for event in events:
                    if worker.is_cancelled or not self.app.is_running:
                        break
                    self.post_message(self.Event(event))
            finally:
                close = getattr(events, "close", None)
                if close is not None:
                    close()  # stops the child process if the drill was left early
        except Exception as exc:  # DrillError, or anything the project does wrong
            if not worker.is_cancelled:
                self.post_message(self.Failed(str(exc)))

    def on_drill_screen_event(self, message: Event) -> None:
        self.apply(message.event)

    def on_drill_screen_failed(self, message: Failed) -> None:
        self.failed(message.reason)

    def apply(self, event: Mapping[str, Any]) -> None:
        """Show one drill event (progress, kill, restart, recovered, report)."""
        kind = event.get("event")
        chart = self.query_one(ProgressChart)
        bar = self.query_one(ProgressBar)
        if kind == "start":
            self.show_title({**self.options(), **event})
            if event.get("data_dir"):
                self.query_one(RecoveryPointView).follow(Path(event["data_dir"]))
            if event.get("records"):
                bar.update(total=event["records"], progress=0)
                chart.reset(int(event["records"]))
        elif kind == "progress":
            bar.update(total=event.get("total") or bar.total, progress=event.get("done", 0))
            chart.add_progress(float(event.get("t", 0.0)), int(event.get("done", 0)), event.get("total"))
        elif kind == "kill":
            chart.add_kill(float(event.get("t", 0.0)))
        elif kind == "report":
            self.running = False
            records, lost = event.get("records"), event.get("lost")
            if isinstance(records, int) and isinstance(lost, int):  # the run's end on the chart
                end = max(float(event.get("wall_s") or 0.0), chart.points[-1][0] if chart.points else 0.0)
                chart.add_progress(end, records - lost, records)
                bar.update(total=records, progress=records - lost)
            box = self.query_one("#drill-verdict", Static)
            box.update(verdict(event))
            box.set_class(bool(event.get("ok")), "ok")
            box.set_class(not event.get("ok"), "failed")
        line = event_line(event)
        if line is not None:
            self.lines.append(line)
            self.query_one("#drill-lines", Static).update(Text("\n").join(self.lines))
            # Anchored: the log stays at its last lines as lines arrive and as the verdict's box
            # grows under it at the end (until the user scrolls up to read).
            self.query_one("#drill-log", VerticalScroll).anchor()

    def action_quit_asking(self) -> None:
        """``q`` here would end a drill and the whole advisor: ask first (ctrl+q still quits at once)."""
        from advisor.tui.screens.confirm import ConfirmScreen

        question = "Stop the drill and quit the advisor?" if self.running else "Quit the advisor?"
        self.app.push_screen(ConfirmScreen(question, yes="Quit", no="Stay"), self._quit_if)

    def _quit_if(self, yes: bool | None) -> None:
        if yes:
            self.workers.cancel_group(self, "drill")
            self.app.exit()

    def failed(self, message: str) -> None:
        self.running = False
        self.query_one("#drill-verdict", Static).update(Text.assemble(("The drill failed: ", "bold red"), message))

    def action_toggle_signal(self) -> None:
        """Switch SIGKILL ↔ SIGTERM for the next run (not while one is running)."""
        if self.running:
            self.app.notify("Wait for this drill to finish, then switch the signal.", severity="warning")
            return
        self.sigterm = not self.options().get("sigterm", False)
        self.show_title(self.options())
        self.start()

    def action_rerun(self) -> None:
        if not self.running:
            self.start()

    def action_back(self) -> None:
        self.workers.cancel_group(self, "drill")
        self.dismiss()
