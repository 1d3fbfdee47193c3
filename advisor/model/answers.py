"""Answers: ``question_id → value``, from a YAML file, ``--set id=value`` flags or the TUI.

Every source goes through :func:`validate_answers`, which rejects unknown question ids and
values with the valid choices listed (:class:`AnswersError`). A question may be left out or
answered ``unknown`` ("I don't know"): both mean unanswered. A multiple-value question
(``symptoms``) takes a list, or values joined by ","; the answers hold it as one text, its values
in the question's order joined by "," (``catalog.answer_values`` splits it).

An answers file may also carry ``context:`` (the team's own words: the incident, the job) and
``current: {strategy: ID, controls: {CONTROL_ID: yes|no|unknown}}`` (the design under review,
read by :func:`load_review_file`). YAML reads an unquoted yes/no as a boolean: true/false are
accepted as yes/no. ``recommend`` ignores both, after checking them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from advisor.errors import AnswersError
from advisor.model.catalog import MULTIPLE_SEPARATOR, Catalog, Question, answer_values
from advisor.safe_read import load_yaml

UNKNOWN = "unknown"  # "I don't know" — the same as leaving the question out
CONTROL_VALUES = ("yes", "no", UNKNOWN)  # the state of one control of the current design
REVIEW_KEYS = ("context", "current")  # answers-file keys that are not questions


@dataclass(frozen=True)
class CurrentDesign:
    """The design under review: its strategy and the state of each of its essential controls."""

    strategy: str
    controls: Mapping[str, str] = field(default_factory=dict)  # control id → yes | no | unknown

    def status(self, control_id: str) -> str:
        """yes, no or unknown (a control the team did not mention is unknown)."""
        return self.controls.get(control_id, UNKNOWN)


@dataclass(frozen=True)
class ReviewInput:
    """Everything an answers file says: the answers, the team's context and the current design."""

    answers: dict[str, str]
    context: str | None = None
    current: CurrentDesign | None = None


def multiple_value(question: Question, value: object, source: str) -> str | None:
    """A multiple-value answer — a list, or one text with values joined by "," — as the answers
    hold it: its values in the choices' order, joined by ","; None when nothing is answered."""
    items = value.split(MULTIPLE_SEPARATOR) if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise AnswersError(
            f"{source}: {question.id}: expected a list of values, e.g. [{', '.join(question.values[:2])}],"
            f" got {value!r}. Valid values: {', '.join(question.values)}."
        )
    given = {v.strip() for v in items if v.strip() and v.strip() != UNKNOWN}
    wrong = sorted(given - set(question.values))
    if wrong:
        raise AnswersError(
            f"{source}: {question.id}: {wrong[0]!r} is not a valid value."
            f" Valid values (one or several): {', '.join(question.values)} (or {UNKNOWN})."
        )
    return MULTIPLE_SEPARATOR.join(v for v in question.values if v in given) or None


def validate_answers(raw: Mapping[str, object], catalog: Catalog, *, source: str = "answers") -> dict[str, str]:
    """Return the answered questions in catalog order, or raise AnswersError naming the problem."""
    known = {q.id: q for q in catalog.questions}
    out: dict[str, str] = {}
    for key, value in raw.items():
        if key not in known:
            raise AnswersError(
                f"{source}: unknown question {key!r}. Valid questions: {', '.join(known)}"
                f" (an answers file may also hold {' and '.join(REVIEW_KEYS)})."
                " Run `advisor questions` to see each one with its values."
            )
        if value is None or value == UNKNOWN:
            continue
        if known[key].multiple:
            several = multiple_value(known[key], value, source)
            if several is not None:
                out[key] = several
            continue
        if not isinstance(value, str) or value not in known[key].values:
            raise AnswersError(
                f"{source}: {key}: {value!r} is not a valid value."
                f" Valid values: {', '.join(known[key].values)} (or {UNKNOWN})."
            )
        out[key] = value
    # Catalog order keeps output stable whatever order the user wrote.
    return {q: out[q] for q in known if q in out}


def control_value(value: object) -> str | None:
    """yes / no / unknown from a file or a flag (YAML booleans count); None when invalid."""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if value is None:
        return UNKNOWN
    if isinstance(value, str) and value.strip().lower() in CONTROL_VALUES:
        return value.strip().lower()
    return None


def validate_current(
    strategy: object, controls: Mapping[Any, object] | None, catalog: Catalog, *, source: str = "current"
) -> CurrentDesign:
    """Check a current design against the catalog: a known strategy, its own control ids, yes/no/unknown."""
    if not isinstance(strategy, str) or strategy not in catalog.strategy_ids:
        raise AnswersError(
            f"{source}: strategy {strategy!r} is not a strategy. Valid: {', '.join(catalog.strategy_ids)}."
        )
    known = [c.id for c in catalog.strategy(strategy).controls]
    out: dict[str, str] = {}
    for key, value in (controls or {}).items():
        if key not in known:
            raise AnswersError(
                f"{source}: {key!r} is not a control of {strategy}."
                f" Valid controls: {', '.join(known) or '(none)'}. See `advisor explain {strategy}`."
            )
        state = control_value(value)
        if state is None:
            raise AnswersError(f"{source}: {key}: {value!r} is not valid. Valid values: {', '.join(CONTROL_VALUES)}.")
        out[str(key)] = state
    return CurrentDesign(strategy, {c: out[c] for c in known if c in out})


def _review_extras(
    data: Mapping[str, object], catalog: Catalog, source: str
) -> tuple[str | None, CurrentDesign | None]:
    """The ``context:`` and ``current:`` keys of an answers file, validated."""
    context = data.get("context")
    if context is not None and (not isinstance(context, str) or not context.strip()):
        raise AnswersError(f"{source}: context: expected a text (the incident or the job, in your words).")
    raw = data.get("current")
    current = None
    if isinstance(raw, str):  # `current: checkpoint` — the strategy alone, every control unknown
        current = validate_current(raw, None, catalog, source=f"{source}: current")
    elif isinstance(raw, dict):
        unknown = sorted(set(map(str, raw)) - {"strategy", "controls"})
        if unknown:
            raise AnswersError(f"{source}: current: unknown key {unknown[0]!r}. Valid keys: strategy, controls.")
        controls = raw.get("controls")
        if controls is not None and not isinstance(controls, dict):
            raise AnswersError(f"{source}: current: controls: expected a mapping of `control_id: yes|no|unknown`.")
        current = validate_current(raw.get("strategy"), controls, catalog, source=f"{source}: current")
    elif raw is not None:
        raise AnswersError(
            f"{source}: current: expected `strategy: ID` and `controls: {{id: yes|no|unknown}}`, got {raw!r}."
        )
    return (context.strip() if isinstance(context, str) else None), current


def _read_answers_mapping(path: Path) -> dict[str, object]:
    # Bounded: size, nesting, no YAML aliases, strict UTF-8 (advisor/safe_read.py).
    data = load_yaml(Path(path), "answers file")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AnswersError(f"{path}: expected a mapping of `question_id: value`, got a {type(data).__name__}.")
    return data


def load_review_file(path: Path, catalog: Catalog) -> ReviewInput:
    """Read an answers file with its ``context:`` and ``current:`` (both optional)."""
    data = _read_answers_mapping(path)
    context, current = _review_extras(data, catalog, str(path))
    questions = {k: v for k, v in data.items() if k not in REVIEW_KEYS}
    return ReviewInput(validate_answers(questions, catalog, source=str(path)), context, current)


def load_answers_file(path: Path, catalog: Catalog) -> dict[str, str]:
    """Read a YAML answers file (``question_id: value`` per line; ``context``/``current`` are checked,
    then left out)."""
    return load_review_file(path, catalog).answers


def parse_set_flags(items: Iterable[str], catalog: Catalog) -> dict[str, str]:
    """Turn ``["duration=hours", ...]`` into validated answers."""
    raw: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise AnswersError(f"--set {item!r}: expected QUESTION=VALUE, e.g. --set duration=hours.")
        earlier = raw.get(key)
        if isinstance(earlier, str) and _takes_several(catalog, key) and value != UNKNOWN and earlier != UNKNOWN:
            value = f"{earlier}{MULTIPLE_SEPARATOR}{value}"  # --set symptoms=a --set symptoms=b: both
        raw[key] = value
    return validate_answers(raw, catalog, source="--set")


def _takes_several(catalog: Catalog, question_id: str) -> bool:
    return question_id in catalog.question_ids and catalog.question(question_id).multiple


def apply_set_flags(answers: Mapping[str, str], items: Iterable[str], catalog: Catalog) -> dict[str, str]:
    """``answers`` (e.g. from a file) with ``--set`` flags on top: a flag wins, and
    ``--set ID=unknown`` clears the answer the file gave (the last flag for an id counts)."""
    items = list(items)
    flags = parse_set_flags(items, catalog)  # validates every flag first
    last = {key.strip(): value.strip() for key, _, value in (item.partition("=") for item in items)}
    merged = {q: v for q, v in answers.items() if last.get(q) != UNKNOWN}
    merged.update(flags)
    return {q: merged[q] for q in catalog.question_ids if q in merged}


def parse_control_flags(items: Iterable[str], catalog: Catalog, strategy: str) -> dict[str, str]:
    """Turn ``["commit-on-revoke=no", ...]`` into control states of ``strategy``'s controls."""
    raw: dict[object, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise AnswersError(
                f"--control {item!r}: expected CONTROL=yes|no|unknown, e.g. --control sigterm-within-grace=no."
            )
        raw[key.strip()] = value.strip()
    return dict(validate_current(strategy, raw, catalog, source="--control").controls)


def review_input(
    catalog: Catalog,
    *,
    answers_file: Path | None = None,
    set_flags: Iterable[str] = (),
    current: str | None = None,
    control_flags: Iterable[str] = (),
    context: str | None = None,
) -> ReviewInput:
    """Combine an answers file and flags (flags win). A --current naming another strategy than the
    file's drops the file's control states (they belong to the other strategy)."""
    base = load_review_file(answers_file, catalog) if answers_file else ReviewInput({})
    answers = apply_set_flags(base.answers, set_flags, catalog)
    design = base.current
    if current is not None:
        design = validate_current(current, None, catalog, source="--current")
        if base.current is not None and base.current.strategy == current:
            design = base.current
    control_flags = list(control_flags)
    if control_flags:
        if design is None:
            raise AnswersError(
                "--control needs the current strategy: add --current ID (or `current:` in the answers file)."
            )
        states = {**design.controls, **parse_control_flags(control_flags, catalog, design.strategy)}
        design = validate_current(design.strategy, states, catalog, source="--control")
    if context is not None and not context.strip():
        raise AnswersError("--context: expected a text (the incident or the job, in your words).")
    text = context.strip() if context is not None else base.context
    return ReviewInput({q: answers[q] for q in catalog.question_ids if q in answers}, text, design)


def dump_answers(
    answers: Mapping[str, str],
    catalog: Catalog,
    *,
    context: str | None = None,
    current: CurrentDesign | None = None,
) -> str:
    """YAML an answers file can be loaded from again, each question commented with its text."""
    lines = ["# Continuity Advisor answers — `advisor recommend --answers THIS_FILE`"]
    if context:
        lines.append("# The job or the incident, in the team's words:")
        lines.append(yaml.safe_dump({"context": context}, allow_unicode=True, width=100).rstrip())
    for q in catalog.questions:
        value = answers.get(q.id)
        lines.append(f"# {q.asks} ({' | '.join(q.values)})")
        if value and q.multiple:
            value = f"[{', '.join(answer_values(answers, q.id))}]"
        lines.append(f"{q.id}: {value}" if value else f"# {q.id}: {UNKNOWN}")
    if current is not None:
        states = " | ".join(CONTROL_VALUES)
        lines.append(f"# The design under review — `advisor review --answers THIS_FILE`; controls: {states}")
        lines.append("current:")
        lines.append(f"  strategy: {current.strategy}")
        controls = catalog.strategy(current.strategy).controls
        if controls:
            lines.append("  controls:")
            for c in controls:
                lines.append(f"    {c.id}: {current.status(c.id)}  # {c.question}")
    return "\n".join(lines) + "\n"
