"""Export: write the decision record (as `advisor review` does) and the answers file."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Checkbox, Footer, Header, Input, Label, Static

from advisor.errors import AdvisorError, OutputExistsError
from advisor.tui.widgets.inputs import TextInput

if TYPE_CHECKING:
    from advisor.tui.base import AdvisorAppBase


class ExportScreen(Screen[None]):
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("ctrl+s", "write", "Write files", priority=True),
    ]

    app: AdvisorAppBase

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="export"):
            yield Static("", id="export-title")
            with Horizontal(classes="field"):
                yield Label("Decision record", classes="field-label")
                yield TextInput("decision-record.md", id="record-path")
            with Horizontal(classes="field"):
                yield Label("Answers file", classes="field-label")
                yield TextInput("answers.yml", id="answers-path")
            with Horizontal(classes="field"):
                yield Checkbox("overwrite existing files", id="force")
                yield Button("Write  (ctrl+s)", id="write", variant="primary")
            yield Static("", id="export-status")
            with VerticalScroll(id="record-preview"):
                yield Static("", id="record-text")
        yield Footer()

    def on_mount(self) -> None:
        session = self.app.session
        assert session is not None
        try:
            review = session.review()
            title = Text.assemble("Export the decision for ", (review.target.strategy.name, "bold"))
            if session.current is not None:
                title.append(f" (reviewing the current {session.catalog.strategy(session.current.strategy).name})")
            self.query_one("#export-title", Static).update(title)
            self.record = session.decision_record(review)
        except AdvisorError as exc:
            self.record = ""
            self.status("The decision record could not be made: ", str(exc))
        from rich.markdown import Markdown

        self.query_one("#record-text", Static).update(Markdown(self.record))
        self.query_one("#record-path", Input).focus()

    def status(self, head: str, detail: str = "", ok: bool = False) -> None:
        """Show an outcome; ``detail`` (paths, OS messages) is shown verbatim, never as markup."""
        style = "bold green" if ok else "bold red"
        self.query_one("#export-status", Static).update(Text.assemble((head, style), detail))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "write":
            self.action_write()

    def action_write(self) -> None:
        """Write both files; an existing file or an unwritable folder is reported, not raised."""
        from advisor.safe_write import write_text_safely

        session = self.app.session
        assert session is not None
        if not self.record:
            return  # the reason is already on the screen
        force = self.query_one("#force", Checkbox).value
        targets = [
            (self.query_one("#record-path", Input).value, self.record),
            (self.query_one("#answers-path", Input).value, session.answers_file()),
        ]
        if any(not name.strip() for name, _ in targets):
            self.status("Both file names are needed.")
            return
        written: list[str] = []
        for name, text in targets:
            try:
                write_text_safely(session.resolve(name), text, force=force)
            except AdvisorError as exc:
                if isinstance(exc, OutputExistsError):
                    exc = OutputExistsError(f"{name.strip()} already exists: tick \"overwrite existing files\" or change the name.")
                done = f"\n(already written: {', '.join(written)})" if written else ""
                self.status("Not written: ", f"{exc}{done}")
                return
            except OSError as exc:
                self.status(f"Cannot write {name.strip()}: ", str(exc.strerror or exc))
                return
            written.append(name.strip())
        again = f"advisor review --answers {shlex.quote(written[1])}" + (f" --chosen {session.chosen}" if session.chosen else "")
        self.status("Written: ", f"{' and '.join(written)} · `{again}` writes the same record again", ok=True)
        self.app.notify(f"Wrote {' and '.join(written)}.")

    def action_back(self) -> None:
        self.dismiss()
