"""Reading the catalog's conditions over answers (``{question_id: value | [values]}``) and its
public reference URLs, checked against the questions; every loader of a catalog file uses them."""

from __future__ import annotations

from collections.abc import Mapping

from advisor.model.catalog import Question
from advisor.model.words import Worded
from advisor.model.yaml_reader import Reader


def read_conditions(r: Reader, key: str, questions: Mapping[str, Question]) -> dict[str, tuple[str, ...]]:
    """``{question_id: value | [values]}`` checked against the questions (none: empty)."""
    raw = r.data.get(key)
    if raw is None:
        return {}
    cond = Reader(r.path, raw, r.key_of(key))
    out: dict[str, tuple[str, ...]] = {}
    for qid, values in cond.data.items():
        if qid not in questions:
            raise cond.error(qid, f"unknown question; known: {', '.join(questions)}")
        if questions[qid].multiple:  # a condition compares one answer; several values never match it
            raise cond.error(qid, "takes several values at once: only the review's evidence rules read it")
        values = [values] if isinstance(values, str) else values
        if not isinstance(values, list) or not values:
            raise cond.error(qid, "expected a value or a list of values")
        for v in values:
            if v not in questions[qid].values:
                raise cond.error(qid, f"unknown value {v!r}; valid: {', '.join(questions[qid].values)}")
        out[qid] = tuple(values)
    return out


def read_when(r: Reader, questions: Mapping[str, Question]) -> dict[str, tuple[str, ...]]:
    """A required ``when:`` condition: at least one `question: value`."""
    when = read_conditions(r, "when", questions)
    if not when:
        raise r.error("when", "a condition needs at least one `question: value`")
    return when


def read_url(r: Reader, key: str) -> str | None:
    """An optional public URL (https://...) a user can open."""
    if r.data.get(key) is None:
        return None
    url = r.text(key)
    # A stack may name its own documentation ([[lease_docs]]): every wording must be a URL.
    for variant in url.words.variants(url.template) if isinstance(url, Worded) else {url}:
        if not variant.startswith(("https://", "http://")) or any(ch.isspace() for ch in variant):
            raise r.error(key, f"expected a public URL (https://...) a user can open, not {variant!r}")
    return url
