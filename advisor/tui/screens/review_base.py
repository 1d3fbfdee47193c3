"""What every step of the review walkthrough shares: the session and the step bar at the top."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.screen import Screen

from advisor.model.catalog import DUPLICATE_IDS, ENGINE_OWNER, RECOVERY_POINT_FOUND, TRIGGER
from advisor.tui.session import Session
from advisor.tui.widgets.review_steps import ReviewSteps

if TYPE_CHECKING:
    from advisor.tui.base import AdvisorAppBase


#: The first step's single-answer lists, side by side, in the order tab and enter walk them:
#: (widget id, question, its short title). The findings step sends the team back to one of them.
EVIDENCE_LISTS = (
    ("trigger", TRIGGER, "When it struck"),
    ("progress-found", RECOVERY_POINT_FOUND, "Progress said"),
    ("copies", DUPLICATE_IDS, "Copies' ids"),
    ("engine-owner", ENGINE_OWNER, "Engine owner"),
)


class ReviewStepScreen(Screen[None]):
    """A step of the review; ``STEP`` is its 0-based place in ``REVIEW_STEPS``."""

    STEP: ClassVar[int] = 0
    app: AdvisorAppBase

    @property
    def session(self) -> Session:
        assert self.app.session is not None
        return self.app.session

    def show_steps(self) -> None:
        """The step bar: where the user is, and how many answers the review rests on."""
        session = self.session
        self.query_one(ReviewSteps).show(self.STEP, len(session.answers), len(session.catalog.questions))
