"""What the user has decided so far: answers, the chosen strategy, the design under review.

One :class:`Session` lives on the app; screens read and update it. Everything here
is plain Python (no Textual) so it can be tested without running the app.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisor.model.answers import CurrentDesign
    from advisor.model.catalog import Catalog, Question
    from advisor.model.recommendation import Recommendation
    from advisor.review.result import Review

UNKNOWN = "__unknown__"
"""Option id for "I don't know": the question is left out of the answers."""


@dataclass
class Session:
    catalog: Catalog
    workdir: Path
    answers: dict[str, str] = field(default_factory=dict)
    chosen: str | None = None
    """A strategy id the user picked instead of the top one (None: the top pick)."""
    generated: Any = None
    """The last ``scaffold.Generated`` of this session, if any."""
    drill_options: dict[str, Any] = field(default_factory=dict)
    today: date | None = None
    """The decision record's date (None: today); fixed in the snapshot tests."""
    show_all: bool = False
    """Ask every question, even those whose answer can no longer change the pick."""
    current: CurrentDesign | None = None
    """The design under review (its strategy and controls), once the review walkthrough set it."""
    context: str | None = None
    """The incident or the job in the team's words (the decision record's context)."""
    probe_report: dict[str, Any] | None = None
    """The last report of "probe my job" (``advisor.probe.runner``): the decision record carries it as evidence."""
    _open: dict[frozenset[tuple[str, str]], frozenset[str]] = field(default_factory=dict, repr=False)

    def questions(self) -> tuple[Question, ...]:
        """The walkthrough order: the three recovery-point questions, then the traits. The evidence
        (what the team saw, who owns the engine) is asked by the review walkthrough instead."""
        qs = self.catalog.questions
        first = tuple(q for q in qs if q.group == "recovery_point")
        return first + tuple(q for q in qs if q.group not in ("recovery_point", "evidence"))

    def open_questions(self) -> frozenset[str]:
        """Unanswered questions whose answer can still change the pick (cached per answer set)."""
        key = frozenset(self.answers.items())
        if key not in self._open:
            from advisor.model.engine import open_questions

            self._open[key] = frozenset(open_questions(self.answers, self.catalog))
        return self._open[key]

    def asks(self, question_id: str) -> bool:
        """Does the walkthrough stop at this question? Answered ones and those that still matter do."""
        return self.show_all or question_id in self.answers or question_id in self.open_questions()

    def next_step(self, index: int, step: int = 1) -> int | None:
        """The next (``step=-1``: previous) walkthrough index the walkthrough stops at, or None."""
        questions = self.questions()
        i = index + step
        while 0 <= i < len(questions):
            if self.asks(questions[i].id):
                return i
            i += step
        return None

    def answer(self, question_id: str, value: str) -> None:
        if value == UNKNOWN:
            self.answers.pop(question_id, None)
        else:
            self.answers[question_id] = value

    def recommend(self) -> Recommendation:
        from advisor.model.engine import recommend

        return recommend(dict(self.answers), self.catalog)

    def review(self) -> Review:
        """The review the decision record renders: what `advisor review --answers FILE` computes
        from the answers file this session exports (``--chosen`` only when the user picked one)."""
        from advisor.review.judge import review

        return review(dict(self.answers), self.catalog, current=self.current, chosen=self.chosen, context=self.context)

    def decision_record(self, review: Review | None = None) -> str:
        from advisor.review.render import render

        probe = None
        if self.probe_report is not None:
            from advisor.probe.report import evidence_lines

            probe = evidence_lines(self.probe_report)
        return render(review or self.review(), self.catalog, date=self.today, probe=probe)

    def answers_file(self) -> str:
        from advisor.model.answers import dump_answers

        return dump_answers(self.answers, self.catalog, context=self.context, current=self.current)

    def chosen_id(self, recommendation: Recommendation) -> str:
        ids = [r.strategy.id for r in recommendation.ranking]
        if self.chosen in ids:
            return str(self.chosen)
        return recommendation.top.strategy.id

    def resolve(self, text: str) -> Path:
        """A path typed by the user, relative to the session's working directory."""
        path = Path(text.strip()).expanduser()
        return path if path.is_absolute() else self.workdir / path

    def question_index(self, question_id: str) -> int:
        return [q.id for q in self.questions()].index(question_id)

    def choice_label(self, question_id: str, value: str) -> str:
        try:
            question = self.catalog.question(question_id)
        except Exception:  # an id the catalog doesn't know: show it raw
            return value
        for choice in question.choices:
            if choice.id == value:
                return choice.label
        return value
