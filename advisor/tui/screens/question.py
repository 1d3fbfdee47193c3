"""The walkthrough: one question per step, keyboard first, back and forward."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, OptionList, Static
from textual.widgets.option_list import Option

from advisor.tui.session import UNKNOWN
from advisor.tui.widgets.step_bar import StepBar

if TYPE_CHECKING:
    from advisor.tui.app import AdvisorApp

NUMBER_KEYS = [Binding(str(n), f"pick({n})", "Pick", show=False) for n in range(1, 10)]


class QuestionScreen(Screen[None]):
    """Steps through ``session.questions()``; enter or a number answers and moves on."""

    BINDINGS = [
        Binding("left,escape", "back", "Back", key_display="←", priority=True),
        Binding("right", "forward", "Next", key_display="→", priority=True),
        Binding("1", "pick(1)", "Pick", key_display="1-9"),
        *NUMBER_KEYS[1:],
        Binding("0", "pick(0)", "Don't know"),
    ]

    app: AdvisorApp

    def __init__(self, index: int = 0) -> None:
        super().__init__()
        self.index = index

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="question"):
            yield StepBar(id="steps")
            yield Static("", id="asks")
            yield Static("", id="question-help")
            yield OptionList(id="choices")
            yield Static("", id="choice-help")
        yield Footer()

    def on_mount(self) -> None:
        self.show_step()

    @property
    def session(self):  # type: ignore[no-untyped-def]
        assert self.app.session is not None
        return self.app.session

    def show_step(self) -> None:
        questions = self.session.questions()
        question = questions[self.index]
        answered = {i for i, q in enumerate(questions) if q.id in self.session.answers}
        self.query_one(StepBar).show(self.index, len(questions), question.group, answered)
        self.query_one("#asks", Static).update(question.asks)
        self.query_one("#question-help", Static).update(question.help)
        current = self.session.answers.get(question.id)
        options = self.query_one("#choices", OptionList)
        options.clear_options()
        for n, choice in enumerate(question.choices, start=1):
            mark = " ✔" if choice.id == current else ""
            key = str(n) if n < 10 else " "
            options.add_option(Option(f"{key}  {choice.label}{mark}", id=choice.id))
        options.add_option(Option("0  I don't know", id=UNKNOWN))
        ids = [c.id for c in question.choices]
        options.highlighted = ids.index(current) if current in ids else 0
        options.focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        question = self.session.questions()[self.index]
        text = "Leave it open: the recommendation says what this answer could change."
        for choice in question.choices:
            if choice.id == event.option_id:
                text = choice.help
        self.query_one("#choice-help", Static).update(text)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        question = self.session.questions()[self.index]
        self.session.answer(question.id, event.option_id or UNKNOWN)
        self.action_forward()

    def action_pick(self, number: int) -> None:
        options = self.query_one("#choices", OptionList)
        index = options.option_count - 1 if number == 0 else number - 1
        if 0 <= index < options.option_count:
            options.highlighted = index
            options.action_select()

    def action_back(self) -> None:
        if self.index == 0:
            self.dismiss()
        else:
            self.index -= 1
            self.show_step()

    def action_forward(self) -> None:
        if self.index + 1 < len(self.session.questions()):
            self.index += 1
            self.show_step()
        else:
            self.app.action_recommend()
