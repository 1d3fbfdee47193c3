"""Review, step 4: the findings (each saying why it ranks where it does), the fit verdict, this
week's fixes, the target design and the verification plan, rendered exactly as the decision
record (``advisor review``) writes them."""

from __future__ import annotations

from rich.markdown import Markdown
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Footer, Header, Static

from advisor.errors import AdvisorError
from advisor.tui.screens.review_base import EVIDENCE_LISTS, ReviewStepScreen
from advisor.tui.widgets.review_steps import ReviewSteps


RECORD_TAIL = "\n## Context and problem statement"
"""Where the record's review part ends and its MADR sections (shown on the export screen) begin."""


def findings_part(record: str) -> str:
    """The decision record from its findings to its verification plan (title and status lines dropped)."""
    head, _, _ = record.partition(RECORD_TAIL)
    start = head.find("\n## ")
    return head[start + 1 :] if start >= 0 else head


class FindingsScreen(ReviewStepScreen):

    STEP = 3
    BINDINGS = [
        Binding("escape,left", "back", "Back", key_display="←", priority=True),
        Binding("e,right", "app.export", "Export", key_display="e/→", priority=True),
        Binding("p", "probe", "Probe my job"),
        Binding("t", "tell_apart", "Tell 1 and 2 apart"),
    ]

    markdown = ""
    """The record's findings part, as shown (Markdown)."""
    apart: tuple[str, ...] = ()
    """When findings 1 and 2 are a close call: the open questions that would tell them apart."""

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="review-findings"):
            yield ReviewSteps(id="review-steps")
            yield Static("", id="findings-title", classes="review-asks")
            yield VerticalScroll(Static("", id="findings-text"), id="findings")
        yield Footer()

    def on_mount(self) -> None:
        self.show()
        self.query_one("#findings", VerticalScroll).focus()

    def show(self) -> None:
        session = self.app.session
        assert session is not None
        self.show_steps()
        title = self.query_one("#findings-title", Static)
        body = self.query_one("#findings-text", Static)
        try:
            r = session.review()
            record = session.decision_record(r)
        except AdvisorError as exc:
            title.update(Text.assemble(("The review could not be made: ", "bold red"), str(exc)))
            return
        current = session.catalog.strategy(session.current.strategy).name if session.current else "none"
        self.apart = tuple(x.question for x in r.separators)
        close = (" · 1 and 2 close: ", ("t", "bold"), " tells them apart") if self.apart else ()
        title.update(Text.assemble("Current: ", (current, "bold"), " · decided: ", (r.target.strategy.name, "bold"), *close))
        self.refresh_bindings()  # `t` shows only for a close call
        self.markdown = findings_part(record)
        body.update(Markdown(self.markdown))

    def action_probe(self) -> None:
        """Probe my job: its report joins the record's verification plan as evidence."""
        from advisor.tui.screens.probe import ProbeScreen

        self.app.push_screen(ProbeScreen(), lambda _: self.show())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return bool(self.apart) if action == "tell_apart" else True

    async def action_tell_apart(self) -> None:
        """Back to the first step, on the list of the first question that would tell findings 1
        and 2 apart (the record names its answers); → comes back here ranked again."""
        widget = next(w for w, question, _ in EVIDENCE_LISTS if question == self.apart[0])
        while isinstance(self.app.screen, ReviewStepScreen) and self.app.screen.STEP > 0:
            await self.app.pop_screen()
        self.app.screen.query_one(f"#{widget}").focus()

    def action_back(self) -> None:
        self.dismiss()
