"""The template's plain conditions, evaluated without Jinja, mean what Jinja makes of them."""

from __future__ import annotations

import itertools

import pytest

from advisor.model import template_questions as questions
from advisor.model.template_conditions import evaluate, plain


def _asked_by_jinja(strategy, given):
    """What the template asks, every default and condition rendered by Jinja in Copier's order."""
    env, context, asked = questions._jinja_env(), questions._context(None), set()
    for qid, spec in questions._raw_questions().items():
        kind = str(spec.get("type", "str"))
        if qid == "strategy":
            value = strategy
        elif qid in given:
            value = questions._coerce(qid, kind, given[qid])
        else:
            value = questions._coerce(qid, kind, questions._render(env, spec.get("default"), context))
        context[qid] = value
        if str(questions._render(env, spec.get("when", True), context)).strip().lower() not in ("false", "0", "no", ""):
            asked.add(qid)
    return asked


def test_what_the_template_asks_is_what_jinja_says_for_every_strategy_and_choice():
    raw = questions._raw_questions()
    choices = {q: questions._choice_values(s) for q, s in raw.items() if questions._choice_values(s) and q != "strategy"}
    assert {"checkpoint_store", "effect_kind", "state_store", "input_source"} <= set(choices)
    compared = 0
    for strategy in questions._choice_values(raw["strategy"]):
        for combo in itertools.product(*[[None, *values] for values in choices.values()]):
            given = {q: v for q, v in zip(choices, combo) if v is not None}
            assert questions.asked_for(strategy, given) == _asked_by_jinja(strategy, given), (strategy, given)
            compared += 1
    assert compared > 5000


@pytest.mark.parametrize("template,context,expected", [
    ("{{ strategy == 'checkpoint' }}", {"strategy": "checkpoint"}, True),
    ("{{ not (strategy == 'checkpoint' and store == 'file') }}", {"strategy": "checkpoint", "store": "file"}, False),
    ("{{ strategy in ['a', 'b'] or n != 2 }}", {"strategy": "c", "n": 2}, False),
    ("{{ kind and kind not in ['x'] }}", {"kind": ""}, ""),
])  # fmt: skip
def test_a_plain_expression_gives_what_jinja_renders(template, context, expected):
    tree = plain(template)
    assert tree is not None and evaluate(tree, context.__getitem__) == expected
    assert str(expected) == questions._render(questions._jinja_env(), template, context)


@pytest.mark.parametrize("template", [
    "{{ name | lower }}", "{{ f(x) }}", "{{ a if b else c }}", "{% if a %}x{% endif %}", "x {{ a }}",
    "{{ a.b }}", "{{ a + 1 }}", "{{ a[0] }}", "{{ none_of_this( }}", "{{ {'a': 1} }}",
])  # fmt: skip
def test_anything_else_is_left_to_jinja(template):
    assert plain(template) is None
