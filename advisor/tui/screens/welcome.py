"""Welcome: what continuity means, then start the walkthrough or load an answers file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, Static

from advisor.errors import AdvisorError
from advisor.tui.widgets.inputs import TextInput

if TYPE_CHECKING:
    from advisor.tui.base import AdvisorAppBase

INTRO = (
    "Your long-running job will be killed mid-way: a deploy, a crash, a scale-in.\n"
    "Continuity means it then carries on [b]without losing progress[/] and "
    "[b]without repeating side effects[/].\n"
    "It all comes down to one recovery point: where it is kept, how often it is "
    "written, and how duplicates are avoided after a restart."
)


class WelcomeScreen(Screen[None]):
    BINDINGS = [
        Binding("s", "app.start", "Start"),
        Binding("l", "app.load", "Load answers"),
        Binding("v", "app.review", "Review my design"),
        Binding("ctrl+p", "app.command_palette", "Commands"),
    ]

    app: AdvisorAppBase

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="welcome"):
            yield Static("Keep a killed job going", id="welcome-title")
            yield Static(INTRO, id="intro")
            yield Static(
                "Answer a few questions (arrows, enter, number keys; \"I don't know\" is fine) "
                "and get a ranked recommendation, a generated project and a live crash drill; "
                "or review the design you run today against its essential controls.",
                id="welcome-how",
            )
            with Horizontal(id="welcome-buttons"):
                yield Button("Start  (s)", id="start", variant="primary")
                yield Button("Load answers  (l)", id="load")
                yield Button("Review my design  (v)", id="review")
            with Horizontal(id="loader"):
                yield TextInput(placeholder="answers.yml", id="answers-path")
                yield Button("Load", id="load-file")
            yield Static("", id="error", classes="error")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#loader").display = False
        if self.app.startup_error:
            self.show_error(self.app.startup_error)
        if self.app.session is None:  # no catalog: nothing to start
            self.query_one("#start", Button).disabled = True
            self.query_one("#load", Button).disabled = True
            self.query_one("#review", Button).disabled = True
        self.query_one("#start", Button).focus()

    def show_error(self, message: str) -> None:
        error = self.query_one("#error", Static)
        error.update(Text(message))
        error.display = bool(message)

    def show_loader(self) -> None:
        if self.app.session is None:
            return
        self.query_one("#loader").display = True
        self.query_one("#answers-path", Input).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self.app.action_start()
        elif event.button.id == "review":
            self.app.action_review()
        elif event.button.id == "load":
            self.show_loader()
        elif event.button.id == "load-file":
            self.load(self.query_one("#answers-path", Input).value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "answers-path":
            self.load(event.value)

    def load(self, text: str) -> None:
        """Read an answers file; a bad one is reported here and changes nothing."""
        from advisor.model.answers import load_review_file

        session = self.app.session
        if session is None:
            return
        if not text.strip():
            self.show_error("Type the path of an answers file (YAML: question_id: value).")
            return
        path = session.resolve(text)
        try:
            loaded = load_review_file(path, session.catalog)
        except AdvisorError as exc:
            self.show_error(f"Could not load the answers file: {exc}")
            return
        except OSError as exc:
            self.show_error(f"Could not read {text.strip()}: {exc.strerror or exc}")
            return
        self.show_error("")
        session.answers = dict(loaded.answers)
        session.chosen = None
        session.context, session.current = loaded.context, loaded.current
        extra = " and the current design under review" if loaded.current is not None else ""
        self.app.notify(f"Loaded {len(loaded.answers)} answers{extra} from {path.name}.")
        self.app.action_recommend()
