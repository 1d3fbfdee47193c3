"""The catalog loader: the bundled catalog is complete, and every broken file is reported
with its file, key and reason — never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.errors import CatalogError
from advisor.model.engine import recommend
from advisor.model.loader import load_catalog

STRATEGY_IDS = {
    "idempotent-retry", "checkpoint", "stream-checkpoint",
    "state-machine", "event-sourcing", "event-sourcing-idempotent",
}  # fmt: skip

# The answers format is a public interface (DESIGN.md §1): these ids and values must exist.
PUBLIC_QUESTIONS = {
    "recovery_point_store": {"nowhere", "local_disk", "database", "stream_engine", "event_log"},
    "acceptable_loss": {"whole_task", "one_batch", "nothing"},
    "duplicate_cost": {"harmless", "annoying", "unacceptable"},
    "duration": {"seconds", "minutes", "hours"},
    "work_shape": {"single_task", "record_batch", "unbounded_stream", "multi_step_flow", "entity_changes"},
    "audit": {"none", "required"},
    "workers": {"one", "many"},
    "external_effects": {"none", "idempotent_api", "plain_api"},
}


def test_bundled_catalog_has_the_six_strategies(catalog):
    assert set(catalog.strategy_ids) == STRATEGY_IDS


@pytest.mark.parametrize("question,values", sorted(PUBLIC_QUESTIONS.items()))
def test_public_question_ids_and_values_exist(catalog, question, values):
    assert values <= set(catalog.question(question).values)


def test_the_three_recovery_point_questions_come_first(catalog):
    assert [q.id for q in catalog.questions[:3]] == ["recovery_point_store", "acceptable_loss", "duplicate_cost"]
    assert {q.group for q in catalog.questions[:3]} == {"recovery_point"}


def test_every_strategy_answers_the_three_questions_and_has_pitfalls(catalog):
    for s in catalog.strategies:
        assert s.granularity in {"task", "record", "event"}
        assert s.recovery_point.where and s.recovery_point.how_often and s.recovery_point.duplicates
        assert s.pitfalls and all(p.fix for p in s.pitfalls), s.id
        assert s.template == s.id


def test_granularities_follow_the_seed(catalog):
    # seed 000 §2.2: task level → idempotent retry, record level → checkpoint, event level → event sourcing
    assert catalog.strategy("idempotent-retry").granularity == "task"
    assert catalog.strategy("checkpoint").granularity == "record"
    assert catalog.strategy("event-sourcing").granularity == "event"


@pytest.mark.parametrize(
    "needle",
    [
        "processed_offset = ?",  # seed 4.4 optimistic offset lock
        "os.replace",  # seed 3.1 / 4.2 atomic progress file
        "two generations",  # seed 4.2
        "prepared",  # seed 4.1 prepared/done
        "subscribers",  # seed 4.3 side effects only from subscribers
        "versioned JSON",  # seed 002 lesson 1
        "SIGTERM",  # seed 002 graceful shutdown
        "backoff",  # retries with backoff
        "snapshot",  # event sourcing snapshots
        "99.9%",  # seed 002 verification metrics
    ],
)
def test_seed_ideas_are_in_the_catalog(catalog, needle):
    text = repr(catalog).lower()
    assert needle.lower() in text


def test_scenarios_name_existing_strategies_once_each(catalog):
    assert sorted(row.strategy for row in catalog.scenarios) == sorted(STRATEGY_IDS)


# Each case breaks one file of a copy of the catalog; the error must name the file and key.
BROKEN = [
    # malformed YAML
    ("checkpoint.yaml", lambda t: t + "\n  - : [\n", "checkpoint.yaml", "line"),
    # an unknown top-level key (a typo)
    ("checkpoint.yaml", lambda t: t + "\npitfals: []\n", "checkpoint.yaml", "pitfals"),
    # a fit entry for a question that does not exist
    ("checkpoint.yaml", lambda t: t.replace("  duration:\n    seconds", "  durration:\n    seconds", 1),
     "checkpoint.yaml", "fit.durration"),
    # a fit entry for a value that does not exist
    ("checkpoint.yaml", lambda t: t.replace("    hours: {score: 3", "    days: {score: 3", 1),
     "checkpoint.yaml", "fit.duration.days"),
    # a granularity outside task/record/event
    ("checkpoint.yaml", lambda t: t.replace("granularity: record", "granularity: batch"),
     "checkpoint.yaml", "granularity"),
    # id different from the file name
    ("checkpoint.yaml", lambda t: t.replace("id: checkpoint\n", "id: checkpointing\n", 1), "checkpoint.yaml", "id"),
    # a reference to a shared pitfall that does not exist
    ("checkpoint.yaml", lambda t: t.replace("  - zombie-tasks\n", "  - zombies\n"), "checkpoint.yaml", "pitfalls["),
    # a missing required text
    ("state-machine.yaml", lambda t: t.replace("name: State machine\n", ""), "state-machine.yaml", "name"),
    # a score that is not a number
    ("state-machine.yaml", lambda t: t.replace("multi_step_flow: {score: 5", "multi_step_flow: {score: high"),
     "state-machine.yaml", "score"),
    # a scenario naming an unknown strategy
    ("scenarios.yaml", lambda t: t.replace("strategy: state-machine", "strategy: saga"), "scenarios.yaml", "strategy"),
    # a question with a duplicated choice id
    ("questions.yaml", lambda t: t.replace("      - id: minutes", "      - id: seconds"), "questions.yaml", "choices"),
    # the top level is a list, not a mapping
    ("pitfalls.yaml", lambda t: "- just\n- a list\n", "pitfalls.yaml", "top level"),
]


@pytest.mark.parametrize("name,mutate,where,key", BROKEN)
def test_broken_catalog_names_file_and_key(catalog_copy: Path, name, mutate, where, key):
    path = catalog_copy / name
    path.write_text(mutate(path.read_text()))
    with pytest.raises(CatalogError) as err:
        load_catalog(catalog_copy)
    assert where in str(err.value)
    assert key in str(err.value)


def test_missing_catalog_directory(tmp_path):
    with pytest.raises(CatalogError, match="does not exist"):
        load_catalog(tmp_path / "nope")


def test_missing_questions_file(catalog_copy):
    (catalog_copy / "questions.yaml").unlink()
    with pytest.raises(CatalogError, match="questions.yaml"):
        load_catalog(catalog_copy)


def test_a_new_strategy_and_question_need_no_python(catalog_copy: Path):
    """DESIGN §1: adding a strategy or a question is data only."""
    questions = (catalog_copy / "questions.yaml").read_text()
    questions += """
  - id: saga_steps
    group: trait
    asks: Can every step be undone?
    help: Sagas need a compensating action per step.
    choices:
      - {id: possible, label: "Yes", help: Every step has an undo.}
      - {id: impossible, label: "No", help: Some steps cannot be undone.}
"""
    (catalog_copy / "questions.yaml").write_text(questions)
    saga = (catalog_copy / "state-machine.yaml").read_text()
    saga = saga.replace("id: state-machine", "id: saga").replace("order: 3", "order: 7")
    saga = saga.replace("name: State machine", "name: Saga with compensations")
    saga = saga.replace("fit:\n", "fit:\n  saga_steps:\n    possible: {score: 9, why: every step can be compensated}\n")
    (catalog_copy / "saga.yaml").write_text(saga)

    catalog = load_catalog(catalog_copy)
    rec = recommend({"work_shape": "multi_step_flow", "saga_steps": "possible"}, catalog)
    assert rec.top.strategy.id == "saga"
    assert ("saga_steps", "possible") in {(r.question, r.value) for r in rec.top.reasons}
    assert any("Every step can be compensated" in line for line in rec.top.because)


def test_the_parsed_catalog_cache_never_serves_stale_or_broken_data(catalog_copy: Path):
    """load_catalog keeps parsed YAML as JSON in the user's cache (start-up time), never in the
    catalog folder; an edit or a corrupt cache file must never change what is loaded."""
    from advisor.model.parsed_cache import cache_path

    before = sorted(p.name for p in catalog_copy.iterdir())
    first = load_catalog(catalog_copy)
    assert cache_path(catalog_copy).exists()
    assert sorted(p.name for p in catalog_copy.iterdir()) == before
    path = catalog_copy / "state-machine.yaml"
    path.write_text(path.read_text().replace("name: State machine\n", "name: State machine (edited)\n"))
    assert load_catalog(catalog_copy).strategy("state-machine").name == "State machine (edited)"
    cache_path(catalog_copy).write_text("{not json")
    assert load_catalog(catalog_copy).strategy("checkpoint") == first.strategy("checkpoint")
    path.write_text(path.read_text().replace("name: State machine (edited)\n", ""))
    with pytest.raises(CatalogError, match="name"):  # validation runs on cached data too
        load_catalog(catalog_copy)
