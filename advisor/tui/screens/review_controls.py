"""Review, step 3: the current strategy's essential controls, each yes / no / unknown.

Only the controls that apply to the answers are asked; the highlighted one shows why it
matters (worded for the answers) and how to check it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Footer, Header, OptionList, Static
from textual.widgets.option_list import Option

from advisor.tui.screens.review_base import ReviewStepScreen
from advisor.tui.widgets.review_steps import ReviewSteps


if TYPE_CHECKING:
    from advisor.model.catalog import Control

MARKS = {"yes": ("✔ yes", "green"), "no": ("✘ no ", "bold red"), "unknown": ("? ---", "yellow")}


def control_line(control: Control, status: str) -> Table:
    """``✘ no   Is …?`` with the question's wrapped lines indented under its first."""
    mark, style = MARKS[status]
    row = Table.grid(padding=(0, 2))
    row.add_column(width=5, no_wrap=True)
    row.add_column(ratio=1)
    row.add_row(Text(mark, style=style), control.question)
    return row


class ControlsScreen(ReviewStepScreen):
    """y / n / u answer the highlighted control and move down; enter or → shows the findings."""

    STEP = 2

    BINDINGS = [
        Binding("escape,left", "back", "Back", key_display="←", priority=True),
        Binding("y", "mark('yes')", "Yes"),
        Binding("n", "mark('no')", "No"),
        Binding("u", "mark('unknown')", "Unknown"),
        Binding("right", "findings", "Findings", key_display="→", priority=True),
    ]


    def __init__(self, strategy_id: str) -> None:
        super().__init__()
        self.strategy_id = strategy_id
        self.states: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="review-controls"):
            yield ReviewSteps(id="review-steps")
            yield Static("", id="controls-title", classes="review-asks")
            yield OptionList(id="controls")
            yield VerticalScroll(Static("", id="control-why"), id="control-detail")
        yield Footer()

    def controls(self) -> list[Control]:
        strategy = self.session.catalog.strategy(self.strategy_id)
        return [c for c in strategy.controls if c.applies(self.session.answers)]

    def on_mount(self) -> None:
        session = self.session
        strategy = session.catalog.strategy(self.strategy_id)
        self.show_steps()
        if session.current is not None and session.current.strategy == self.strategy_id:
            self.states = dict(session.current.controls)
        controls = self.controls()
        skipped = len(strategy.controls) - len(controls)
        title = f"{strategy.name}: is each essential control in place? (y / n / u)"
        if skipped:
            title += f"\n{skipped} more do not apply to your answers."
        self.query_one("#controls-title", Static).update(title)
        options = self.query_one("#controls", OptionList)
        for c in controls:
            options.add_option(Option(control_line(c, self.status(c.id)), id=c.id))
        if controls:
            options.highlighted = 0
        else:
            self.query_one("#control-why", Static).update("No essential control applies to these answers.")
        options.focus()
        self.save()

    def status(self, control_id: str) -> str:
        return self.states.get(control_id, "unknown")

    def save(self) -> None:
        """The session's current design follows every keypress (the export writes it)."""
        from advisor.model.answers import CurrentDesign

        self.session.current = CurrentDesign(self.strategy_id, dict(self.states))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        control = self.session.catalog.strategy(self.strategy_id).control(str(event.option_id))
        worded = control.worded(self.session.answers)
        text = Text()
        text.append("Why: ", style="bold")
        text.append(worded.why.strip() + "\n")
        text.append("Check: ", style="bold")
        text.append(worded.how_to_check.strip(), style="dim")
        self.query_one("#control-why", Static).update(text)
        self.query_one("#control-detail", VerticalScroll).scroll_home(animate=False)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.action_findings()

    def action_mark(self, status: str) -> None:
        options = self.query_one("#controls", OptionList)
        index = options.highlighted
        if index is None:
            return
        control_id = str(options.get_option_at_index(index).id)
        self.states[control_id] = status
        control = self.session.catalog.strategy(self.strategy_id).control(control_id)
        options.replace_option_prompt_at_index(index, control_line(control, status))
        self.save()
        if index + 1 < options.option_count:
            options.highlighted = index + 1

    def action_findings(self) -> None:
        from advisor.tui.screens.review_findings import FindingsScreen

        self.save()
        self.app.push_screen(FindingsScreen())

    def action_back(self) -> None:
        self.dismiss()
