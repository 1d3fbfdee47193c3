"""``precedents.yaml``: past incidents the review compares a team's answers with — public threads
whose answers, current design and real fix a reviewer decided (tests/calibration's tuned rows,
written out by ``tests/calibration/precedents.py``; never a held-out row).

Every problem is a :class:`CatalogError` naming the file, the row and the reason: an unknown
strategy, a fix that is not one of its controls, an unknown question or value. A catalog without
the file ranks by the evidence rules alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from advisor.model.catalog import SYMPTOMS, Precedent, Question, Strategy
from advisor.model.parsed_cache import read_yaml
from advisor.model.yaml_reader import Reader

PRECEDENTS_FILE = "precedents.yaml"


def _features(r: Reader, questions: Mapping[str, Question]) -> frozenset[tuple[str, str]]:
    """The row's answers as (question, value) pairs; a multiple-value question gives one per value."""
    answers = r.child("answers")
    pairs = set()
    for qid, value in answers.data.items():
        question = questions.get(str(qid))
        if question is None:
            raise answers.error(str(qid), "unknown question")
        values = answers.texts(qid) if question.multiple else (answers.text(qid),)
        for v in values:
            if v not in question.values:
                raise answers.error(str(qid), f"unknown value {v!r}; valid: {', '.join(question.values)}")
            pairs.add((str(qid), v))
    if not any(q == SYMPTOMS for q, _ in pairs):
        raise answers.error(SYMPTOMS, "a precedent says what the team saw")
    return frozenset(pairs)


def load_precedents(path: Path, questions: Mapping[str, Question], strategies: Sequence[Strategy]) -> tuple[Precedent, ...]:
    if not path.exists():
        return ()
    top = Reader(path, read_yaml(path))
    top.only("precedents")
    by_id = {s.id: s for s in strategies}
    rows: list[Precedent] = []
    seen: set[str] = set()
    for i, raw in enumerate(top.items("precedents")):
        r = Reader(path, raw, f"precedents[{i}]")
        r.only("id", "source", "current", "fix", "answers")
        pid = r.text("id")
        if pid in seen:
            raise r.error("id", f"duplicate precedent id {pid!r}")
        seen.add(pid)
        strategy = by_id.get(r.text("current"))
        if strategy is None:
            raise r.error("current", f"unknown strategy; known: {', '.join(by_id)}")
        fix = r.text("fix")
        if fix not in {c.id for c in strategy.controls}:
            raise r.error("fix", f"not a control of {strategy.id}")
        rows.append(Precedent(pid, r.text("source"), strategy.id, fix, _features(r, questions)))
    return tuple(rows)
