"""``evidence.yaml``: the review's ranking rules, symptom × answers → control weights, as data
(STYLE.md 14: the review only evaluates them; ``advisor.review.ranking`` does).

Every problem is a :class:`CatalogError` naming the file, the key and the reason: an unknown
symptom, question, value or control, a weight that is not a number, a rule that says nothing.
A catalog without the file ranks its findings in the order the strategies declare them (and by
the past incidents of ``precedents.yaml``, when it has them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from advisor.model.catalog import SYMPTOMS, Evidence, EvidenceRule, Implied, Question, Strategy
from advisor.model.parsed_cache import read_yaml
from advisor.model.precedents_loader import PRECEDENTS_FILE, load_precedents
from advisor.model.condition_reader import read_conditions, read_when
from advisor.model.yaml_reader import Reader

_RULE_ID = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def _symptom_values(r: Reader, key: str, questions: Mapping[str, Question]) -> tuple[str, ...]:
    """The `symptoms` question's values a rule names (the question must exist and take several)."""
    question = questions.get(SYMPTOMS)
    if question is None or not question.multiple:
        raise r.error(key, f"needs a `{SYMPTOMS}` question with `multiple: true` in questions.yaml")
    values = r.texts(key)
    for i, v in enumerate(values):
        if v not in question.values:
            raise r.error(f"{key}[{i}]", f"unknown symptom {v!r}; valid: {', '.join(question.values)}")
    return values


def _weights(r: Reader, control_ids: Sequence[str]) -> dict[str, float]:
    raise_ = r.child("raise")
    if not raise_.data:
        raise r.error("raise", "name at least one control and its weight")
    out = {}
    for cid in raise_.data:
        if cid not in control_ids:
            raise raise_.error(str(cid), f"not a control of any strategy; known: {', '.join(control_ids)}")
        weight = raise_.number(cid)
        if weight == 0:
            raise raise_.error(cid, "a weight of 0 changes nothing: remove it")
        out[str(cid)] = weight
    return out


def _rule(r: Reader, questions: Mapping[str, Question], control_ids: Sequence[str]) -> EvidenceRule:
    r.only("id", "symptoms", "together", "when", "unless", "words", "raise", "says")
    rid = r.text("id")
    if not _RULE_ID.match(rid):
        raise r.error("id", f"{rid!r} is not a rule id: use lowercase words joined by '-'")
    if r.data.get("symptoms") is not None and r.data.get("together") is not None:
        raise r.error("together", "give `symptoms` (any one seen) or `together` (all seen), not both")
    together = r.data.get("together") is not None
    key = "together" if together else "symptoms"
    symptoms = _symptom_values(r, key, questions) if r.data.get(key) is not None else ()
    if together and len(symptoms) < 2:
        raise r.error("together", "`together` names at least two symptoms (one is `symptoms`)")
    when = read_conditions(r, "when", questions)
    unless = read_conditions(r, "unless", questions)
    words = tuple(w.lower() for w in r.texts("words")) if r.data.get("words") is not None else ()
    if not symptoms and not when and not words:
        raise r.error("when", "a rule needs `symptoms`, `when` or `words`: without any it would raise every case alike")
    return EvidenceRule(rid, symptoms, when, _weights(r, control_ids), r.text("says"), together, unless, words)


def _keywords(top: Reader, questions: Mapping[str, Question]) -> dict[str, tuple[str, ...]]:
    if top.data.get("keywords") is None:
        return {}
    words = top.child("keywords")
    out = {}
    for symptom in words.data:
        question = questions.get(SYMPTOMS)
        if question is None or symptom not in question.values:
            valid = ", ".join(question.values) if question else f"(no `{SYMPTOMS}` question)"
            raise words.error(str(symptom), f"unknown symptom; valid: {valid}")
        out[str(symptom)] = tuple(w.lower() for w in words.texts(symptom))
    return out


def _implied(top: Reader, questions: Mapping[str, Question]) -> tuple[Implied, ...]:
    out = []
    for i, raw in enumerate(top.items("implied") if top.data.get("implied") is not None else ()):
        r = Reader(top.path, raw, f"implied[{i}]")
        r.only("when", "answers", "says")
        answers = read_conditions(r, "answers", questions)
        if not answers or any(len(v) != 1 for v in answers.values()):
            raise r.error("answers", "name each question once, with the one value the stack makes likely")
        out.append(Implied(read_when(r, questions), {q: v[0] for q, v in answers.items()}, r.text("says")))
    return tuple(out)


def load_evidence(path: Path, questions: Mapping[str, Question], strategies: Sequence[Strategy]) -> Evidence:
    precedents = load_precedents(path.parent / PRECEDENTS_FILE, questions, strategies)
    if not path.exists():
        return Evidence(precedents=precedents)
    top = Reader(path, read_yaml(path))
    top.only("keywords", "rules", "implied")
    control_ids = list(dict.fromkeys(c.id for s in strategies for c in s.controls))
    rules: list[EvidenceRule] = []
    for i, raw in enumerate(top.items("rules")):
        rule = _rule(Reader(path, raw, f"rules[{i}]"), questions, control_ids)
        if any(other.id == rule.id for other in rules):
            raise Reader(path, raw, f"rules[{i}]").error("id", f"duplicate rule id {rule.id!r}")
        rules.append(rule)
    return Evidence(tuple(rules), _keywords(top, questions), precedents, _implied(top, questions))
