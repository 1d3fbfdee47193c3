"""The decision model's own files: ``conflicts.yaml`` (answers that contradict each other, and the
answers each conflict makes meaningless) and ``decision.yaml`` (the close-call margin)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from advisor.model.catalog import Conflict, Question
from advisor.model.condition_reader import read_url, read_when
from advisor.model.parsed_cache import read_yaml
from advisor.model.yaml_reader import Reader


def load_conflicts(path: Path, questions: Mapping[str, Question]) -> tuple[Conflict, ...]:
    if not path.exists():
        return ()
    top = Reader(path, read_yaml(path))
    out: list[Conflict] = []
    for i, raw in enumerate(top.items("conflicts")):
        c = Reader(path, raw, f"conflicts[{i}]")
        c.only("id", "when", "message", "revisit", "reference", "ignore")
        revisit = c.texts("revisit")
        for qid in revisit:
            if qid not in questions:
                raise c.error("revisit", f"unknown question {qid!r}; known: {', '.join(questions)}")
        cid = c.text("id")
        if any(other.id == cid for other in out):
            raise c.error("id", f"duplicate conflict id {cid!r}")
        when = read_when(c, questions)
        ignore = c.texts("ignore", required=False)
        for qid in ignore:
            if qid not in when:
                raise c.error("ignore", f"{qid!r} is not in `when`: a conflict can only void an answer it names")
        out.append(Conflict(cid, when, c.text("message"), revisit, read_url(c, "reference"), ignore))
    return tuple(out)


def load_close_call_margin(path: Path) -> float:
    if not path.exists():
        return 2.0
    top = Reader(path, read_yaml(path))
    top.only("close_call_margin")
    margin = top.number("close_call_margin")
    if margin < 0:
        raise top.error("close_call_margin", "must be zero or more")
    return margin
