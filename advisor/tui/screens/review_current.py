"""Review, step 2: which strategy the job uses today (from the catalog), and what happened."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Footer, Header, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from advisor.tui.screens.review_base import ReviewStepScreen
from advisor.tui.widgets.inputs import TextInput
from advisor.tui.widgets.review_steps import ReviewSteps


class CurrentStrategyScreen(ReviewStepScreen):
    """Enter (or a number) picks the current strategy and opens its controls checklist."""

    STEP = 1

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("left", "arrow('left')", "Back", key_display="←", show=False, priority=True),
        Binding("right", "arrow('right')", "Controls", key_display="→", priority=True),
        *(Binding(str(n), f"pick({n})", "Pick", show=n == 1, key_display="1-9") for n in range(1, 10)),
    ]


    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="review-current"):
            yield ReviewSteps(id="review-steps")
            yield Static("Which continuity strategy does the job use today?", classes="review-asks")
            yield OptionList(id="current-strategies")
            yield Static("", id="current-summary")
            yield Label("What happened, in your words (optional, tab to type; goes into the record):")
            yield TextInput(placeholder="e.g. a redeploy killed the nightly import and 40 invoices went out twice", id="context")
        yield Footer()

    def on_mount(self) -> None:
        session = self.session
        self.show_steps()
        options = self.query_one("#current-strategies", OptionList)
        for n, s in enumerate(session.catalog.strategies, start=1):
            options.add_option(Option(f"{n}  {s.name}", id=s.id))
        ids = list(session.catalog.strategy_ids)
        if session.current is not None and session.current.strategy in ids:
            options.highlighted = ids.index(session.current.strategy)
        else:
            options.highlighted = 0
        self.query_one("#context", Input).value = session.context or ""
        options.focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        strategy = self.session.catalog.strategy(str(event.option_id))
        self.query_one("#current-summary", Static).update(strategy.summary.strip())

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        from advisor.tui.screens.review_controls import ControlsScreen

        self.save_context()
        self.app.push_screen(ControlsScreen(str(event.option_id)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.save_context()
        self.query_one("#current-strategies", OptionList).focus()

    def save_context(self) -> None:
        text = self.query_one("#context", Input).value.strip()
        self.session.context = text or None

    def action_pick(self, number: int) -> None:
        options = self.query_one("#current-strategies", OptionList)
        if 0 < number <= options.option_count:
            options.highlighted = number - 1
            options.action_select()

    def action_arrow(self, direction: str) -> None:
        """← / → step back / on, except in the context field, where they move its cursor."""
        focused = self.focused
        if isinstance(focused, Input):
            (focused.action_cursor_left if direction == "left" else focused.action_cursor_right)()
        elif direction == "left":
            self.action_back()
        else:
            self.query_one("#current-strategies", OptionList).action_select()

    def action_back(self) -> None:
        self.save_context()
        self.dismiss()
