"""The decision engine: the seed's scenario table, mixed cases, and the explanation it gives."""

from __future__ import annotations

import json

import pytest

from advisor.model.engine import recommend

# (answers, expected top strategy). One comment per case says why.
CASES = [
    # --- the scenario table (strategies/scenarios.yaml), one row each ----------------------
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
    # allowed strategies first, each group best score first
    keys = [(not r.allowed, -r.score) for r in rec.ranking]
    assert keys == sorted(keys)
    drivers = {(r.question, r.value) for r in rec.top.reasons if r.weight > 0}
    assert {("duration", "hours"), ("work_shape", "record_batch")} <= drivers
    # idempotent retry lost on duration: its own reason says so, as a sentence in plain words
    against = rec.ranked("idempotent-retry").against
    assert any("Rerunning hours of work" in line and "(you answered: hours or more)" in line for line in against)
    assert any("Rerunning hours of work" in line for line in rec.why_not["idempotent-retry"])
    assert set(rec.why_not) == set(catalog.strategy_ids) - {"checkpoint"}


def test_reasons_read_as_sentences_not_key_value_pairs(catalog):
    rec = recommend({"duration": "hours", "work_shape": "single_task", "acceptable_loss": "whole_task",
                     "workers": "many", "audit": "none"}, catalog)  # fmt: skip
    lines = [*rec.top.because, *rec.top.against, *(x for v in rec.why_not.values() for x in v)]
    for line in lines:
        assert line[0].isupper() and line.endswith("."), line
        assert "=" not in line.split("(")[0], line  # no `duration=hours:` prefixes


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


def test_json_is_strict_json_even_when_a_settling_answer_rules_the_runner_up_out(catalog):
    # a settling margin is unbounded when the new runner-up is ruled out: null, never Infinity
    import itertools

    from advisor.docgen.decision_page import sample_answers

    unbounded = 0
    for answers in itertools.islice(sample_answers(catalog, seed=9), 300):
        data = json.loads(json.dumps(recommend(answers, catalog).to_json(), allow_nan=False))
        unbounded += sum(s["margin"] is None for s in (data["close_call"] or {}).get("settle", []))
    assert unbounded


def test_json_shape_is_the_public_interface(catalog):
    data = recommend({"duration": "seconds"}, catalog).to_json()
    assert isinstance(data["ranking"], list)
    for item in data["ranking"]:
        assert isinstance(item["strategy"], str)
        assert isinstance(item["score"], (int, float))
        assert isinstance(item["because"], list)
    json.dumps(data)


# --- decision model v2: decisive answers, conflicts, close calls, recipes ---------------------

# (answers, expected top, strategies that must be ruled out). One comment per case: the class of
# error it guards against (issue 8).
DECISIVE = [
    # one indivisible task, rerunning it whole is fine, hours long: a rerun, never an offset checkpoint
    ({"work_shape": "single_task", "acceptable_loss": "whole_task", "duration": "hours"},
     "idempotent-retry", {"checkpoint", "state-machine"}),
    # a multi-step flow whose progress sits on local disk still tracks its steps: the file shapes the recipe
    ({"work_shape": "multi_step_flow", "recovery_point_store": "local_disk", "duration": "hours"},
     "state-machine", {"checkpoint", "idempotent-retry"}),
    # ... and the same flow with a database picks the same mechanism
    ({"work_shape": "multi_step_flow", "recovery_point_store": "database", "duration": "hours"},
     "state-machine", {"checkpoint", "idempotent-retry"}),
    # a seconds-long payment call with no audit need: no event sourcing (its own avoid_when)
    ({"duration": "seconds", "work_shape": "single_task", "duplicate_cost": "unacceptable", "audit": "none",
      "external_effects": "plain_api", "recovery_point_store": "database"},
     "idempotent-retry", {"event-sourcing", "event-sourcing-idempotent"}),
    # an audited ledger where duplicates are unacceptable: the idempotent variant, plain event sourcing ruled out
    ({"audit": "required", "work_shape": "entity_changes", "recovery_point_store": "event_log",
      "duplicate_cost": "unacceptable"}, "event-sourcing-idempotent", {"event-sourcing"}),
    # an agent loop: discovered, nondeterministic steps are journaled, never re-executed
    ({"work_shape": "multi_step_flow", "nondeterminism": "nondeterministic", "work_discovery": "discovered",
      "duration": "hours", "recovery_point_store": "database"}, "state-machine", {"checkpoint"}),
    # a crawl: work discovered as it runs → a frontier table (the checkpoint strategy's state table)
    ({"work_shape": "record_batch", "work_discovery": "discovered", "duration": "hours",
      "recovery_point_store": "local_disk"}, "checkpoint", {"stream-checkpoint"}),
    # a Kafka consumer whose offsets the broker keeps: the platform's own checkpoint
    ({"work_shape": "unbounded_stream", "recovery_point_store": "broker_or_orchestrator",
      "input_replay": "replayable", "duration": "hours"}, "stream-checkpoint", {"state-machine"}),
    # a stream whose input can't be replayed can't rely on the framework's replay
    ({"work_shape": "unbounded_stream", "input_replay": "not_replayable", "recovery_point_store": "database",
      "duration": "hours"}, "checkpoint", {"stream-checkpoint"}),
]  # fmt: skip


@pytest.mark.parametrize("answers,expected,ruled_out", DECISIVE)
def test_decisive_answers_rule_strategies_out(catalog, answers, expected, ruled_out):
    rec = recommend(answers, catalog)
    assert rec.top.strategy.id == expected, [(r.strategy.id, r.score, r.ruled_out) for r in rec.ranking]
    for sid in ruled_out:
        ranked = rec.ranked(sid)
        assert ranked.ruled_out, sid
        assert rec.why_not[sid][0] == ranked.ruled_out[0]  # the ruling-out reason leads "why not"


def test_a_ruled_out_strategy_never_outranks_an_allowed_one(catalog):
    # checkpoint would collect many bonuses here, but whole-task loss rules it out
    rec = recommend({"work_shape": "record_batch", "acceptable_loss": "whole_task", "duration": "hours",
                     "recovery_point_store": "database", "workers": "many", "external_effects": "none"}, catalog)  # fmt: skip
    allowed = [r.allowed for r in rec.ranking]
    assert allowed == sorted(allowed, reverse=True)
    assert rec.ranked("checkpoint").score > rec.top.score  # more points, still ruled out


def test_conflicting_answers_are_named(catalog):
    rec = recommend({"recovery_point_store": "nowhere", "acceptable_loss": "nothing"}, catalog)
    (warning,) = [w for w in rec.warnings if w.id == "nowhere-but-keep-progress"]
    assert set(warning.revisit) == {"recovery_point_store", "acceptable_loss"}
    assert recommend({"duration": "seconds", "work_shape": "unbounded_stream"}, catalog).warnings
    assert recommend({"recovery_point_store": "stream_engine", "input_replay": "not_replayable"}, catalog).warnings
    assert not recommend({"duration": "hours", "work_shape": "record_batch"}, catalog).warnings
    assert recommend({"recovery_point_store": "nowhere"}, catalog).to_json()["warnings"] == []


def test_a_close_call_names_what_would_settle_it(catalog):
    # event sourcing and its idempotent variant tie on these answers
    rec = recommend({"recovery_point_store": "event_log", "work_shape": "entity_changes",
                     "external_effects": "plain_api"}, catalog)  # fmt: skip
    close = rec.close_call
    assert close is not None and close.margin < catalog.close_call_margin
    assert close.runner_up in {"event-sourcing", "event-sourcing-idempotent"}
    settled = {(s.question, s.value): s.would_pick for s in close.settle}
    assert settled[("duplicate_cost", "unacceptable")] == "event-sourcing-idempotent"
    for (question, value), pick in settled.items():  # each settling answer is true
        after = recommend({**rec.answers, question: value}, catalog)
        assert after.top.strategy.id == pick
        assert after.close_call is None or after.top.strategy.id != rec.top.strategy.id
    # a clear lead is no close call
    assert recommend({"work_shape": "multi_step_flow", "external_effects": "plain_api"}, catalog).close_call is None


def test_the_recipe_is_worded_for_the_answers(catalog):
    def recipe(**answers):
        rec = recommend(answers, catalog)
        return rec.top.strategy.id, rec.recipe

    sid, r = recipe(work_shape="record_batch", duration="hours", acceptable_loss="one_batch",
                    recovery_point_store="object_storage")  # fmt: skip
    assert sid == "checkpoint" and "pointer" in r.where and "processed_offset" not in r.where
    sid, r = recipe(work_shape="record_batch", duration="hours", work_discovery="discovered")
    assert sid == "checkpoint" and "frontier" in r.where
    # a Kafka consumer gets Kafka's words (tests/test_stack_words.py: every broker its own)
    sid, r = recipe(work_shape="unbounded_stream", recovery_point_store="broker_or_orchestrator", duration="hours",
                    workers="many", broker="kafka")  # fmt: skip
    assert sid == "stream-checkpoint" and "consumer group's committed offsets" in r.where
    assert "onPartitionsRevoked" in r.how_often
    sid, r = recipe(work_shape="single_task", duration="seconds", external_effects="plain_api",
                    duplicate_cost="unacceptable")  # fmt: skip
    assert sid == "idempotent-retry" and "reconciliation" in r.duplicates
    # SMTP can't be asked by key: the plain-API fix never tells the user to look the call up
    rec = recommend({"work_shape": "record_batch", "duration": "hours", "external_effects": "plain_api"}, catalog)
    (dup,) = [p for p in rec.pitfalls if p.id == "duplicate-after-recovery"]
    assert "can't be asked afterwards" in rec.fix(dup) and "look it up" not in rec.fix(dup)
    # an event-sourced ledger's concurrency fix talks about versions, not processed_offset
    rec = recommend({"audit": "required", "work_shape": "entity_changes", "workers": "many",
                     "duplicate_cost": "unacceptable"}, catalog)  # fmt: skip
    assert not any("processed_offset" in rec.fix(p) for p in rec.pitfalls)


def test_user_facing_text_cites_no_internal_documents(catalog):
    import re

    internal = re.compile(r"\bseed\b|seeds/|shared/|§|\b000\b|\b002\b", re.IGNORECASE)
    for answers in ({}, {"work_shape": "record_batch", "recovery_point_store": "local_disk", "workers": "many"},
                    {"audit": "required", "duplicate_cost": "unacceptable", "external_effects": "plain_api"}):
        data = recommend(answers, catalog).to_json()
        data.pop("answers")
        assert not internal.search(json.dumps(data, ensure_ascii=False)), answers


def test_open_questions_are_those_that_can_still_change_the_pick(catalog):
    from advisor.model.engine import open_questions

    answers = {"work_shape": "multi_step_flow", "recovery_point_store": "database"}
    still = open_questions(answers, catalog)
    assert "work_shape" not in still and "recovery_point_store" not in still
    base = recommend(answers, catalog).top.strategy.id
    for q in catalog.questions:  # a question left out can't change the pick alone
        if q.id in answers or q.id in still:
            continue
        assert all(recommend({**answers, q.id: v}, catalog).top.strategy.id == base for v in q.values), q.id
    assert set(open_questions({}, catalog)) >= {"work_shape", "duration", "audit"}


def test_open_questions_can_keep_those_that_still_shape_the_recipe(catalog):
    from advisor.model.engine import open_questions

    answers = {"work_shape": "multi_step_flow"}
    deciding = set(open_questions(answers, catalog))
    shaping = set(open_questions(answers, catalog, recipe=True))
    assert deciding <= shaping
    # the external effects no longer change the mechanism of a flow, but they change how its
    # duplicates are avoided (look the call up, resend, or park it)
    assert "external_effects" in shaping


# One answer alone: only an answer that decides the mechanism picks an event log or a stream
# framework; the rest stay with the simple defaults (a rerun with a key, a checkpoint) or the
# step tracking their answer names.
SINGLE = [
    ("work_shape", "unbounded_stream", "stream-checkpoint"),  # what stream frameworks are for
    ("recovery_point_store", "stream_engine", "stream-checkpoint"),  # the framework already keeps it
    ("work_shape", "multi_step_flow", "state-machine"),  # steps to track
    # a nondeterministic step alone says nothing about a flow or a history: no state machine's or
    # event log's bonus (their gates, issue 24), so the simple default stands
    ("nondeterminism", "nondeterministic", "checkpoint"),
    ("work_discovery", "discovered", "checkpoint"),  # work found as it runs: a frontier table
    ("audit", "required", "event-sourcing"),  # history is the point
    ("recovery_point_store", "event_log", "event-sourcing"),  # the changes are already events
    ("inbound_duplicates", "possible", "idempotent-retry"),  # a dedupe key, not a ledger
    ("recovery_point_store", "broker_or_orchestrator", "idempotent-retry"),  # the platform retries the task
    ("work_shape", "single_task", "idempotent-retry"),  # rerun it whole
    ("work_shape", "record_batch", "checkpoint"),  # a position to record
]


@pytest.mark.parametrize("question,value,expected", SINGLE)
def test_one_answer_alone(catalog, question, value, expected):
    assert recommend({question: value}, catalog).top.strategy.id == expected
