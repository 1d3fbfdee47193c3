"""Typed access to one YAML mapping of the catalog that names the file and the dotted key on
error, and the reading of a condition over answers (``{question: value | [values]}``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import CatalogError

if TYPE_CHECKING:
    from advisor.model.catalog import Question


class Reader:
    """Typed access to one YAML mapping that reports the file and the dotted key on error."""

    def __init__(self, path: Path, data: object, key: str = "") -> None:
        self.path, self.key = path, key
        if not isinstance(data, dict):
            raise CatalogError(path, key or "(top level)", f"expected a mapping, got {_kind(data)}")
        self.data: dict[str, Any] = data

    def key_of(self, key: str) -> str:
        return f"{self.key}.{key}" if self.key else key

    def error(self, key: str, reason: str) -> CatalogError:
        return CatalogError(self.path, self.key_of(key), reason)

    def text(self, key: str, default: str | None = None) -> str:
        value = self.data.get(key, default)
        if value is None:
            raise self.error(key, "is required (a text)")
        if isinstance(value, bool):
            raise self.error(key, "expected a text, got a boolean (YAML reads yes/no/on/off as booleans: quote it)")
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"expected a non-empty text, got {_kind(value)}")
        return value.strip()

    def number(self, key: str, default: float | None = None) -> float:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"expected a number, got {_kind(value)}")
        return float(value)

    def texts(self, key: str, required: bool = True) -> tuple[str, ...]:
        value = self.data.get(key)
        if value is None and not required:
            return ()
        if not isinstance(value, list) or not value:
            raise self.error(key, f"expected a non-empty list of texts, got {_kind(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise self.error(f"{key}[{i}]", f"expected a text, got {_kind(item)}")
        return tuple(item.strip() for item in value)

    def child(self, key: str) -> Reader:
        return Reader(self.path, self.data.get(key), self.key_of(key))

    def items(self, key: str) -> list[object]:
        value = self.data.get(key)
        if not isinstance(value, list) or not value:
            raise self.error(key, f"expected a non-empty list, got {_kind(value)}")
        return value

    def only(self, *allowed: str) -> None:
        unknown = sorted(set(self.data) - set(allowed))
        if unknown:
            raise self.error(unknown[0], f"unknown key; allowed keys: {', '.join(allowed)}")


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "a text", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def conditions(r: Reader, key: str, questions: Mapping[str, Question]) -> dict[str, tuple[str, ...]]:
    """``{question_id: value | [values]}`` checked against the questions (empty when absent)."""
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


def required_condition(r: Reader, questions: Mapping[str, Question]) -> dict[str, tuple[str, ...]]:
    """``when``: a condition with at least one question."""
    when = conditions(r, "when", questions)
    if not when:
        raise r.error("when", "a condition needs at least one `question: value`")
    return when


def optional_url(r: Reader, key: str) -> str | None:
    if r.data.get(key) is None:
        return None
    url = r.text(key)
    if not url.startswith(("https://", "http://")):
        raise r.error(key, "expected a public URL (https://...) a user can open")
    return url
