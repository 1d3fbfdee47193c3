"""Decision records: every MADR section is there and says the right thing."""

from __future__ import annotations

import datetime as dt

import pytest

from advisor.errors import OutputExistsError
from advisor.review import decision_record, judge_current, write_text_safely
from advisor.engine import recommend

BATCH = {"duration": "hours", "work_shape": "record_batch", "workers": "many", "external_effects": "plain_api"}
SECTIONS = [
    "## Context and problem statement",
    "## Decision drivers",
    "## Considered options",
    "## Decision outcome",
    "### Recovery point",
    "### Consequences",
    "## Pros and cons of the options",
    "## Pitfall checklist",
    "## Verification plan",
]


def record(catalog, **kw):
    return decision_record(BATCH, catalog, date=dt.date(2026, 1, 2), **kw)


def test_sections_in_order(catalog):
    text = record(catalog)
    positions = [text.index(s) for s in SECTIONS]
    assert positions == sorted(positions)


def test_context_lists_every_answer(catalog):
    text = record(catalog)
    assert "| How long does one run take? | Hours or more |" in text
    assert "| Must past states be explained or rebuilt? | (unknown) |" in text


def test_outcome_and_options(catalog):
    text = record(catalog)
    assert text.splitlines()[0] == "# Continuity mechanism for the long-running job: Checkpoint + state table"
    assert 'Chosen option: "Checkpoint + state table"' in text
    for s in catalog.strategies:
        assert f"### {s.name}" in text
    assert "Ranked lower:" in text


def test_pitfall_checklist_is_for_these_answers(catalog):
    text = record(catalog)
    checklist = text.split("## Pitfall checklist")[1].split("## Verification plan")[0]
    assert "- [ ] **Concurrent workers overwrite each other's progress**" in checklist  # workers=many
    assert "- [ ] **A side effect is repeated after recovery**" in checklist  # plain_api


def test_verification_plan_is_the_drill(catalog):
    plan = record(catalog).split("## Verification plan")[1]
    assert "advisor generate checkpoint" in plan
    assert "drill --records 2000 --kills 10" in plan and "--sigterm" in plan
    assert "lost = 0" in plan and "duplicate_effects = 0" in plan


def test_chosen_overrides_and_states_the_gap(catalog):
    text = record(catalog, chosen="event-sourcing")
    assert 'Chosen option: "Event sourcing"' in text
    assert "The advisor ranked Checkpoint + state table first" in text


@pytest.mark.parametrize(
    "current,fits",
    [
        ("checkpoint", True),  # the top pick
        ("idempotent-retry", False),  # hours of rerun per kill
        ("stream-checkpoint", False),  # a finite batch is no stream
    ],
)
def test_current_strategy_verdict(catalog, current, fits):
    verdict = judge_current(recommend(BATCH, catalog), current)
    assert verdict.fits is fits
    text = record(catalog, current=current)
    assert ("**Fits.**" if fits else "**Does not fit.**") in text
    if not fits:
        assert verdict.risks and "What it risks" in text


def test_write_text_safely(tmp_path):
    path = tmp_path / "d.md"
    write_text_safely(path, "one")
    with pytest.raises(OutputExistsError):
        write_text_safely(path, "two")
    assert path.read_text() == "one"
    write_text_safely(path, "two", force=True)
    assert path.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["d.md"]  # no temp file left behind
