"""Properties of the decision model over the whole answer space.

The space (every question's values plus "unanswered") has billions of points, so each property
runs over a deterministic sample (advisor.docgen.decision_page.sample_answers: the same points every
run) plus an exhaustive product of the questions that decide the mechanism. A failure prints the
answers, so it can be replayed with `advisor recommend --set ...`.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.docgen.decision_page import render, sample_answers
from advisor.model.catalog import Catalog, condition_holds
from advisor.model.engine import DecisionModel, recommend

DOCS = Path(__file__).resolve().parents[1] / "docs"
STEP_TRACKING = {"state-machine", "event-sourcing", "event-sourcing-idempotent"}  # record which step was reached
JOURNALING = STEP_TRACKING  # nondeterministic results recorded, never recomputed
CORE = ("recovery_point_store", "acceptable_loss", "duplicate_cost", "duration", "work_shape", "external_effects")


@pytest.fixture(scope="module")
def model(catalog: Catalog) -> DecisionModel:
    return DecisionModel(catalog)


@pytest.fixture(scope="module")
def space(catalog: Catalog) -> list[dict[str, str]]:
    """20,000 sampled answer sets (some questions unanswered) + 20,000 fully answered ones."""
    return [*sample_answers(catalog), *sample_answers(catalog, full=True)]


def core_product(catalog: Catalog) -> Iterator[dict[str, str]]:
    """Every combination of the core questions' values and "unanswered", the rest unanswered."""
    choices = [[None, *catalog.question(q).values] for q in CORE]
    for values in itertools.product(*choices):
        yield {q: v for q, v in zip(CORE, values) if v is not None}


def everywhere(catalog: Catalog, space: list[dict[str, str]]) -> Iterator[dict[str, str]]:
    yield from space
    yield from core_product(catalog)


def test_an_indivisible_task_that_may_be_rerun_whole_never_gets_an_offset_checkpoint(catalog, model, space):
    for answers in everywhere(catalog, space):
        if answers.get("work_shape") == "single_task" and answers.get("acceptable_loss") == "whole_task":
            assert model.pick(answers) != "checkpoint", answers


def test_a_multi_step_flow_gets_a_step_tracking_strategy(catalog, model, space):
    for answers in everywhere(catalog, space):
        if answers.get("work_shape") == "multi_step_flow":
            assert model.pick(answers) in STEP_TRACKING, answers


def test_where_the_recovery_point_lives_shapes_the_recipe_not_the_mechanism(catalog, model, space):
    """Moving the recovery point between a local file, a database and object storage keeps the
    mechanism (a multi-step flow on local disk is still a state machine); only a stream platform's
    checkpoint location may tip a stream over to the framework's own checkpoint."""
    stores = ("local_disk", "database", "object_storage")
    for answers in space[::5]:  # every fifth point: three rankings each
        variants = [{**answers, "recovery_point_store": s} for s in stores]
        if any(model.conflicts(v) for v in variants):
            continue
        picks = {model.pick(v) for v in variants}
        assert len(picks) == 1 or "stream-checkpoint" in picks, (answers, picks)


def test_unacceptable_duplicates_never_get_a_strategy_without_a_dedupe_record(catalog, model, space):
    for answers in everywhere(catalog, space):
        if answers.get("duplicate_cost") != "unacceptable":
            continue
        pick = model.pick(answers)
        assert pick != "event-sourcing", answers  # appends a repeated command again
        if pick == "stream-checkpoint" and answers.get("external_effects") in ("plain_api", "queryable_api"):
            # a replayed batch would repeat the calls: the recipe must move them behind an outbox
            recipe = recommend(answers, catalog).recipe
            assert recipe is not None and "outbox" in recipe.duplicates, answers


def test_nondeterministic_discovered_steps_are_journaled_not_re_executed(catalog, model, space):
    for answers in everywhere(catalog, space):
        # an agent loop that runs for minutes or more and may not restart from scratch
        if (answers.get("nondeterminism") == "nondeterministic" and answers.get("work_discovery") == "discovered"
                and answers.get("work_shape") in ("multi_step_flow", "single_task")
                and answers.get("acceptable_loss") in ("one_batch", "nothing")
                and answers.get("duration") in ("minutes", "hours")):  # fmt: skip
            assert model.pick(answers) in JOURNALING, answers


def test_an_input_that_cant_be_replayed_never_relies_on_the_frameworks_replay(catalog, model, space):
    for answers in everywhere(catalog, space):
        if answers.get("input_replay") == "not_replayable":
            top_out, _, top = model.rank(answers)[0]
            assert top.id != "stream-checkpoint" or top_out, answers


def test_a_ruled_out_strategy_wins_only_when_the_answers_conflict(catalog, model, space):
    """When every strategy is ruled out, the answers contradict each other: a conflict names it."""
    for answers in everywhere(catalog, space):
        ruled_out, _, _ = model.rank(answers)[0]
        if ruled_out:
            assert model.conflicts(answers), answers


def test_no_strategy_wins_a_large_share_of_the_space(catalog, model, space):
    half = len(space) // 2
    for sample in (space[:half], space[half:]):  # some questions unanswered; all answered
        picks = Counter(model.pick(a) for a in sample)
        share = {sid: picks[sid] / len(sample) for sid in catalog.strategy_ids}
        assert max(share.values()) < 0.40, share  # nobody wins on neutral bonuses alone
        # and every strategy is somebody's answer: the stream engine's checkpoint is the rarest, an
        # unbounded stream on a runner that has one (a uniform draw of `runner` seldom gives Spark or Flink)
        assert min(share.values()) > 0.02, share


def test_the_shares_table_in_the_docs_is_current(catalog):
    assert (DOCS / "decision-model.md").read_text() == render(catalog), (
        "docs/decision-model.md is stale: run `make docs`"
    )


def test_every_close_call_names_what_would_settle_it(catalog):
    seen = 0
    for answers in itertools.islice(sample_answers(catalog, seed=80), 800):
        rec = recommend(answers, catalog)
        if rec.close_call is None:
            continue
        seen += 1
        assert rec.close_call.margin < catalog.close_call_margin
        assert rec.close_call.settle, answers
        for s in rec.close_call.settle[:3]:  # and what it names is true
            after = DecisionModel(catalog).lead({**rec.answers, s.question: s.value})
            assert after[0] != rec.top.strategy.id or after[2] >= catalog.close_call_margin, (answers, s)
    assert seen > 50  # close calls are common enough for this to mean something


@pytest.mark.parametrize("conflict_id", [c.id for c in __import__("advisor.model.loader").model.loader.load_catalog().conflicts])
def test_every_conflict_rule_can_fire(catalog, conflict_id):
    conflict = next(c for c in catalog.conflicts if c.id == conflict_id)
    answers = {q: values[0] for q, values in conflict.when.items()}
    assert condition_holds(conflict.when, answers)
    rec = recommend(answers, catalog)
    assert conflict_id in {w.id for w in rec.warnings}
    assert set(conflict.revisit) <= set(catalog.question_ids)


def test_every_rule_can_fire_and_rules_its_strategy_out(catalog):
    for s in catalog.strategies:
        for rule in s.rules:
            answers = {q: values[0] for q, values in rule.when.items()}
            assert recommend(answers, catalog).ranked(s.id).ruled_out, (s.id, rule.say)


def test_advice_for_a_plain_api_never_asks_the_service_afterwards(catalog):
    """SMTP, webhooks and keyless payment APIs can't be asked whether a call happened: neither the
    recipe nor a pitfall fix may tell the user to look the call up at the service."""
    lookup = re.compile(r"look(s|ed)? (the call |a call |it )?up at the service|asks? the (external system|service) by",
                        re.IGNORECASE)  # fmt: skip
    for answers in itertools.islice(sample_answers(catalog, seed=5), 3000):
        if answers.get("external_effects") != "plain_api":
            continue
        rec = recommend(answers, catalog)
        assert rec.recipe is not None
        texts = [rec.recipe.where, rec.recipe.how_often, rec.recipe.duplicates, *rec.recipe.steps]
        texts += [rec.fix(p) for p in rec.pitfalls]
        for text in texts:
            assert not lookup.search(text), (answers, text)


def test_event_sourced_advice_never_talks_about_processed_offsets(catalog, model):
    for answers in itertools.islice(sample_answers(catalog, seed=6), 3000):
        if not model.pick(answers).startswith("event-sourcing"):
            continue
        rec = recommend(answers, catalog)
        if rec.recipe is not None:
            texts = [rec.recipe.where, rec.recipe.duplicates, *rec.recipe.steps, *(rec.fix(p) for p in rec.pitfalls)]
            assert not any("processed_offset" in t for t in texts), answers


def test_a_question_open_questions_leaves_out_cannot_change_the_pick(catalog, model):
    from advisor.model.engine import open_questions

    for answers in itertools.islice(sample_answers(catalog, seed=12), 300):
        still = set(open_questions(answers, catalog, depth=1))
        pick = model.pick(answers)
        for q in catalog.questions:
            if q.id in answers:
                assert q.id not in still
            elif q.id not in still:
                assert all(model.pick({**answers, q.id: v}) == pick for v in q.values), (answers, q.id)
            else:
                assert any(model.pick({**answers, q.id: v}) != pick for v in q.values), (answers, q.id)
