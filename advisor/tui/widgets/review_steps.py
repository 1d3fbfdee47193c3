"""Where the user is in the review walkthrough: symptoms › current strategy › controls › findings › export."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

REVIEW_STEPS = ("symptoms", "strategy", "controls", "findings", "export")


def review_steps_text(step: int, answered: int, total: int) -> Text:
    """``step`` is 0-based; ``answered``/``total`` say how much of the questionnaire the review rests on."""
    text = Text("Review · ", style="bold")
    for i, name in enumerate(REVIEW_STEPS):
        if i:
            text.append(" › ", style="dim")
        text.append(f"{i + 1} {name}", style="bold cyan" if i == step else ("green" if i < step else "dim"))
    text.append(f"\nJudged against {answered} of {total} answers", style="dim")
    text.append(" (s on the welcome screen asks the questions)" if answered == 0 else "", style="dim")
    return text


class ReviewSteps(Static):
    DEFAULT_CSS = """
    ReviewSteps { height: 2; margin-bottom: 1; }
    """

    def show(self, step: int, answered: int, total: int) -> None:
        self.update(review_steps_text(step, answered, total))
