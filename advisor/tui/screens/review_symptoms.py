"""Review, step 1: what the team saw (several symptoms), when it happened, what the recorded progress
said afterwards and who owns the engine.

The findings are ranked by this evidence (``strategies/evidence.yaml``): the first finding is
the likeliest cause of what was seen. Every answer goes into the session's answers, so the
exported answers file and ``advisor review --answers`` rank the same way.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, OptionList, SelectionList, Static
from textual.widgets.option_list import Option
from textual.widgets.selection_list import Selection

from advisor.model.catalog import MULTIPLE_SEPARATOR, SYMPTOMS, answer_values
from advisor.tui.screens.review_base import EVIDENCE_LISTS, ReviewStepScreen
from advisor.tui.session import UNKNOWN
from advisor.tui.widgets.review_steps import ReviewSteps




class SymptomsScreen(ReviewStepScreen):
    """space (or 1-7) toggles a symptom; tab (or enter) moves through when it happened, what the
    recorded progress said and the engine's owner; → (or enter on the owner) goes on."""

    STEP = 0

    BINDINGS = [
        Binding("escape,left", "back", "Back", key_display="←", priority=True),
        Binding("right", "next", "Strategy", key_display="→", priority=True),
        *(Binding(str(n), f"toggle_symptom({n})", "Toggle", show=n == 1, key_display="1-7") for n in range(1, 8)),
    ]


    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="review-symptoms"):
            yield ReviewSteps(id="review-steps")
            yield Static("What did you see, or what do you fear? (space toggles several; tab: the lists)", classes="review-asks")
            yield SelectionList[str](id="symptom-list")
            with Horizontal(id="review-evidence"):  # side by side: they fit above the help at 80x24
                for widget_id, _, _ in EVIDENCE_LISTS:
                    yield OptionList(id=widget_id)
            yield Static("", id="symptom-help")
        yield Footer()

    def on_mount(self) -> None:
        session = self.session
        self.show_steps()
        seen = set(answer_values(session.answers, SYMPTOMS))
        symptoms = self.query_one("#symptom-list", SelectionList)
        for n, choice in enumerate(session.catalog.question(SYMPTOMS).choices, start=1):
            symptoms.add_option(Selection(f"{n} {choice.name}", choice.id, choice.id in seen))
        for widget_id, question_id, title in EVIDENCE_LISTS:
            self._fill(f"#{widget_id}", question_id, title)
        symptoms.focus()
        self.show_help()

    def _fill(self, selector: str, question_id: str, title: str) -> None:
        """One single-answer list: its choices (short labels), "I don't know", the answer highlighted."""
        options = self.query_one(selector, OptionList)
        options.border_title = title
        question = self.session.catalog.question(question_id)
        for choice in question.choices:
            options.add_option(Option(choice.name, id=choice.id))
        options.add_option(Option("I don't know", id=UNKNOWN))
        ids = [c.id for c in question.choices]
        answer = self.session.answers.get(question_id)
        options.highlighted = ids.index(answer) if answer in ids else len(ids)

    def save(self) -> None:
        """The session's answers follow every change (the export writes them)."""
        chosen = self.query_one("#symptom-list", SelectionList).selected
        order = self.session.catalog.question(SYMPTOMS).values
        value = MULTIPLE_SEPARATOR.join(v for v in order if v in chosen)
        self.session.answer(SYMPTOMS, value or UNKNOWN)

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged[str]) -> None:
        self.save()

    def show_help(self) -> None:
        """Under the lists: the help of the highlighted choice of the list that has the focus."""
        catalog = self.session.catalog
        lists = [(self.query_one(f"#{widget_id}", OptionList), question_id) for widget_id, question_id, _ in EVIDENCE_LISTS]
        focused = next(((o, o.highlighted, q) for o, q in lists if o.has_focus and o.highlighted is not None), None)
        if focused is not None:
            options, index, question_id = focused
            option_id = options.get_option_at_index(index or 0).id
            choice = next((c for c in catalog.question(question_id).choices if c.id == option_id), None)
            text = f"{choice.label}. {choice.help}" if choice else "Leave it open."
        else:
            symptoms = self.query_one("#symptom-list", SelectionList)
            index = symptoms.highlighted if symptoms.highlighted is not None else 0
            text = catalog.question(SYMPTOMS).choice(str(symptoms.get_option_at_index(index).value)).help
        self.query_one("#symptom-help", Static).update(text)

    def on_selection_list_selection_highlighted(self, event: SelectionList.SelectionHighlighted[str]) -> None:
        self.show_help()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.show_help()

    def on_descendant_focus(self) -> None:
        self.show_help()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        ids = [widget_id for widget_id, _, _ in EVIDENCE_LISTS]
        if event.option_list.id not in ids:
            return
        at = ids.index(event.option_list.id)
        self.session.answer(EVIDENCE_LISTS[at][1], event.option_id or UNKNOWN)
        if at + 1 < len(EVIDENCE_LISTS):  # enter answers one list and moves on to the next; the last goes on
            self.query_one(f"#{ids[at + 1]}", OptionList).focus()
        else:
            self.action_next()

    def action_toggle_symptom(self, number: int) -> None:
        symptoms = self.query_one("#symptom-list", SelectionList)
        if 0 < number <= symptoms.option_count:
            symptoms.toggle(symptoms.get_option_at_index(number - 1).value)  # SelectedChanged saves

    def action_next(self) -> None:
        from advisor.tui.screens.review_current import CurrentStrategyScreen

        self.save()
        for widget_id, question_id, _ in EVIDENCE_LISTS:
            options = self.query_one(f"#{widget_id}", OptionList)
            if options.has_focus and options.highlighted is not None:  # → keeps the highlighted answer
                self.session.answer(question_id, options.get_option_at_index(options.highlighted).id or UNKNOWN)
        self.app.push_screen(CurrentStrategyScreen())

    def action_back(self) -> None:
        self.save()
        self.dismiss()
