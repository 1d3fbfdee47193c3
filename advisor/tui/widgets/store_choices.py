"""The template's store questions (any ``*_store`` question with choices) as Select fields."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Select

STORE_QUESTION = re.compile(r"_store$")


class StoreChoices(Vertical):
    DEFAULT_CSS = """
    StoreChoices { height: auto; }
    """

    def __init__(self, questions: Sequence[Any], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.questions = [q for q in questions if STORE_QUESTION.search(q.id) and q.choices]

    def compose(self) -> ComposeResult:
        for q in self.questions:
            choices = [str(c) for c in q.choices]
            default = str(q.default) if str(q.default) in choices else choices[0]
            with Horizontal(classes="field"):
                yield Label(q.id.replace("_", " ").capitalize(), classes="field-label", id=f"label-{q.id}")
                yield Select([(c, c) for c in choices], value=default, allow_blank=False, id=f"store-{q.id}")

    def values(self) -> dict[str, str]:
        return {q.id: str(self.query_one(f"#store-{q.id}", Select).value) for q in self.questions}
