"""Typed access to one YAML mapping of the catalog that names the file and the dotted key on error."""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import Any

from advisor.errors import CatalogError
from advisor.model.words import TERM, Words

# The stack words of the catalog being loaded (``advisor.model.loader.load_catalog`` sets them):
# a text naming [[terms]] is loaded as a Worded string. Unset, a [[term]] is an error: the
# questions and the stack words themselves are read before any term can be filled.
LOADING_WORDS: ContextVar[Words | None] = ContextVar("loading_words", default=None)


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
        return self.worded(key, value.strip())

    def worded(self, key: str, text: str) -> str:
        """``text`` with its [[terms]] checked against the stack words being loaded."""
        match = TERM.search(text)
        if match is None:
            return text
        words = LOADING_WORDS.get()
        if words is None:
            raise self.error(key, f"{match.group(0)} names a term, but terms are filled only in the texts"
                             " of strategies, shared pitfalls and conflicts")
        unknown = words.unknown_terms(text)
        if unknown:
            known = ", ".join(f"[[{t}]]" for t in words.defaults) or "(none: stack-words.yaml defines no terms)"
            raise self.error(key, f"unknown term [[{unknown[0]}]]; known terms: {known}")
        return words.wrap(text)

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
        return tuple(self.worded(f"{key}[{i}]", item.strip()) for i, item in enumerate(value))

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
