"""Answers: ``question_id → value``, from a YAML file, ``--set id=value`` flags or the TUI.

Every source goes through :func:`validate_answers`, which rejects unknown question ids and
values with the valid choices listed (:class:`AnswersError`). A question may be left out or
answered ``unknown`` ("I don't know"): both mean unanswered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

from advisor.catalog import Catalog
from advisor.errors import AnswersError

UNKNOWN = "unknown"  # "I don't know" — the same as leaving the question out


def validate_answers(raw: Mapping[str, object], catalog: Catalog, *, source: str = "answers") -> dict[str, str]:
    """Return the answered questions in catalog order, or raise AnswersError naming the problem."""
    known = {q.id: q for q in catalog.questions}
    for key, value in raw.items():
        if key not in known:
            raise AnswersError(
                f"{source}: unknown question {key!r}. Valid questions: {', '.join(known)}."
                " Run `advisor questions` to see each one with its values."
            )
        if value is None or value == UNKNOWN:
            continue
        if not isinstance(value, str) or value not in known[key].values:
            raise AnswersError(
                f"{source}: {key}: {value!r} is not a valid value."
                f" Valid values: {', '.join(known[key].values)} (or {UNKNOWN})."
            )
    # Catalog order keeps output stable whatever order the user wrote.
    return {q: str(raw[q]) for q in known if raw.get(q) not in (None, UNKNOWN)}


def load_answers_file(path: Path, catalog: Catalog) -> dict[str, str]:
    """Read a YAML answers file (``question_id: value`` per line)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AnswersError(f"{path}: no such answers file.") from None
    except IsADirectoryError:
        raise AnswersError(f"{path}: is a directory, expected a YAML answers file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AnswersError(f"{path}: cannot be read ({exc}).") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise AnswersError(
            f"{path}: is not valid YAML{where}: {getattr(exc, 'problem', None) or exc}."
            " An answers file holds one `question_id: value` per line."
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AnswersError(f"{path}: expected a mapping of `question_id: value`, got a {type(data).__name__}.")
    return validate_answers(data, catalog, source=str(path))


def parse_set_flags(items: Iterable[str], catalog: Catalog) -> dict[str, str]:
    """Turn ``["duration=hours", ...]`` into validated answers."""
    raw: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise AnswersError(f"--set {item!r}: expected QUESTION=VALUE, e.g. --set duration=hours.")
        raw[key.strip()] = value.strip()
    return validate_answers(raw, catalog, source="--set")


def dump_answers(answers: Mapping[str, str], catalog: Catalog) -> str:
    """YAML an answers file can be loaded from again, each question commented with its text."""
    lines = ["# Continuity Advisor answers — `advisor recommend --answers THIS_FILE`"]
    for q in catalog.questions:
        value = answers.get(q.id)
        lines.append(f"# {q.asks} ({' | '.join(q.values)})")
        lines.append(f"{q.id}: {value}" if value else f"# {q.id}: {UNKNOWN}")
    return "\n".join(lines) + "\n"
