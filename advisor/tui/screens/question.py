"""The walkthrough: one question per step, keyboard first, back and forward.

Questions whose answer can no longer change the pick are skipped (``engine.open_questions``);
``a`` asks them all again. With ``only`` the screen revisits just those questions (the
recommendation's jump keys) and then goes back to the recommendation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, OptionList, Static
from textual.widgets.option_list import Option

from advisor.tui.session import UNKNOWN, Session
from advisor.tui.widgets.step_bar import StepBar

if TYPE_CHECKING:
    from advisor.tui.base import AdvisorAppBase

NUMBER_KEYS = [Binding(str(n), f"pick({n})", "Pick", show=False) for n in range(1, 10)]


class QuestionScreen(Screen[None]):
    """Steps through ``session.questions()``; enter or a number answers and moves on."""

    BINDINGS = [
        Binding("left", "back", "Back", key_display="←", priority=True),
        Binding("escape", "leave", "Back", show=False, priority=True),
        Binding("right", "forward", "Next", key_display="→", priority=True),
        Binding("1", "pick(1)", "Pick", key_display="1-9"),
        *NUMBER_KEYS[1:],
        Binding("0", "pick(0)", "Don't know"),
        Binding("a", "toggle_all", "Ask all"),
    ]

    app: AdvisorAppBase

    def __init__(self, index: int = 0, *, only: Sequence[str] = ()) -> None:
        super().__init__()
        self.index = index
        self.only = tuple(only)
        """Revisit just these question ids, then return (empty: the whole walkthrough)."""

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
        if self.only:
            self.index = self.session.question_index(self.only[0])
        elif not self.session.asks(self.session.questions()[self.index].id):
            self.index = self.session.next_step(self.index) or self.index
        self.show_step()

    @property
    def session(self) -> Session:
        assert self.app.session is not None
        return self.app.session

    def show_step(self) -> None:
        session = self.session
        questions = session.questions()
        question = questions[self.index]
        ids = [q.id for q in questions]
        asked = {q for q in ids if session.asks(q)}
        revisiting = None
        if self.only:
            n = self.only.index(question.id) + 1 if question.id in self.only else 1
            revisiting = (n, len(self.only))
        self.query_one(StepBar).show(
            self.index, ids, question.group, set(session.answers), asked, session.show_all, revisiting
        )
        self.query_one("#asks", Static).update(question.asks)
        self.query_one("#question-help", Static).update(question.help)
        current = session.answers.get(question.id)
        options = self.query_one("#choices", OptionList)
        options.clear_options()
        for n, choice in enumerate(question.choices, start=1):
            mark = " ✔" if choice.id == current else ""
            key = str(n) if n < 10 else " "
            options.add_option(Option(f"{key}  {choice.label}{mark}", id=choice.id))
        options.add_option(Option("0  I don't know", id=UNKNOWN))
        choice_ids = [c.id for c in question.choices]
        options.highlighted = choice_ids.index(current) if current in choice_ids else 0
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

    def action_toggle_all(self) -> None:
        self.session.show_all = not self.session.show_all
        self.show_step()

    def _step(self, step: int) -> int | None:
        """The next or previous question of this walk (None: past its end)."""
        if self.only:
            ids = [q.id for q in self.session.questions()]
            here = self.only.index(ids[self.index]) if ids[self.index] in self.only else 0
            there = here + step
            return ids.index(self.only[there]) if 0 <= there < len(self.only) else None
        return self.session.next_step(self.index, step)

    def action_leave(self) -> None:
        """escape: the previous question; when revisiting, straight back to the recommendation."""
        if self.only:
            self.dismiss()
        else:
            self.action_back()

    def action_back(self) -> None:
        previous = self._step(-1)
        if previous is None:
            self.dismiss()
        else:
            self.index = previous
            self.show_step()

    def action_forward(self) -> None:
        following = self._step(1)
        if following is not None:
            self.index = following
            self.show_step()
        elif self.only:
            self.dismiss()
        else:
            self.app.action_recommend()
