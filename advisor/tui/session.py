"""What the user has decided so far: answers, the chosen strategy, the generated project.

One :class:`Session` lives on the app; screens read and update it. Everything here
is plain Python (no Textual) so it can be tested without running the app.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisor.catalog import Catalog, Question
    from advisor.engine import Recommendation

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

    def questions(self) -> tuple[Question, ...]:
        """The walkthrough order: the three recovery-point questions, then the traits."""
        qs = self.catalog.questions
        first = tuple(q for q in qs if q.group == "recovery_point")
        return first + tuple(q for q in qs if q.group != "recovery_point")

    def answer(self, question_id: str, value: str) -> None:
        if value == UNKNOWN:
            self.answers.pop(question_id, None)
        else:
            self.answers[question_id] = value

    def recommend(self) -> Recommendation:
        from advisor.engine import recommend

        return recommend(dict(self.answers), self.catalog)

    def chosen_id(self, recommendation: Recommendation) -> str:
        ids = [r.strategy.id for r in recommendation.ranking]
        if self.chosen in ids:
            return str(self.chosen)
        return recommendation.top.strategy.id

    def resolve(self, text: str) -> Path:
        """A path typed by the user, relative to the session's working directory."""
        path = Path(text.strip()).expanduser()
        return path if path.is_absolute() else self.workdir / path

    def choice_label(self, question_id: str, value: str) -> str:
        try:
            question = self.catalog.question(question_id)
        except Exception:  # an id the catalog doesn't know: show it raw
            return value
        for choice in question.choices:
            if choice.id == value:
                return choice.label
        return value
