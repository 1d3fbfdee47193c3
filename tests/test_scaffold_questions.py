"""Which template questions apply to a strategy (the TUI's generate form shows only those)."""

from __future__ import annotations

from advisor.model.template_questions import template_questions


def test_checkpoint_asks_for_its_store_variant():
    ids = [q.id for q in template_questions("checkpoint")]
    assert {"project_name", "package_name", "strategy", "checkpoint_store", "state_store"} <= set(ids)


def test_other_strategies_do_not_see_checkpoint_only_questions():
    ids = [q.id for q in template_questions("state-machine")]
    assert "checkpoint_store" not in ids and "state_store" in ids


def test_without_a_strategy_every_asked_question_is_listed():
    ids = [q.id for q in template_questions()]
    assert "checkpoint_store" in ids and "runtime_module" not in ids  # computed values are never asked
