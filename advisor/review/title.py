"""The decision record's title, in the team's own words: the name they give (``--title``), else
the first sentence of their ``context:``, else the job as their answers describe it ("the Airflow
task", "the Kafka consumer", "the batch job") — never the same title for every record."""

from __future__ import annotations

import re

MAX_TITLE = 72  # characters of the context kept in a heading
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CLAUSE_BREAKS = ("; ", ": ", " — ", " - ", ", ")


def first_sentence(context: str) -> str:
    """The context's first sentence, cut at a clause (or a word) to fit a heading."""
    text = " ".join(context.split()).lstrip("#>*-` ").strip()
    sentence = _SENTENCE_END.split(text, maxsplit=1)[0].rstrip(".!? ")
    if len(sentence) <= MAX_TITLE:
        return sentence
    for mark in _CLAUSE_BREAKS:  # the first clause, when it says enough on its own
        cut = sentence.find(mark, 20)
        if 0 < cut <= MAX_TITLE:
            return sentence[:cut]
    return sentence[: MAX_TITLE + 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def heading(strategy_name: str, *, title: str | None, context: str | None, job: str) -> str:
    """``# …`` of the record: the team's name for the job, their first sentence, or ``job``."""
    if title:
        return f"# Continuity mechanism for {title}: {strategy_name}"
    if context and first_sentence(context):
        lead = first_sentence(context)
        return f"# {lead[0].upper()}{lead[1:]} — {strategy_name}"
    return f"# Continuity mechanism for {job}: {strategy_name}"
