"""The template's store questions (any ``*_store`` question with choices) as Select fields, plus
every question the answers set (advisor/model/template_settings.py), pre-filled, each with its reason."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Select, Static

STORE_QUESTION = re.compile(r"_store$")


class StoreChoices(Vertical):
    DEFAULT_CSS = """
    StoreChoices { height: auto; }
    StoreChoices .setting-reason { padding: 0 0 1 18; color: $text-muted; }
    """

    def __init__(self, questions: Sequence[Any], *, settings: Sequence[Any] = (), id: str | None = None) -> None:
        super().__init__(id=id)
        self.settings = {s.key: s for s in settings}
        self.questions = [q for q in questions if (STORE_QUESTION.search(q.id) or q.id in self.settings) and q.choices]

    def compose(self) -> ComposeResult:
        for q in self.questions:
            choices = [str(c) for c in q.choices]
            setting = self.settings.get(q.id)
            if setting is not None and setting.value in choices:
                default = setting.value  # what the answers imply, not the template's default
            else:
                default = str(q.default) if str(q.default) in choices else choices[0]
            with Horizontal(classes="field"):
                yield Label(q.id.replace("_", " ").capitalize(), classes="field-label", id=f"label-{q.id}")
                yield Select([(c, c) for c in choices], value=default, allow_blank=False, id=f"store-{q.id}")
            if setting is not None:
                yield Static(self.reason(q.id, default), classes="setting-reason", id=f"reason-{q.id}")

    def reason(self, qid: str, value: str) -> Text:
        setting = self.settings[qid]
        if value == setting.value:
            return Text.assemble(("from your answers: ", "italic"), setting.reason)
        return Text.assemble((f"your answers suggest {setting.value}: ", "bold"), setting.reason)

    def on_select_changed(self, event: Select.Changed) -> None:
        qid = (event.select.id or "").removeprefix("store-")
        if qid in self.settings:  # the event goes on to the screen (its preview)
            self.query_one(f"#reason-{qid}", Static).update(self.reason(qid, str(event.value)))

    def values(self) -> dict[str, str]:
        return {q.id: str(self.query_one(f"#store-{q.id}", Select).value) for q in self.questions}
