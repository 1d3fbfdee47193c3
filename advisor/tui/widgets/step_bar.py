"""Where the user is in the walkthrough, truthfully: which questions are answered, which are
still to ask, which are skipped because no answer to them can change the pick any more.

    ● ● ● │ ◉ ○ · · ○ …
    question 4 of 17 · your job · 3 more to ask, 9 skipped (a: ask all)
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

ANSWERED, CURRENT, TO_ASK, SKIPPED = "●", "◉", "○", "·"


def step_marks(index: int, ids: Sequence[str], answered: set[str], asked: set[str]) -> list[str]:
    """One mark per question: current, answered, still to ask, or skipped."""
    marks = []
    for i, qid in enumerate(ids):
        if i == index:
            marks.append(CURRENT)
        elif qid in answered:
            marks.append(ANSWERED)
        elif qid in asked:
            marks.append(TO_ASK)
        else:
            marks.append(SKIPPED)
    return marks


def step_summary(
    index: int, marks: Sequence[str], group: str, show_all: bool, revisiting: tuple[int, int] | None = None
) -> str:
    """``revisiting=(n, total)``: the recommendation's jump keys walk just those questions."""
    ahead = marks[index + 1 :]
    to_ask = sum(1 for m in ahead if m == TO_ASK)
    skipped = sum(1 for m in marks if m == SKIPPED)
    label = "recovery point" if group == "recovery_point" else "your job"
    text = f"question {index + 1} of {len(marks)} · {label} · "
    if revisiting is not None:
        return text + f"revisiting {revisiting[0]} of {revisiting[1]} (escape returns)"
    text += f"{to_ask} more to ask" if to_ask else "the last one to ask"
    if show_all:
        text += " (asking all: a skips again)"
    elif skipped:
        text += f", {skipped} skipped (a: ask all)"
    return text


class StepBar(Static):
    DEFAULT_CSS = """
    StepBar { height: 2; color: $text-muted; }
    """

    def show(
        self,
        index: int,
        ids: Sequence[str],
        group: str,
        answered: set[str],
        asked: set[str],
        show_all: bool = False,
        revisiting: tuple[int, int] | None = None,
    ) -> None:
        marks = step_marks(index, ids, answered, asked)
        text = Text()
        styles = {CURRENT: "bold cyan", ANSWERED: "green", SKIPPED: "dim"}
        for i, mark in enumerate(marks):
            text.append(mark, style=styles.get(mark, ""))
            text.append(" " if i != 2 else " │ ")
        text.append("\n" + step_summary(index, marks, group, show_all, revisiting))
        self.update(text)
