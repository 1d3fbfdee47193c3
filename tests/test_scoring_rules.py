"""Scoring and wording rules of the decision engine (issue 24, part 4): weights gated on what a
strategy is for, answers a conflict voids, close calls and swings that only suggest sound answers,
ties said as ties, `--set ID=unknown`, one story per effect kind."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.errors import CatalogError
from advisor.model.answers import review_input
from advisor.model.engine import DecisionModel, recipe_for, recommend
from advisor.model.loader import load_catalog
from advisor.review.judge import decision_record

DAY = dt.date(2026, 1, 2)

# --- a state machine's bonuses only for a flow of steps ------------------------------------

# Answers that name no flow (no multi_step_flow, no discovered work). One comment per case.
NO_FLOW = [
    # the held-out warehouse load: a record batch whose checkpoint is ruled out (rerun whole), with a
    # compensation answer its own conflict calls meaningless — it fell to state machine, 4 vs 2
    {"work_shape": "record_batch", "acceptable_loss": "whole_task", "compensation": "possible",
     "external_effects": "none", "outputs": "outside_store", "recovery_point_store": "database", "duration": "hours"},
    # compensation alone, with calls to a plain API
    {"compensation": "possible", "external_effects": "plain_api"},
    # a nondeterministic step alone
    {"nondeterminism": "nondeterministic"},
    # redelivered inputs, a database, hours
    {"inbound_duplicates": "possible", "recovery_point_store": "database", "duration": "hours"},
    # one unit longer than the kill notice
    {"unit_vs_notice": "longer_than_notice", "duration": "hours", "work_shape": "single_task"},
    # a batch with every trait the old weights rewarded
    {"work_shape": "record_batch", "acceptable_loss": "whole_task", "compensation": "possible",
     "external_effects": "plain_api", "nondeterminism": "nondeterministic", "inbound_duplicates": "possible",
     "unit_vs_notice": "longer_than_notice", "recovery_point_store": "database", "duration": "hours",
     "duplicate_cost": "unacceptable", "audit": "required"},
]  # fmt: skip


@pytest.mark.parametrize("answers", NO_FLOW)
def test_a_state_machine_collects_no_bonus_without_a_flow(catalog, answers):
    rec = recommend(answers, catalog)
    machine = rec.ranked("state-machine")
    assert not [r for r in machine.reasons if r.weight > 0], machine.because
    assert rec.top.strategy.id != "state-machine"


def test_the_warehouse_load_is_rerun_whole(catalog):
    rec = recommend(NO_FLOW[0], catalog)
    assert rec.top.strategy.id == "idempotent-retry", [(r.strategy.id, r.score) for r in rec.ranking]


# Answers that do name a flow: the bonuses count. One comment per case.
FLOW = [
    # a multi-step flow that can compensate
    ({"work_shape": "multi_step_flow", "compensation": "possible"}, "compensation"),
    # an agent loop: work discovered as it runs, steps that answer differently each time
    ({"work_discovery": "discovered", "nondeterminism": "nondeterministic"}, "nondeterminism"),
]


@pytest.mark.parametrize("answers,question", FLOW)
def test_a_flow_keeps_the_state_machine_s_bonuses(catalog, answers, question):
    machine = recommend(answers, catalog).ranked("state-machine")
    assert any(r.question == question and r.weight > 0 for r in machine.reasons)


# --- an answer a conflict calls meaningless moves no score -----------------------------------

# (answers, the conflict, the answer it voids). One comment per case.
VOIDED = [
    # no external call: a compensating action for it means nothing
    ({"work_shape": "record_batch", "compensation": "possible", "external_effects": "none", "duration": "hours"},
     "compensation-without-effects", "compensation"),
    # a stream has no whole task to lose
    ({"work_shape": "unbounded_stream", "acceptable_loss": "whole_task", "recovery_point_store": "stream_engine"},
     "whole-task-of-a-stream", "acceptable_loss"),
    # a stream that takes seconds: the duration was answered for one event
    ({"work_shape": "unbounded_stream", "duration": "seconds"}, "seconds-long-stream", "duration"),
    # nowhere to keep progress, so nothing commits with it
    ({"recovery_point_store": "nowhere", "outputs": "in_progress_store", "work_shape": "single_task"},
     "nowhere-but-outputs-with-progress", "outputs"),
]  # fmt: skip


@pytest.mark.parametrize("answers,conflict,question", VOIDED)
def test_an_answer_a_conflict_voids_is_not_scored(catalog, answers, conflict, question):
    rec = recommend(answers, catalog)
    (warning,) = [w for w in rec.warnings if w.id == conflict]
    assert warning.ignored == (question,) and rec.ignored == (question,)
    assert rec.answers[question] == answers[question]  # still shown as given
    without = recommend({q: v for q, v in answers.items() if q != question}, catalog)
    assert [(r.strategy.id, r.score) for r in rec.ranking] == [(r.strategy.id, r.score) for r in without.ranking]
    assert not any(r.question == question for x in rec.ranking for r in x.reasons)
    data = rec.to_json()
    assert data["ignored"] == [question] and question in data["warnings"][0]["ignored"]


def test_the_conflicts_file_may_only_void_an_answer_it_names(catalog_copy: Path):
    path = catalog_copy / "conflicts.yaml"
    path.write_text(path.read_text().replace("ignore: [compensation]", "ignore: [duration]"))
    with pytest.raises(CatalogError) as err:
        load_catalog(catalog_copy)
    assert "conflicts.yaml" in str(err.value) and "ignore" in str(err.value) and "'duration'" in str(err.value)


def test_a_weight_may_only_need_a_gate_its_strategy_defines(catalog_copy: Path):
    path = catalog_copy / "state-machine.yaml"
    path.write_text(path.read_text().replace("{score: 2, needs: flow,", "{score: 2, needs: flows,", 1))
    with pytest.raises(CatalogError) as err:
        load_catalog(catalog_copy)
    assert "state-machine.yaml" in str(err.value) and "needs" in str(err.value) and "flow" in str(err.value)


# --- close calls and swings suggest only sound answers -------------------------------------


def test_a_close_call_never_suggests_an_answer_that_rules_out_everything(catalog):
    """Seen in a review: `recovery_point_store=nowhere` offered to settle a close call, though it
    rules out every strategy (here: entity changes with an audit, an agent's discovered steps)."""
    answers = {"acceptable_loss": "one_batch", "duplicate_cost": "harmless", "duration": "minutes",
               "work_shape": "entity_changes", "audit": "required", "inbound_duplicates": "possible",
               "input_replay": "replayable", "nondeterminism": "nondeterministic", "work_discovery": "discovered",
               "unit_vs_notice": "longer_than_notice", "kill_control": "none"}  # fmt: skip
    assert not recommend({**answers, "recovery_point_store": "nowhere"}, catalog).top.allowed
    rec = recommend(answers, catalog)
    assert rec.close_call is not None
    assert ("recovery_point_store", "nowhere") not in {(s.question, s.value) for s in rec.close_call.settle}


def test_every_settling_answer_and_swing_is_sound(catalog):
    """Over many answer sets: a suggested answer raises no new conflict and leaves a strategy standing."""
    from advisor.docgen.decision_page import sample_answers

    model = DecisionModel(catalog)
    checked = 0
    for answers in itertools.islice(sample_answers(catalog, seed=9), 400):
        rec = recommend(answers, catalog)
        known = {c.id for c in model.conflicts(rec.answers)}
        suggested = [(s.question, s.value) for s in rec.swings]
        suggested += [(s.question, s.value) for s in (rec.close_call.settle if rec.close_call else ())]
        for question, value in suggested:
            trial = {**rec.answers, question: value}
            assert recommend(trial, catalog).top.allowed, (answers, question, value)
            assert {c.id for c in model.conflicts(trial)} <= known, (answers, question, value)
            checked += 1
    assert checked > 400


# --- a tie is said to be one -----------------------------------------------------------------

TIE = {"recovery_point_store": "event_log", "work_shape": "entity_changes", "external_effects": "plain_api"}


def test_a_tie_is_never_points_ahead(catalog, tmp_path, capsys):
    rec = recommend(TIE, catalog)
    assert rec.close_call is not None and rec.close_call.tie
    record = decision_record(TIE, catalog, date=DAY)
    assert "0 points" not in record
    assert "A tie: Event sourcing and Event sourcing + idempotent commands score the same" in record
    assert "What would settle it: `duplicate_cost=harmless`" in record
    path = tmp_path / "job.yml"
    path.write_text("".join(f"{q}: {v}\n" for q, v in TIE.items()))
    assert main(["recommend", "--answers", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ties with Event sourcing + idempotent commands" in out and "0 points" not in out


# --- `--set ID=unknown` clears a file's answer -----------------------------------------------


def test_set_unknown_clears_the_files_answer(catalog, tmp_path, capsys):
    path = tmp_path / "job.yml"
    path.write_text("duration: hours\nwork_shape: record_batch\n")
    assert main(["recommend", "--answers", str(path), "--set", "duration=unknown", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["answers"] == {"work_shape": "record_batch"}
    # the review reads flags the same way; the last flag for an id counts
    given = review_input(catalog, answers_file=path, set_flags=["duration=unknown"])
    assert "duration" not in given.answers and given.answers["work_shape"] == "record_batch"
    again = review_input(catalog, answers_file=path, set_flags=["duration=unknown", "duration=minutes"])
    assert again.answers["duration"] == "minutes"


# --- one story per effect kind ---------------------------------------------------------------

# What a text may not say about a call in doubt, per effect kind. One comment per kind.
CONTRADICTIONS = {
    # a plain API can't be asked: nothing may tell the team to look the call up or check it by key
    "plain_api": (r"checked \(by its key\)", r"look(s|ed)? (it|the call|a prepared call|prepared calls) up",
                  r"looked up at the service", r"ask(ing)? the service by key", r"query by key", r"by looking it up"),
    # an idempotent or a queryable service can be asked (or repeats nothing): never "can't be asked"
    "idempotent_api": (r"can't be asked", r"can't be looked up", r"cannot be looked up"),
    "queryable_api": (r"can't be asked", r"can't be looked up", r"cannot be looked up"),
}


def _story(catalog, strategy, answers):
    recipe = recipe_for(strategy, answers)
    yield "recipe", " ".join([recipe.where, recipe.how_often, recipe.duplicates, *recipe.steps])
    for p in strategy.pitfalls:
        if p.applies(answers):
            yield f"pitfall {p.id}", p.fix_for(answers)
    for c in strategy.controls:
        if c.applies(answers):
            w = c.worded(answers)
            yield f"control {c.id}", " ".join([w.question, w.why, w.how_to_check, w.fix])


@pytest.mark.parametrize("kind", sorted(CONTRADICTIONS))
@pytest.mark.parametrize("duplicates", [None, "annoying", "unacceptable"])
@pytest.mark.parametrize("extra", [{}, {"work_discovery": "discovered", "nondeterminism": "nondeterministic"},
                                   {"recovery_point_store": "database"}])  # fmt: skip
def test_one_story_per_effect_kind(catalog, kind, duplicates, extra):
    answers = {"external_effects": kind, **extra, **({"duplicate_cost": duplicates} if duplicates else {})}
    for strategy in catalog.strategies:
        for where, text in _story(catalog, strategy, answers):
            for pattern in CONTRADICTIONS[kind]:
                assert not re.search(pattern, text), (strategy.id, where, pattern, text)


@pytest.mark.parametrize(("duplicates", "policy"), [
    ("unacceptable", "at most once"),  # a duplicate is an incident: the call in doubt is parked for a person
    ("annoying", "at least once"),  # a duplicate can be lived with: it is made again
    (None, "the policy you choose"),  # not answered: the choice is the team's, said once
])  # fmt: skip
def test_a_plain_call_in_doubt_has_one_policy_everywhere(catalog, duplicates, policy):
    answers = {"external_effects": "plain_api", "work_shape": "multi_step_flow",
               **({"duplicate_cost": duplicates} if duplicates else {})}  # fmt: skip
    machine = catalog.strategy("state-machine")
    texts = dict(_story(catalog, machine, answers))
    for where in ("recipe", "control intent-before-call"):
        assert policy in texts[where], (where, texts[where])
