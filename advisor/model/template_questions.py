"""The template's questions, read from ``templates/copier.yml`` without Copier.

The template is the single source of truth: its questions, defaults, ``when`` conditions and
validators are read from the YAML here (no Copier import, so listing questions or checking
answers is fast) and evaluated with a sandboxed Jinja environment the way Copier would. What
the template generates (:func:`generated_strategies`), what it asks for a strategy
(:func:`asked_for`) and whether answers pass (:func:`validate_answers`) are model facts: the
review, the docs and the template settings read them; ``advisor.scaffold`` then runs Copier,
whose own validators run again on the real thing. A refusal is a :class:`ScaffoldError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from advisor.errors import ScaffoldError
from advisor.model.template_conditions import evaluate, plain
from advisor.paths import templates_dir

_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}


@dataclass(frozen=True)
class TemplateQuestion:
    id: str
    help: str
    type: str
    default: object
    choices: tuple[str, ...]


# ------------------------------------------------------------------ questions
@lru_cache(maxsize=4)
def _config(path: Path) -> dict[str, Any]:
    try:
        # the C loader when PyYAML has it: same safe loading, a fraction of `recommend`'s start-up
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError) as exc:
        raise ScaffoldError(f"{path}: cannot read the template configuration ({exc})") from None
    if not isinstance(data, dict):
        raise ScaffoldError(f"{path}: expected a mapping of questions")
    return data


def _copier_yml() -> dict[str, Any]:
    return _config(templates_dir() / "copier.yml")


def _raw_questions() -> dict[str, dict[str, Any]]:
    """Prompt questions in order (configuration keys start with '_')."""
    out: dict[str, dict[str, Any]] = {}
    for key, spec in _copier_yml().items():
        if key.startswith("_"):
            continue
        out[key] = spec if isinstance(spec, dict) else {"default": spec}
    return out


def _is_computed(spec: Mapping[str, Any]) -> bool:
    # `when: false` (literally) marks a value the template computes and never asks.
    return spec.get("when") is False


def _choice_values(spec: Mapping[str, Any]) -> tuple[str, ...]:
    choices = spec.get("choices") or ()
    if isinstance(choices, dict):
        return tuple(str(v["value"] if isinstance(v, dict) else v) for v in choices.values())
    return tuple(str(c) for c in choices)


def template_questions(strategy: str | None = None, given: Mapping[str, object] | None = None) -> list[TemplateQuestion]:
    """The questions a user answers (computed values excluded), in template order.

    With ``strategy``, only those the template asks for it (their ``when`` holds with
    the ``given`` answers and the defaults), e.g. ``checkpoint_store`` only for ``checkpoint``.
    """
    asked = asked_for(strategy, given) if strategy is not None else None
    return [
        TemplateQuestion(
            id=key,
            help=" ".join(str(spec.get("help", "")).split()),
            type=str(spec.get("type", "str")),
            default=spec.get("default"),
            choices=_choice_values(spec),
        )
        for key, spec in _raw_questions().items()
        if not _is_computed(spec) and (asked is None or key in asked)
    ]


class _NotPlain(Exception):
    """A plain condition names something no question defines."""


def _holds(when: object) -> bool:
    """A ``when`` as Copier reads its rendered text: false, 0, no or nothing means not asked."""
    return str(when).strip().lower() not in ("false", "0", "no", "")


def asked_for(strategy: str, given: Mapping[str, object] | None = None) -> set[str]:
    """Question ids whose ``when`` holds for ``strategy`` with the ``given`` answers and every
    other answer at its default (``input_source`` is asked of a checkpoint project only while
    ``checkpoint_store`` is ``table``).

    Values are worked out as a condition needs them, and a plain condition without Jinja
    (``advisor.model.template_conditions``): `recommend` asks this for every strategy it shows."""
    raw, given = _raw_questions(), given or {}
    order = list(raw)
    context = _context(None)

    def value(qid: str) -> object:
        if qid not in context:
            if qid not in raw:
                raise _NotPlain(qid)  # a name no question defines: Jinja decides what it means
            kind = str(raw[qid].get("type", "str"))
            if qid == "strategy":
                context[qid] = strategy
            elif qid in given:
                context[qid] = _coerce(qid, kind, given[qid])
            else:
                context[qid] = _coerce(qid, kind, _expression(raw[qid].get("default"), qid))
        return context[qid]

    def _expression(template: object, qid: str) -> object:
        if not isinstance(template, str) or "{" not in template:
            return template
        tree = plain(template)
        if tree is not None:
            try:
                return evaluate(tree, value)
            except _NotPlain:
                pass
        # Copier walks the questions in order: what Jinja sees is every answer up to this one.
        earlier = {q: value(q) for q in order[: order.index(qid)]}
        return _render(_jinja_env(), template, {**context, **earlier})

    asked = set()
    for qid, spec in raw.items():
        if _holds(_expression(spec.get("when", True), qid)):
            asked.add(qid)
    return asked


def generated_strategies() -> frozenset[str]:
    """Strategies the template can generate now: choices of `strategy` without a disabling validator."""
    choices = _raw_questions().get("strategy", {}).get("choices") or {}
    if not isinstance(choices, dict):
        return frozenset(str(c) for c in choices)
    return frozenset(
        str(v["value"] if isinstance(v, dict) else v)
        for v in choices.values()
        if not (isinstance(v, dict) and str(v.get("validator", "")).strip())
    )


# ----------------------------------------------------------------- validation
@lru_cache(maxsize=1)
def _jinja_env() -> Any:
    """A sandboxed Jinja environment with the two regex filters the template uses (one per
    process: `recommend` asks which questions a template asks several times)."""
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment()
    env.filters["regex_search"] = _regex_search
    env.filters["regex_replace"] = lambda value, pattern, repl="": re.sub(pattern, repl, str(value))
    return env


def _regex_search(value: object, pattern: str) -> str | None:
    """Like Ansible's filter (which Copier ships): the match, or None."""
    match = re.search(pattern, str(value))
    return match.group(0) if match else None


def _render(env: Any, template: object, context: Mapping[str, Any]) -> object:
    if not isinstance(template, str) or "{" not in template:
        return template
    return _compiled(env, template).render(**context)


@lru_cache(maxsize=256)
def _compiled(env: Any, template: str) -> Any:
    """Each default or condition of copier.yml compiled once per process (compiling dominated the
    time `advisor recommend` spends on template settings)."""
    return env.from_string(template)


def _coerce(qid: str, kind: str, value: object) -> object:
    target = _TYPES.get(kind, str)
    if target is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "yes", "1", "on"):
            return True
        if str(value).lower() in ("false", "no", "0", "off"):
            return False
    else:
        try:
            if target is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            if isinstance(value, bool) and target is not str:
                raise ValueError
            return target(value)
        except (TypeError, ValueError):
            pass
    raise ScaffoldError(f"template answer {qid}={value!r}: expected a {kind}")


def _context(dest: Path | None) -> dict[str, object]:
    """What Copier offers every default before the first answer: ``_folder_name``, the destination's name."""
    return {"_folder_name": Path(dest).resolve().name if dest is not None else ""}


def validate_answers(strategy: str, answers: Mapping[str, object], dest: Path | None = None) -> dict[str, object]:
    """Check answers against the template without running Copier.

    Unknown keys, wrong types, values outside the choices, a strategy that is not
    generated yet and anything the template's own ``validator`` expressions reject
    raise :class:`ScaffoldError`. Returns the answers given (typed) plus ``strategy``.
    """
    raw = _raw_questions()
    asked = {k: v for k, v in raw.items() if not _is_computed(v)}
    unknown = sorted(set(answers) - set(asked))
    if unknown:
        raise ScaffoldError(
            f"unknown template question(s): {', '.join(unknown)}; valid ids: {', '.join(asked)}"
        )
    if "strategy" in answers and answers["strategy"] != strategy:
        raise ScaffoldError(f"answers say strategy={answers['strategy']!r} but {strategy!r} was asked for")
    available = generated_strategies()
    all_strategies = _choice_values(raw.get("strategy", {}))
    if strategy not in all_strategies:
        raise ScaffoldError(f"unknown strategy {strategy!r}; valid: {', '.join(all_strategies)}")
    if strategy not in available:
        raise ScaffoldError(
            f"strategy {strategy!r} is not yet generated by the template; available: {', '.join(sorted(available))}"
        )
    given: dict[str, object] = {"strategy": strategy}
    for qid, value in answers.items():
        if qid != "strategy":
            given[qid] = _coerce(qid, str(asked[qid].get("type", "str")), value)
    # Walk the questions in order like Copier: defaults chain from earlier answers.
    env, context = _jinja_env(), _context(dest)
    for qid, spec in raw.items():
        kind = str(spec.get("type", "str"))
        if qid in given:
            value = given[qid]
        else:
            value = _coerce(qid, kind, _render(env, spec.get("default"), context))
        when = _render(env, spec.get("when", True), context)
        context[qid] = value
        if qid in given and not _holds(when):
            continue  # not asked for this strategy; Copier ignores it too
        values = _choice_values(spec)
        if values and str(value) not in values:
            raise ScaffoldError(f"template answer {qid}={value!r}: choose one of {', '.join(values)}")
        message = str(_render(env, spec.get("validator", ""), context) or "").strip()
        if message:
            raise ScaffoldError(f"template answer {qid}={value!r}: {' '.join(message.split())}")
    return given


