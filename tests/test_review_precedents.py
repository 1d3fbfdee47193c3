"""The review's past incidents (strategies/precedents.yaml): the fixes of the incidents most like
the team's answers, on the same design, break what the evidence rules leave close — and the record
names them."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from advisor.errors import CatalogError
from advisor.model.answers import CurrentDesign
from advisor.model.loader import load_catalog
from advisor.review.judge import decision_record, review

CALIBRATION = Path(__file__).resolve().parent / "calibration"
DAY = dt.date(2026, 1, 2)

STUCK = {"symptoms": ["stuck_unit"], "trigger": "crash", "workers": "many"}
ROWS = [
    {"id": "stuck-one", "source": "example/queue#1", "current": "checkpoint", "fix": "stale-tasks-reclaimed", "answers": STUCK},
    {"id": "stuck-two", "source": "example/queue#2", "current": "checkpoint", "fix": "stale-tasks-reclaimed",
     "answers": {**STUCK, "duration": "hours"}},
    {"id": "torn-file", "source": "example/files#3", "current": "checkpoint", "fix": "checkpoint-file-checksummed",
     "answers": {"symptoms": ["corrupt_state"], "recovery_point_store": "local_disk", "trigger": "crash"}},
]  # fmt: skip


def _catalog(catalog_copy: Path, rows: list[dict]) -> object:
    """The bundled catalog with no evidence rules and only these past incidents (JSON is YAML,
    and it never writes an alias for the answers two rows share)."""
    (catalog_copy / "evidence.yaml").unlink()
    (catalog_copy / "precedents.yaml").write_text(json.dumps({"precedents": rows}))
    return load_catalog(catalog_copy)


def _findings(catalog, answers, current="checkpoint"):
    return review(answers, catalog, current=CurrentDesign(current)).findings


def test_the_most_similar_past_incidents_decide_what_the_rules_leave_even(catalog_copy):
    catalog = _catalog(catalog_copy, ROWS)
    stuck = _findings(catalog, {"symptoms": "stuck_unit", "trigger": "crash", "workers": "many", "recovery_point_store": "local_disk"})
    assert stuck[0].control.id == "stale-tasks-reclaimed", [f.control.id for f in stuck]
    assert ("the fix in 2 of the 3 past incidents most like these answers"
            " ([example/queue#1](https://github.com/example/queue/issues/1))") in stuck[0].ranked
    torn = _findings(catalog, {"symptoms": "corrupt_state", "trigger": "crash", "recovery_point_store": "local_disk"})
    assert torn[0].control.id == "checkpoint-file-checksummed", [f.control.id for f in torn]
    assert "([example/files#3](https://github.com/example/files/issues/3))" in torn[0].ranked
    # Without them, the same answers list the controls in the order the strategy declares them.
    (catalog_copy / "precedents.yaml").unlink()
    bare = _findings(load_catalog(catalog_copy), {"symptoms": "stuck_unit", "trigger": "crash", "workers": "many",
                                                  "recovery_point_store": "local_disk"})
    assert bare[0].control.id == "resumes-from-latest" and bare[0].ranked == ""


def test_only_incidents_on_the_same_design_are_compared(catalog_copy):
    other = [{**row, "current": "state-machine"} for row in ROWS if row["fix"] == "stale-tasks-reclaimed"]
    catalog = _catalog(catalog_copy, other)
    findings = _findings(catalog, {"symptoms": "stuck_unit", "trigger": "crash", "workers": "many"})
    assert findings[0].control.id == "resumes-from-latest" and all(f.score == 0 for f in findings)
    assert _findings(catalog, {"symptoms": "stuck_unit", "trigger": "crash", "workers": "many"}, "state-machine")[0].score > 0


def test_past_incidents_bring_a_control_that_hangs_on_an_unanswered_question_into_the_findings(catalog_copy):
    """A control needed only for an answer not given stays apart (answer it, or check it too) while
    nothing points at it; once past incidents like this one were fixed by it, it is a finding with
    its condition named, so the team checks the condition instead of skipping the usual fix."""
    rows = [{"id": "revoked", "source": "example/stream#4", "current": "checkpoint", "fix": "offsets-committed-on-revoke",
             "answers": {"symptoms": ["duplicate_effect"], "trigger": "planned_stop"}}]
    seen = {"symptoms": "duplicate_effect", "trigger": "planned_stop"}
    elsewhere = [{**rows[0], "current": "state-machine", "fix": "stale-tasks-reclaimed"}]  # another design's
    bare = review(seen, _catalog(catalog_copy, elsewhere), current=CurrentDesign("checkpoint"))
    assert "offsets-committed-on-revoke" in {c.id for c in bare.undecided}
    assert "offsets-committed-on-revoke" not in {f.control.id for f in bare.findings}
    (catalog_copy / "precedents.yaml").write_text(json.dumps({"precedents": rows}))
    r = review(seen, load_catalog(catalog_copy), current=CurrentDesign("checkpoint"))
    assert "offsets-committed-on-revoke" not in {c.id for c in r.undecided}
    finding = next(f for f in r.findings if f.control.id == "offsets-committed-on-revoke")
    assert "recovery_point_store" in finding.only_if and "1 of the 1 past incidents" in finding.ranked


BROKEN = [
    ({"current": "batch-magic"}, "precedents[0].current", "unknown strategy"),
    ({"fix": "snapshots"}, "precedents[0].fix", "not a control of checkpoint"),
    ({"answers": {"symptoms": ["stuck_unit"], "colour": "blue"}}, "precedents[0].answers.colour", "unknown question"),
    ({"answers": {"symptoms": ["stuck_unit"], "workers": "lots"}}, "precedents[0].answers.workers", "unknown value"),
    ({"answers": {"workers": "many"}}, "precedents[0].answers.symptoms", "says what the team saw"),
    ({"surprise": 1}, "precedents[0].surprise", "unknown key"),
]  # fmt: skip


@pytest.mark.parametrize("change,key,reason", BROKEN)
def test_a_broken_precedent_names_file_key_and_reason(catalog_copy, change, key, reason):
    (catalog_copy / "precedents.yaml").write_text(json.dumps({"precedents": [{**ROWS[0], **change}]}))
    with pytest.raises(CatalogError) as err:
        load_catalog(catalog_copy)
    message = str(err.value)
    assert "precedents.yaml" in message and key in message and reason in message, message


def test_a_precedent_id_is_unique(catalog_copy):
    (catalog_copy / "precedents.yaml").write_text(json.dumps({"precedents": [ROWS[0], {**ROWS[1], "id": "stuck-one"}]}))
    with pytest.raises(CatalogError, match="duplicate precedent id 'stuck-one'"):
        load_catalog(catalog_copy)


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, CALIBRATION / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(CALIBRATION))
    spec.loader.exec_module(module)
    return module


def test_the_bundled_precedents_are_the_tuned_rows_and_never_a_held_out_one(catalog):
    precedents = _load("precedents")
    assert precedents.main([]) == 0, "run: python tests/calibration/precedents.py --write"
    ranking = _load("review_ranking")
    held_out = ranking.load_rows(ranking.HELDOUT)
    bundled = {p.id for p in catalog.evidence.precedents} | {p.source for p in catalog.evidence.precedents}
    assert not bundled & ({r["id"] for r in held_out} | {str(r["source"]) for r in held_out})
    tuned = [r for r in ranking.load_rows(ranking.TUNED) if r["review"]["real_fix"]]
    assert len(catalog.evidence.precedents) == len(tuned) > 200


def test_the_measure_never_compares_a_row_with_itself(catalog):
    ranking = _load("review_ranking")
    some = catalog.evidence.precedents[5]
    without = ranking.leave_out(catalog, some.id)
    assert [p.id for p in without.evidence.precedents] == [p.id for p in catalog.evidence.precedents if p.id != some.id]
    assert ranking.leave_out(catalog, "not-a-row") is catalog


def test_the_record_says_when_past_incidents_alone_order_the_quiet_findings(catalog_copy):
    """Findings below the third that only past incidents point at get no line of their own; the
    sentence naming them together says what ordered them."""
    fixes = ("stale-tasks-reclaimed", "sigterm-within-grace", "checkpoint-by-time-and-count", "resumes-from-latest")
    rows = [{"id": f"stuck-{i}", "source": f"example/queue#{i}", "current": "checkpoint", "fix": fix, "answers": STUCK}
            for i, fix in enumerate(fixes)]
    answers = {"symptoms": "stuck_unit", "trigger": "crash", "workers": "many"}
    text = decision_record(answers, _catalog(catalog_copy, rows), current=CurrentDesign("checkpoint"), date=DAY)
    assert "nothing you saw points at them; listed by the past incidents (the most like yours, and all of them counted answer by answer), then in the order" in text
    assert "Ranked by what you saw (a unit stuck), when it happened (a crash" in text
    (catalog_copy / "precedents.yaml").unlink()
    bare = decision_record(answers, load_catalog(catalog_copy), current=CurrentDesign("checkpoint"), date=DAY)
    assert "points at them; listed in the order the strategy declares its controls" in bare
