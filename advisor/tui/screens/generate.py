"""Generate: name, destination and store; a preview of the files; then Copier runs."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import get_current_worker
from textual.widgets import Button, Footer, Header, Input, Label, Select, Static

from advisor.tui.widgets.next_steps import next_steps
from advisor.tui.widgets.store_choices import StoreChoices
from advisor.errors import AdvisorError
from advisor.tui.widgets.inputs import TextInput

if TYPE_CHECKING:
    from advisor.tui.base import AdvisorAppBase

def package_of(project_name: str) -> str:
    """The template's default package name for a project name (for the default destination)."""
    name = re.sub(r"[^a-z0-9]+", "_", project_name.lower())
    return re.sub(r"^[_0-9]+|_+$", "", name) or "continuity_job"


class GenerateScreen(Screen[None]):
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("ctrl+g", "generate", "Generate", priority=True),
        Binding("ctrl+t", "app.drill", "Try it", priority=True),
    ]

    app: AdvisorAppBase
    strategy: Any = None
    _last_name = "Continuity Job"
    _preview_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        from advisor.model.template_questions import template_questions
        from advisor.model.template_settings import settings_for

        session = self.app.session
        strategy = session.catalog.strategy(session.chosen_id(session.recommend())).template if session else None
        try:
            # The settings the answers imply pre-fill the form, each with its reason (the user may change them).
            settings = settings_for(strategy, session.answers, session.catalog) if session and strategy else ()
            given = {s.key: s.value for s in settings}
            questions, self.template_error = template_questions(strategy, given), ""
        except AdvisorError as exc:  # a broken template or settings file: say so, offer nothing to generate
            questions, settings, self.template_error = [], (), str(exc)
        yield Header()
        with VerticalScroll(id="generate"):
            yield Static("", id="gen-title")
            with Horizontal(classes="field"):
                yield Label("Project name", classes="field-label")
                yield TextInput("Continuity Job", id="project-name")
            with Horizontal(classes="field"):
                yield Label("Destination", classes="field-label")
                yield TextInput("continuity_job", id="dest")
            yield StoreChoices(questions, settings=settings, id="gen-stores")
            with Horizontal(id="gen-buttons"):
                yield Button("Generate  (ctrl+g)", id="generate-btn", variant="primary")
                yield Button("Try it  (ctrl+t)", id="try-btn", disabled=True)
            yield Static("", id="gen-status")
            yield Static("", id="gen-preview")
            yield Static("", id="gen-result")
        yield Footer()

    def on_mount(self) -> None:
        from advisor.model.template_questions import generated_strategies

        session = self.app.session
        assert session is not None
        self.strategy = session.catalog.strategy(session.chosen_id(session.recommend()))
        try:
            offered = generated_strategies()
        except AdvisorError as exc:
            offered, self.template_error = frozenset(), self.template_error or str(exc)
        self.available = self.strategy.template in offered and not self.template_error
        title = Text.assemble("Generate a starter project for ", (self.strategy.name, "bold"))
        if self.template_error:
            title.append("\nThe template cannot be used: ", style="bold red").append(self.template_error)
        elif not self.available:
            names = ", ".join(sorted(offered)) or "none yet"
            title.append("\nThis strategy is not generated yet", style="bold red")
            title.append(f" (the template offers: {names}); its decision record can still be exported.")
        self.query_one("#generate-btn", Button).disabled = not self.available
        self.query_one("#gen-title", Static).update(title)
        self.query_one("#project-name", Input).focus()
        self.refresh_preview()

    def answers(self) -> dict[str, Any]:
        """The template answers from the form (only what the user sees here)."""
        answers: dict[str, Any] = dict(getattr(self.strategy, "template_options", {}) or {})
        answers["project_name"] = self.query_one("#project-name", Input).value.strip()
        answers.update(self.query_one(StoreChoices).values())
        return answers

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "project-name":
            dest = self.query_one("#dest", Input)
            if dest.value == package_of(self._last_name):  # still the default: follow the name
                dest.value = package_of(event.value)
            self._last_name = event.value
            self.refresh_preview()

    def on_select_changed(self, event: Select.Changed) -> None:
        self.refresh_preview()

    def refresh_preview(self) -> None:
        """Preview after a short pause in typing (each preview renders the template)."""
        if not self.available:
            return
        if self._preview_timer is not None:
            self._preview_timer.stop()
        self.query_one("#gen-preview", Static).update(Text("Files it will write: …", style="bold"))
        self._preview_timer = self.set_timer(
            0.3, lambda: self.preview_files(self.strategy.template, self.answers())
        )

    @work(thread=True, exclusive=True, group="preview")
    def preview_files(self, strategy: str, answers: dict[str, Any]) -> None:
        from advisor.scaffold.generation import preview

        try:
            files = preview(strategy, answers)
            text = Text(f"Files it will write ({len(files)}):\n", style="bold")
            text.append(", ".join(files))
            deploy = [f for f in files if f.startswith("deploy/") or f == "Dockerfile"]
            if deploy:  # what production needs: manifests, the unit, the image, the alert rules
                text.append("\nDeploy files: ", style="bold")
                text.append(", ".join(deploy))
        except Exception as exc:  # a bad answer: the template says why
            text = Text.assemble(("Preview: ", "bold red"), str(exc))
        # A newer preview replaced this one while it rendered (the first render imports Copier and
        # is slow): its answers are stale, and it must not overwrite the newer text.
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self.show_preview, text)

    def show_preview(self, text: Text) -> None:
        """On the UI thread: the screen may be gone by the time a slow preview is ready (left, or the
        app closing); then there is nothing to show it in."""
        found = self.query("#gen-preview")
        if found:
            found.first(Static).update(text)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "generate-btn":
            self.action_generate()
        elif event.button.id == "try-btn":
            self.app.action_drill()

    def action_generate(self) -> None:
        session = self.app.session
        assert session is not None
        if not self.available:
            return
        dest_text = self.query_one("#dest", Input).value.strip()
        if not dest_text:
            self.status("Type a destination folder.")
            return
        dest = session.resolve(dest_text)
        if dest.is_dir() and any(dest.iterdir()):  # ask before writing into someone's files
            from advisor.tui.screens.confirm import ConfirmScreen

            question = (
                f"{dest_text} is not empty.\n\nWrite the project into it anyway? Files the template"
                " writes replace files of the same name, an earlier generated project's files this one does"
                " not have are removed; other files (data/, your own) stay."
            )
            self.app.push_screen(
                ConfirmScreen(question, yes="Overwrite", no="Cancel"),
                lambda yes: self.start_copier(dest_text, force=True) if yes else self.status(
                    "Not generated: ", f"{dest_text} is not empty. Pick an empty or new folder, or confirm the overwrite."
                ),
            )
            return
        self.start_copier(dest_text)

    def start_copier(self, dest_text: str, *, force: bool = False) -> None:
        self.query_one("#generate-btn", Button).disabled = True
        self.status("Generating…", ok=True)
        self.run_copier(self.strategy.template, dest_text, self.answers(), force)

    @work(thread=True, exclusive=True, group="generate")
    def run_copier(self, strategy: str, dest_text: str, answers: dict[str, Any], force: bool = False) -> None:
        from advisor.scaffold.generation import generate

        assert self.app.session is not None
        try:
            generated = generate(strategy, self.app.session.resolve(dest_text), answers, force=force)
        except Exception as exc:  # ScaffoldError, OutputExistsError, OSError, or a template bug
            self.app.call_from_thread(self.failed, str(exc))
            return
        self.app.call_from_thread(self.done, generated, dest_text)

    def failed(self, message: str) -> None:
        # The library's message speaks to the command line; here there is no flag to pass.
        message = message.replace("choose a new directory or pass --force to overwrite", "pick an empty or new folder")
        self.status("Generation failed: ", message)
        self.query_one("#generate-btn", Button).disabled = False

    def done(self, generated: Any, dest_text: str) -> None:
        assert self.app.session is not None
        self.app.session.generated = generated
        self.status(f"Generated {len(generated.files)} files in {dest_text}", ok=True)
        text = next_steps(generated, dest_text)
        self.query_one("#gen-preview", Static).display = False
        result = self.query_one("#gen-result", Static)
        result.update(text)
        status = self.query_one("#gen-status", Static)
        self.call_after_refresh(status.scroll_visible, top=True, animate=False)
        button = self.query_one("#try-btn", Button)
        button.disabled = False
        button.focus()

    def status(self, head: str, detail: str = "", ok: bool = False) -> None:
        style = "bold green" if ok else "bold red"
        self.query_one("#gen-status", Static).update(Text.assemble((head, style), detail))

    def action_back(self) -> None:
        self.dismiss()
