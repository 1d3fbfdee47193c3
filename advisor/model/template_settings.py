"""Template settings your answers imply: answers → the template answers that keep their promise.

A user who answered "plain API, duplicates unacceptable" must not get a project wired for an
idempotent API. The rules are data (``strategies/template-settings.yaml``, STYLE.md 14): a
condition over answers, the template answers it gives, and a one-line reason. This module only
evaluates them, and keeps a setting only where the chosen strategy's template asks that question
(with the settings and explicit answers before it) and with a value among its choices — so the
rules stay safe whichever template questions exist today.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from advisor.errors import CatalogError
from advisor.model.catalog import Catalog, Condition, condition_holds

SETTINGS_FILE = "template-settings.yaml"


@dataclass(frozen=True)
class Rule:
    when: Condition
    settings: Mapping[str, str]  # template question id → value
    reason: str


@dataclass(frozen=True)
class Setting:
    """One template answer the advisor gives for you, and why."""

    key: str
    value: str
    reason: str
    default: bool = False  # the template's default already: a command need not spell it out

    def flag(self) -> str:
        return f"--set {self.key}={self.value}"

    def to_json(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "reason": self.reason}


def flags(settings: Sequence[Setting]) -> str:
    """The `advisor generate` options that carry the settings (a template default goes without saying)."""
    return "".join(f" {s.flag()}" for s in settings if not s.default)


def load_rules(catalog: Catalog) -> tuple[Rule, ...]:
    """The rules beside the catalog's questions (none when the catalog directory has no file)."""
    from advisor.safe_read import load_yaml

    path = Path(catalog.root) / SETTINGS_FILE
    if not path.is_file():
        return ()
    data = load_yaml(path, "template settings file") or {}
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise CatalogError(path, "rules", "expected `rules:` with a list of {when, set, reason}")
    return tuple(_rule(path, i, raw, catalog) for i, raw in enumerate(data["rules"]))


def _rule(path: Path, index: int, raw: object, catalog: Catalog) -> Rule:
    where = f"rules[{index}]"
    if not isinstance(raw, dict) or set(raw) != {"when", "set", "reason"}:
        raise CatalogError(path, where, "expected exactly the keys when, set and reason")
    when, settings, reason = raw["when"], raw["set"], raw["reason"]
    if not isinstance(when, dict) or not when:
        raise CatalogError(path, f"{where}.when", "expected a mapping of question id → a value or a list of values")
    condition: dict[str, tuple[str, ...]] = {}
    for qid, values in when.items():
        if qid not in catalog.question_ids:
            raise CatalogError(path, f"{where}.when.{qid}", f"unknown question; valid: {', '.join(catalog.question_ids)}")
        values = [values] if isinstance(values, str) else values  # `q: v` as in conflicts.yaml
        if not isinstance(values, list) or not values:
            raise CatalogError(path, f"{where}.when.{qid}", "expected a value or a non-empty list of values")
        valid = catalog.question(qid).values
        bad = [v for v in values if v not in valid]
        if bad:
            raise CatalogError(path, f"{where}.when.{qid}", f"unknown value {bad[0]!r}; valid: {', '.join(valid)}")
        condition[qid] = tuple(str(v) for v in values)
    if not isinstance(settings, dict) or not settings or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in settings.items()
    ):
        raise CatalogError(path, f"{where}.set", "expected a mapping of template question id → value (strings)")
    if not isinstance(reason, str) or not reason.strip():
        raise CatalogError(path, f"{where}.reason", "expected one line saying why")
    return Rule(condition, dict(settings), " ".join(reason.split()))


def implied(rules: tuple[Rule, ...], answers: Mapping[str, str]) -> dict[str, Setting]:
    """Every setting the answers imply, before any template filtering: the first rule wins per key."""
    chosen: dict[str, Setting] = {}
    for rule in rules:
        if condition_holds(rule.when, answers):
            for key, value in rule.settings.items():
                chosen.setdefault(key, Setting(key, value, rule.reason))
    return chosen


def settings_for(
    strategy: str,
    answers: Mapping[str, str],
    catalog: Catalog,
    explicit: Mapping[str, object] | None = None,
) -> tuple[Setting, ...]:
    """The settings for ``strategy`` (a template ``strategy`` answer), in template question order.

    Only questions the template asks for the strategy — given the ``explicit`` answers and the
    settings already kept — and only values among the question's choices. A strategy the
    template does not generate gets none.
    """
    wanted = implied(load_rules(catalog), answers)
    if not wanted:
        return ()  # before reading the template: `recommend --json` stays light when nothing applies
    from advisor.model.template_questions import asked_for, generated_strategies, template_questions

    if strategy not in generated_strategies():
        return ()
    given: dict[str, object] = dict(explicit or {})
    kept: list[Setting] = []
    for question in template_questions():
        setting = wanted.get(question.id)
        if setting is None or (question.choices and setting.value not in question.choices):
            continue
        value = given.get(question.id, setting.value)
        if question.id in asked_for(strategy, {**given, question.id: value}):
            kept.append(replace(setting, default=str(question.default) == setting.value))
            given.setdefault(question.id, setting.value)
    return tuple(kept)


@dataclass(frozen=True)
class Applied:
    """What ``generate`` does with the settings: the template answers to use and what it did."""

    data: dict[str, object]
    applied: tuple[Setting, ...]
    overridden: tuple[tuple[Setting, object], ...]  # (the advice, the explicit value that won)


def apply(settings: tuple[Setting, ...], explicit: Mapping[str, object]) -> Applied:
    """Explicit answers win; every other setting is added."""
    data = dict(explicit)
    applied, overridden = [], []
    for setting in settings:
        if setting.key in explicit:
            if str(explicit[setting.key]) != setting.value:
                overridden.append((setting, explicit[setting.key]))
        else:
            data[setting.key] = setting.value
            applied.append(setting)
    return Applied(data, tuple(applied), tuple(overridden))
