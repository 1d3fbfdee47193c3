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

from advisor.model.catalog import SYMPTOMS, Question, Strategy
from advisor.model.parsed_cache import read_yaml
from advisor.model.precedent import Precedent
from advisor.model.yaml_reader import Reader

PRECEDENTS_FILE = "precedents.yaml"


def _features(r: Reader, valid: Mapping[str, tuple[bool, frozenset[str]]]) -> frozenset[tuple[str, str]]:
    """The row's answers as (question, value) pairs; a multiple-value question gives one per value.
    Checked with plain lookups (a catalog load reads some 300 rows; a Reader is made only to
    name a problem)."""
    answers = r.data.get("answers")
    if not isinstance(answers, dict):
        raise r.error("answers", "expected a mapping of question ids to answers")
    pairs = set()
    for qid, value in answers.items():
        if qid not in valid:
            raise r.child("answers").error(str(qid), "unknown question")
        multiple, values = valid[qid]
        given = value if multiple and isinstance(value, list) else [value]
        for v in given:
            if v not in values:
                raise r.child("answers").error(str(qid), f"unknown value {v!r}; valid: {', '.join(sorted(values))}")
            pairs.add((qid, v))
    if not any(q == SYMPTOMS for q, _ in pairs):
        raise r.child("answers").error(SYMPTOMS, "a precedent says what the team saw")
    return frozenset(pairs)


def load_precedents(path: Path, questions: Mapping[str, Question], strategies: Sequence[Strategy]) -> tuple[Precedent, ...]:
    if not path.exists():
        return ()
    top = Reader(path, read_yaml(path))
    top.only("precedents")
    by_id = {s.id: s for s in strategies}
    controls = {s.id: {c.id for c in s.controls} for s in strategies}
    valid = {q.id: (q.multiple, frozenset(q.values)) for q in questions.values()}
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
        if fix not in controls[strategy.id]:
            raise r.error("fix", f"not a control of {strategy.id}")
        rows.append(Precedent(pid, r.text("source"), strategy.id, fix, _features(r, valid)))
    return tuple(rows)
