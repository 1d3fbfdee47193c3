"""The recommendation: alerts (conflicts, close call), ranked strategies, why, scenarios,
trade-offs, pitfalls; jump keys back to the questions that would change it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option

from advisor.errors import AdvisorError
from advisor.tui.widgets.alerts import close_call_panel, conflicts_panel, revisit_ids, settle_ids
from advisor.tui.widgets.scenario_table import ScenarioTable
from advisor.tui.widgets.strategy_detail import pitfalls_text, tradeoffs_text, why_text

if TYPE_CHECKING:
    from advisor.tui.base import AdvisorAppBase


def ranking_line(n: int, ranked: Any, chosen: str, width: int) -> Text:
    """``★✔ 1. Name  granularity score``: ★ top pick, ✔ chosen, ✕ ruled out (dim). Never truncated."""
    star = "★" if n == 1 else ("✕" if ranked.ruled_out else " ")
    mark = "✔" if ranked.strategy.id == chosen else " "
    s = ranked.strategy
    line = f"{star}{mark} {n}. {s.name:<{width}}  {s.granularity:<6} {ranked.score:6.2f}"
    return Text(line, style="dim" if ranked.ruled_out and n != 1 else "")


class RecommendationScreen(Screen[None]):
    """Highlight a strategy to read about it; enter picks it instead of the top one."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("r", "revise", "Revise"),
        Binding("c", "conflicts", "Conflicts"),
        Binding("s", "settle", "Settle"),
        Binding("v", "app.review", "Review design"),
        Binding("g", "app.generate", "Generate"),
        Binding("e", "app.export", "Export"),
        Binding("1", "tab('why')", "Why", show=False),
        Binding("2", "tab('scenarios')", "Scenarios", show=False),
        Binding("3", "tab('tradeoffs')", "Trade-offs", show=False),
        Binding("4", "tab('pitfalls')", "Pitfalls", show=False),
    ]

    app: AdvisorAppBase
    rec: Any = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="verdict")
        yield Static("", id="conflicts", classes="alert conflict")
        yield Static("", id="close-call", classes="alert close")
        yield OptionList(id="ranking")
        with TabbedContent(id="details"):
            with TabPane("1 Why", id="why"):
                yield VerticalScroll(Static("", id="why-text"))
            with TabPane("2 Scenarios", id="scenarios"):
                yield VerticalScroll(Static("", id="scenario-caption"), ScenarioTable(id="scenario-table"))
            with TabPane("3 Trade-offs", id="tradeoffs"):
                yield VerticalScroll(Static("", id="tradeoffs-text"))
            with TabPane("4 Pitfalls", id="pitfalls"):
                yield VerticalScroll(Static("", id="pitfalls-text"))
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_recommendation()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide the jump keys when there is nothing to jump to."""
        if action == "conflicts":
            return bool(self.rec is not None and self.rec.warnings)
        if action == "settle":
            return bool(self.rec is not None and settle_ids(self.rec))
        return True

    def refresh_recommendation(self) -> None:
        session = self.app.session
        assert session is not None
        try:
            self.rec = session.recommend()
        except AdvisorError as exc:
            self.rec = None
            self.query_one("#verdict", Static).update(Text.assemble(("No recommendation: ", "bold red"), str(exc)))
            return
        chosen = session.chosen_id(self.rec)
        ranking = self.query_one("#ranking", OptionList)
        ranking.border_title = "★ top pick · ✔ chosen (enter) · ✕ ruled out by an answer"
        ranking.clear_options()
        width = self._name_width()
        for n, ranked in enumerate(self.rec.ranking, start=1):
            ranking.add_option(Option(ranking_line(n, ranked, chosen, width), id=ranked.strategy.id))
        ids = [r.strategy.id for r in self.rec.ranking]
        ranking.highlighted = ids.index(chosen)
        ranking.focus()
        self._show_verdict()
        for selector, panel in (("#conflicts", conflicts_panel(session, self.rec)),
                                ("#close-call", close_call_panel(session, self.rec))):  # fmt: skip
            widget = self.query_one(selector, Static)
            widget.display = panel is not None
            widget.update(panel or "")
        scenario = self.rec.scenario
        self.query_one(ScenarioTable).show(
            session.catalog.scenarios, scenario.id if scenario else None, self.strategy_name
        )
        caption = f"Your answers match: [b]{scenario.scenario}[/]" if scenario else "No row matches exactly."
        self.query_one("#scenario-caption", Static).update(caption)
        self.refresh_bindings()

    def _name_width(self) -> int:
        return max(len(r.strategy.name) for r in self.rec.ranking)

    def strategy_name(self, strategy_id: str) -> str:
        assert self.app.session is not None
        try:
            return str(self.app.session.catalog.strategy(strategy_id).name)
        except Exception:  # a scenario naming a strategy the catalog lacks: show the id
            return strategy_id

    def _show_verdict(self) -> None:
        session = self.app.session
        assert session is not None and self.rec is not None
        top = self.rec.top.strategy
        chosen = session.chosen_id(self.rec)
        known, total = len(session.answers), len(session.catalog.questions)
        close = " (a close call)" if self.rec.close_call is not None else ""
        if self.rec.top.ruled_out:  # every strategy is ruled out: the answers contradict each other
            head = f"✕ No strategy fits these answers as given; the closest: {top.name}"
        else:
            head = f"★ Recommended{close}: {top.name}"
        text = Text.assemble((head, "bold"), f" · {known}/{total} answered")
        if chosen != top.id:
            text.append(f"\nYou chose: {self.strategy_name(chosen)}", style="bold")
            text.append(" (enter on the top row goes back to it)")
        self.query_one("#verdict", Static).update(text)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if self.rec is None or event.option_list.id != "ranking":
            return
        ranked = self.rec.ranking[event.option_index]
        assert self.app.session is not None
        self.query_one("#why-text", Static).update(why_text(self.app.session, self.rec, ranked))
        self.query_one("#tradeoffs-text", Static).update(tradeoffs_text(ranked))
        self.query_one("#pitfalls-text", Static).update(pitfalls_text(self.rec, ranked))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if self.rec is None or event.option_list.id != "ranking":
            return
        session = self.app.session
        assert session is not None
        top = self.rec.top.strategy.id
        session.chosen = None if event.option_id == top else event.option_id
        chosen = session.chosen_id(self.rec)
        width = self._name_width()
        for n, ranked in enumerate(self.rec.ranking, start=1):
            event.option_list.replace_option_prompt(ranked.strategy.id, ranking_line(n, ranked, chosen, width))
        self._show_verdict()

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_back(self) -> None:
        self.dismiss()

    def revisit(self, question_ids: Sequence[str]) -> None:
        """Ask just these questions again, then come back here with the new recommendation."""
        from advisor.tui.screens.question import QuestionScreen

        if question_ids:
            self.app.push_screen(QuestionScreen(only=question_ids), lambda _: self.refresh_recommendation())

    def action_conflicts(self) -> None:
        if self.rec is not None:
            self.revisit(revisit_ids(self.rec))

    def action_settle(self) -> None:
        if self.rec is not None:
            self.revisit(settle_ids(self.rec))

    def action_revise(self) -> None:
        from advisor.tui.screens.question import QuestionScreen

        stack = self.app.screen_stack
        below = stack[-2] if len(stack) > 1 else None
        if isinstance(below, QuestionScreen) and not below.only:
            below.index = 0
            self.dismiss()
            below.show_step()
        else:
            self.app.switch_screen(QuestionScreen())
