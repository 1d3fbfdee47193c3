"""The advisor app and its one factory, :func:`make_app` (used by the CLI and the tests)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.screen import Screen

from advisor.errors import AdvisorError
from advisor.tui.base import AdvisorAppBase
from advisor.tui.commands import AdvisorCommands
from advisor.tui.session import Session


class AdvisorApp(AdvisorAppBase):
    """Welcome → questions → recommendation → generate → try it → export; and the review of a
    current design: current strategy → controls → findings → export."""

    CSS_PATH = "advisor.tcss"
    TITLE = "Continuity Advisor"
    COMMANDS = App.COMMANDS | {AdvisorCommands}
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        Binding("f1,question_mark", "help", "Help", key_display="?"),
    ]

    def get_default_screen(self) -> Screen[Any]:
        from advisor.tui.screens.welcome import WelcomeScreen

        return WelcomeScreen()

    def back_to_welcome(self) -> None:
        while len(self.screen_stack) > 1:
            self.pop_screen()

    # One action per step; the key bindings, buttons and command palette all call these.
    def action_help(self) -> None:
        from advisor.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_start(self) -> None:
        """Open the walkthrough at its first question."""
        from advisor.tui.screens.question import QuestionScreen

        if self.session is not None:
            self.push_screen(QuestionScreen())

    def action_load(self) -> None:
        from advisor.tui.screens.welcome import WelcomeScreen

        self.back_to_welcome()
        if isinstance(self.screen, WelcomeScreen):
            self.screen.show_loader()

    def action_recommend(self) -> None:
        from advisor.tui.screens.recommendation import RecommendationScreen

        if self.session is None:
            return
        if isinstance(self.screen, RecommendationScreen):
            self.screen.refresh_recommendation()
        else:
            self.push_screen(RecommendationScreen())

    def action_review(self) -> None:
        """Open the "review my current design" walkthrough at its first step: what the team saw."""
        from advisor.tui.screens.review_symptoms import SymptomsScreen

        if self.session is not None and not isinstance(self.screen, SymptomsScreen):
            self.push_screen(SymptomsScreen())

    def action_generate(self) -> None:
        from advisor.tui.screens.generate import GenerateScreen

        if self.session is not None and not isinstance(self.screen, GenerateScreen):
            self.push_screen(GenerateScreen())

    def action_drill(self) -> None:
        from advisor.tui.screens.drill import DrillScreen

        if self.session is None or isinstance(self.screen, DrillScreen):
            return
        if self.session.generated is None:
            self.notify("Generate a project first: its drill is what runs here.", severity="warning")
            self.action_generate()
            return
        self.push_screen(DrillScreen(self.session.generated.dest))

    def action_probe(self) -> None:
        """Probe my job: crash-drill the team's own command; the record carries its report."""
        from advisor.tui.screens.probe import ProbeScreen
        from advisor.tui.screens.review_findings import FindingsScreen

        if self.session is None or isinstance(self.screen, ProbeScreen):
            return
        if isinstance(self.screen, FindingsScreen):
            self.screen.action_probe()  # the findings show the evidence when the probe is left
        else:
            self.push_screen(ProbeScreen())

    def action_export(self) -> None:
        from advisor.tui.screens.export import ExportScreen

        if self.session is not None and not isinstance(self.screen, ExportScreen):
            self.push_screen(ExportScreen())


def make_app(
    catalog: Any = None,
    answers: Mapping[str, object] | None = None,
    *,
    workdir: Path | None = None,
    drill_options: Mapping[str, Any] | None = None,
    blink: bool = True,
    today: date | None = None,
) -> AdvisorApp:
    """Build the advisor app.

    ``catalog`` defaults to the bundled one; ``answers`` pre-fill the walkthrough;
    ``workdir`` is where relative paths typed by the user point (default: the current
    directory); ``drill_options`` go to ``advisor.scaffold.drill.drill_events`` (e.g. records, kills);
    ``blink=False`` stops the text cursor blinking and ``today`` fixes the decision
    record's date (both for snapshot tests).
    A broken catalog or bad answers never raise here: the app starts and shows the message.
    """
    try:
        if catalog is None:
            from advisor.model.loader import load_catalog

            catalog = load_catalog()
    except AdvisorError as exc:
        return AdvisorApp(None, error=f"The strategy catalog could not be loaded: {exc}", blink=blink)
    valid: dict[str, str] = {}
    error = None
    if answers:
        from advisor.model.answers import validate_answers

        try:
            valid = validate_answers(answers, catalog)
        except AdvisorError as exc:
            error = f"The answers were not used: {exc}"
    session = Session(
        catalog=catalog,
        workdir=Path.cwd() if workdir is None else Path(workdir),
        answers=valid,
        drill_options=dict(drill_options or {}),
        today=today,
    )
    return AdvisorApp(session, error=error, blink=blink)
