"""The decision engine: the seed's scenario table, mixed cases, and the explanation it gives."""

from __future__ import annotations

import json

import pytest

from advisor.engine import recommend

# (answers, expected top strategy). One comment per case says why.
CASES = [
    # --- the seed's scenario table (000 §3.3), one row each -------------------------------
    # row 1: short task, seconds, cheap to rerun → a unique key is enough
    ({"duration": "seconds", "work_shape": "single_task", "acceptable_loss": "whole_task"}, "idempotent-retry"),
    # row 2: long batch job that can be split into batches → batch-level recovery
    ({"duration": "hours", "work_shape": "record_batch", "acceptable_loss": "one_batch",
      "recovery_point_store": "database"}, "checkpoint"),
    # row 3: streaming, high throughput → the framework's own checkpoint, don't reinvent it
    ({"work_shape": "unbounded_stream", "recovery_point_store": "stream_engine", "duration": "hours"},
     "stream-checkpoint"),
    # row 4: multi-step flow with strong state dependencies → a visible, controllable flow
    ({"work_shape": "multi_step_flow"}, "state-machine"),
    # row 5: strong audit, history replay → traceability and rebuild
    ({"audit": "required", "work_shape": "entity_changes", "recovery_point_store": "event_log"}, "event-sourcing"),
    # row 6: finance, no double charge → events + idempotency
    ({"audit": "required", "duplicate_cost": "unacceptable", "work_shape": "entity_changes",
      "external_effects": "plain_api"}, "event-sourcing-idempotent"),
    # --- mixed and conflicting cases ------------------------------------------------------
    # a short payment callback that must never double-charge but needs no audit: a business
    # unique key in the same transaction, no ledger machinery
    ({"duration": "seconds", "work_shape": "single_task", "duplicate_cost": "unacceptable", "audit": "none",
      "external_effects": "plain_api"}, "idempotent-retry"),
    # a batch job with a fire-and-forget email per record: still a batch (checkpoint), with the
    # prepared/done pitfall applying to the email
    ({"work_shape": "record_batch", "duration": "hours", "external_effects": "plain_api",
      "duplicate_cost": "annoying"}, "checkpoint"),
    # a stream that also needs an audit trail: the framework checkpoint wins, event sourcing next
    ({"work_shape": "unbounded_stream", "audit": "required", "recovery_point_store": "stream_engine"},
     "stream-checkpoint"),
    # an hours-long training run on one machine with only a local disk: the file checkpoint variant
    ({"duration": "hours", "work_shape": "single_task", "recovery_point_store": "local_disk",
      "acceptable_loss": "one_batch", "external_effects": "none"}, "checkpoint"),
    # the seed's 8M-row migration with several workers on a database
    ({"duration": "hours", "work_shape": "record_batch", "workers": "many", "recovery_point_store": "database",
      "acceptable_loss": "one_batch", "external_effects": "none"}, "checkpoint"),
    # the seed's agent worker: tasks of minutes to hours from a queue, state in PostgreSQL
    ({"duration": "hours", "work_shape": "single_task", "recovery_point_store": "database",
      "acceptable_loss": "one_batch"}, "checkpoint"),
    # order fulfilment (reserve → charge → notify) against plain APIs that must not repeat
    ({"work_shape": "multi_step_flow", "external_effects": "plain_api", "duplicate_cost": "unacceptable",
      "duration": "minutes"}, "state-machine"),
    # a ledger written by many workers, audited, no double application
    ({"audit": "required", "duplicate_cost": "unacceptable", "workers": "many", "work_shape": "entity_changes",
      "recovery_point_store": "database"}, "event-sourcing-idempotent"),
    # audit required but duplicates harmless: plain event sourcing, no command table
    ({"audit": "required", "work_shape": "entity_changes", "duplicate_cost": "harmless"}, "event-sourcing"),
    # nowhere to keep a recovery point at all: only a rerun is possible
    ({"recovery_point_store": "nowhere", "duration": "minutes"}, "idempotent-retry"),
    # a conflicting pair: a multi-step flow that is "seconds" long and cheap to rerun still
    # needs its steps carried on — the flow shape outweighs the duration
    ({"work_shape": "multi_step_flow", "duration": "seconds", "external_effects": "plain_api"}, "state-machine"),
    # nothing answered: the seed's advice — start with a state table + checkpoint
    ({}, "checkpoint"),
]


@pytest.mark.parametrize("answers,expected", CASES)
def test_top_pick(catalog, answers, expected):
    rec = recommend(answers, catalog)
    assert rec.top.strategy.id == expected, [(r.strategy.id, r.score) for r in rec.ranking]


def test_every_scenario_row_in_the_catalog_reproduces(catalog):
    for row in catalog.scenarios:
        rec = recommend(dict(row.answers), catalog)
        assert rec.top.strategy.id == row.strategy, row.id
        assert rec.scenario == row


def test_same_answers_same_output_whatever_their_order(catalog):
    answers = {"work_shape": "record_batch", "workers": "many", "duration": "hours", "external_effects": "plain_api"}
    reordered = dict(reversed(list(answers.items())))
    first = json.dumps(recommend(answers, catalog).to_json(), sort_keys=True)
    assert json.dumps(recommend(reordered, catalog).to_json(), sort_keys=True) == first
    assert json.dumps(recommend(answers, catalog).to_json(), sort_keys=True) == first


def test_every_strategy_is_ranked_with_its_reasons(catalog):
    rec = recommend({"duration": "hours", "work_shape": "record_batch"}, catalog)
    assert {r.strategy.id for r in rec.ranking} == set(catalog.strategy_ids)
    assert [r.score for r in rec.ranking] == sorted((r.score for r in rec.ranking), reverse=True)
    assert any(line.startswith("duration=hours") for line in rec.top.because)
    assert any(line.startswith("work_shape=record_batch") for line in rec.top.because)
    # idempotent retry lost on duration: its own reason says so
    assert any("duration=hours" in line for line in rec.ranked("idempotent-retry").against)
    assert any("duration=hours" in line for line in rec.why_not["idempotent-retry"])
    assert set(rec.why_not) == set(catalog.strategy_ids) - {"checkpoint"}


def test_pitfalls_follow_the_answers(catalog):
    # several workers → the concurrent clobber pitfall (seed 4.4) applies
    many = recommend({"work_shape": "record_batch", "workers": "many"}, catalog)
    assert "concurrent-clobber" in {p.id for p in many.pitfalls}
    # one worker, a database store → neither clobbering nor the corrupt-file pitfall (4.2)
    one = recommend({"work_shape": "record_batch", "workers": "one", "recovery_point_store": "database"}, catalog)
    ids = {p.id for p in one.pitfalls}
    assert "concurrent-clobber" not in ids and "corrupt-checkpoint-file" not in ids
    # a local file → the corrupt-file pitfall applies
    disk = recommend({"work_shape": "record_batch", "recovery_point_store": "local_disk"}, catalog)
    assert "corrupt-checkpoint-file" in {p.id for p in disk.pitfalls}


def test_swings_name_questions_that_change_the_pick(catalog):
    rec = recommend({"duration": "hours"}, catalog)
    assert rec.top.strategy.id == "checkpoint"
    swings = {(s.question, s.value): s.would_pick for s in rec.swings}
    assert swings[("work_shape", "unbounded_stream")] == "stream-checkpoint"
    assert swings[("work_shape", "multi_step_flow")] == "state-machine"
    assert all(q != "duration" for q, _ in swings)  # answered questions never swing
    for (question, value), pick in swings.items():  # each swing is true
        assert recommend({"duration": "hours", question: value}, catalog).top.strategy.id == pick


def test_mixed_stream_and_audit_adds_a_note(catalog):
    rec = recommend({"work_shape": "unbounded_stream", "audit": "required"}, catalog)
    assert rec.ranking[1].strategy.id == "event-sourcing"
    assert any("audit" in note for note in rec.notes)


def test_json_shape_is_the_public_interface(catalog):
    data = recommend({"duration": "seconds"}, catalog).to_json()
    assert isinstance(data["ranking"], list)
    for item in data["ranking"]:
        assert isinstance(item["strategy"], str)
        assert isinstance(item["score"], (int, float))
        assert isinstance(item["because"], list)
    json.dumps(data)
