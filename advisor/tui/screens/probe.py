"""Probe my job: crash-drill the team's own command (``advisor probe``) and show it live, with the
drill screen's chart and log. The report is kept on the session: the decision record carries it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, Label, Static
from textual.worker import get_current_worker

from advisor.errors import AdvisorError
from advisor.tui.widgets.drill_log import event_line
from advisor.tui.widgets.inputs import TextInput
from advisor.tui.widgets.progress_chart import ProgressChart

if TYPE_CHECKING:
    from advisor.probe.runner import ProbeOptions
    from advisor.tui.base import AdvisorAppBase

FIELDS: tuple[tuple[str, str, str], ...] = (
    ("probe-run", "Run command", "the job, e.g. python job.py"),
    ("probe-verify", "Verify command", "exit 0 = the data is right (optional)"),
    ("probe-progress", "Progress command", "prints records done (optional)"),
    ("probe-cwd", "Working folder", ""),
    ("probe-kills", "Kills", ""),
    ("probe-min", "Min seconds", "earliest kill after each start"),
    ("probe-max", "Max seconds", "latest kill after each start"),
    ("probe-reset", "Reset command", "run before the probe: each probe starts from the beginning (optional)"),
)


class ProbeScreen(Screen[None]):
    """A small form; Start runs ``probe_events`` in a thread and shows each event."""

    DEFAULT_CSS = """
    #probe { padding: 0 1; }
    #probe-form { height: auto; }
    #probe-status { height: auto; }
    #probe-chart { border: round $primary; border-title-align: left; height: 8; }
    #probe-log { height: auto; max-height: 12; min-height: 3; }
    #probe-verdict { height: auto; }
    """

    class Event(Message):
        """One event from the probe's thread (post_message is thread-safe)."""

        def __init__(self, event: Mapping[str, Any]) -> None:
            super().__init__()
            self.event = event

    class Failed(Message):
        def __init__(self, reason: str) -> None:
            super().__init__()
            self.reason = reason

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("ctrl+r", "start", "Start the probe", key_display="ctrl+r", priority=True),
    ]

    app: AdvisorAppBase

    def __init__(self) -> None:
        super().__init__()
        self.running = False
        self.lines: list[Text] = []
        self.report: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        session = self.app.session
        workdir = str(session.workdir) if session is not None else "."
        defaults = {"probe-cwd": workdir, "probe-kills": "3", "probe-min": "0.5", "probe-max": "3"}
        yield Header()
        with VerticalScroll(id="probe"):
            yield Static(Text.assemble(("Probe my job", "bold"), ": kill your own job at random moments, "
                                       "restart it until it finishes, then run your verify command"),
                         id="probe-title")
            with Vertical(id="probe-form"):
                for id_, label, placeholder in FIELDS:
                    with Horizontal(classes="field"):
                        yield Label(label, classes="field-label")
                        yield TextInput(defaults.get(id_, ""), placeholder=placeholder, id=id_)
                yield Button("Start  (ctrl+r)", id="probe-start", variant="primary")
            yield Static("", id="probe-status")
            chart = ProgressChart(id="probe-chart")
            chart.border_title = "progress over time · ✕ = kill"
            yield chart
            yield VerticalScroll(Static("", id="probe-lines"), id="probe-log")
            yield Static("", id="probe-verdict")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#probe-run", Input).focus()

    def value(self, id_: str) -> str:
        return self.query_one(f"#{id_}", Input).value

    def options(self) -> ProbeOptions:
        """The form as probe options; a bad value raises :class:`ProbeError` (nothing started)."""
        from advisor.errors import ProbeError
        from advisor.probe.runner import ProbeOptions

        def number(id_: str, label: str, kind: type[float] | type[int]) -> Any:
            text = self.value(id_).strip()
            try:
                return kind(text)
            except ValueError:
                raise ProbeError(f"{label} {text!r}: give a number.") from None

        session = self.app.session
        cwd_text = self.value("probe-cwd").strip() or "."
        cwd = session.resolve(cwd_text) if session is not None else Path(cwd_text)
        options = ProbeOptions(
            run=self.value("probe-run"),
            verify=self.value("probe-verify").strip() or None,
            progress=self.value("probe-progress").strip() or None,
            reset=self.value("probe-reset").strip() or None,
            cwd=cwd,
            kills=number("probe-kills", "Kills", int),
            min_s=number("probe-min", "Min seconds", float),
            max_s=number("probe-max", "Max seconds", float),
        )
        options.check()
        return options

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "probe-start":
            self.action_start()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.action_start()

    def action_start(self) -> None:
        if self.running:
            self.app.notify("The probe is running: wait for its verdict, or escape to stop it.", severity="warning")
            return
        status = self.query_one("#probe-status", Static)
        try:
            options = self.options()
        except AdvisorError as exc:
            status.update(Text.assemble(("Not started: ", "bold red"), str(exc)))
            return
        self.lines.clear()
        self.report = None
        self.query_one(ProgressChart).reset()
        self.query_one("#probe-lines", Static).update("")
        status.update(Text("running… (escape stops the job and leaves)", style="dim"))
        verdict = self.query_one("#probe-verdict", Static)
        verdict.update("")
        verdict.remove_class("ok", "failed")
        self.running = True
        self.run_probe(options)

    @work(thread=True, exclusive=True, group="probe")
    def run_probe(self, options: ProbeOptions) -> None:
        """Blocking: iterate the probe's events and hand each to the UI thread."""
        from advisor.probe.runner import probe_events

        worker = get_current_worker()
        events = probe_events(options)
        try:
            for event in events:
                if worker.is_cancelled or not self.app.is_running:
                    break
                self.post_message(self.Event(event))
        except Exception as exc:  # ProbeError, or an OS error starting the job
            if not worker.is_cancelled:
                self.post_message(self.Failed(str(exc)))
        finally:
            events.close()  # kills the job's process group if the user left early

    def on_probe_screen_event(self, message: Event) -> None:
        self.apply(message.event)

    def on_probe_screen_failed(self, message: Failed) -> None:
        self.running = False
        self.query_one("#probe-status", Static).update(Text.assemble(("The probe failed: ", "bold red"), message.reason))

    def apply(self, event: Mapping[str, Any]) -> None:
        """Show one probe event on the chart, the counts line and the log."""
        kind = event.get("event")
        chart = self.query_one(ProgressChart)
        status = self.query_one("#probe-status", Static)
        t = event.get("t")
        at = f"{t:6.1f}s " if isinstance(t, (int, float)) else "        "
        line: Text | None = None
        if kind == "start":
            line = Text(f"{at}started: {event.get('kills', '?')} × {event.get('signal', 'SIGKILL')}", style="dim")
        elif kind == "progress":
            done, total = int(event.get("done") or 0), event.get("total")
            chart.add_progress(float(t or 0.0), done, total)
            count = f"{done} of {total} done ({done / total:.0%})" if total else f"{done} done"
            status.update(Text(f"running… {count} · {len(chart.kills)} kill(s) so far"))
        elif kind == "kill":
            chart.add_kill(float(t or 0.0))
            line = event_line(event)
        elif kind == "verify":
            passed = bool(event.get("passed"))
            line = Text(f"{at}verify {'passed' if passed else 'failed'}", style="green" if passed else "bold red")
        elif kind == "report":
            self.finish(dict(event))
        else:
            line = event_line(event)
        if line is not None:
            self.lines.append(line)
            self.query_one("#probe-lines", Static).update(Text("\n").join(self.lines))
            self.query_one("#probe-log", VerticalScroll).anchor()

    def finish(self, report: dict[str, Any]) -> None:
        """The verdict, and the report kept for the decision record's evidence."""
        from advisor.probe.report import summary

        self.running = False
        report.pop("event", None)
        self.report = report
        session = self.app.session
        if session is not None:
            session.probe_report = report
        ok = bool(report.get("ok"))
        self.query_one("#probe-status", Static).update(
            Text("Done: the decision record now carries this probe as evidence (escape, then e to export it).",
                 style="bold"))
        box = self.query_one("#probe-verdict", Static)
        # The verdict first (the summary ends with it too): it is what the user waited for.
        box.update(Text.assemble((str(report.get("verdict", "")) + "\n\n", "bold"), summary(report),
                                 style="green" if ok else "red"))
        box.set_class(ok, "ok")
        box.set_class(not ok, "failed")
        # After the next layout: the box's new height is known only then, and scrolling before it
        # leaves the verdict below the form on a busy machine.
        self.call_after_refresh(box.scroll_visible, top=True, animate=False)

    def action_back(self) -> None:
        self.workers.cancel_group(self, "probe")
        self.dismiss()
