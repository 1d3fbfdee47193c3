"""Every past incident counted answer by answer (advisor/review/tally.py): an answer that went with
one fix on any design moves that fix up where the rules and the nearest incidents say nothing —
named on the finding's line — and never makes a finding of a control by itself."""

from __future__ import annotations

import json
from pathlib import Path

from advisor.model.answers import CurrentDesign
from advisor.model.loader import load_catalog
from advisor.review.judge import review
from advisor.review.ranking import TALLY_WEIGHT


def _catalog(catalog_copy: Path, rows: list[dict]) -> object:
    """The bundled catalog with no evidence rules and only these past incidents."""
    (catalog_copy / "evidence.yaml").unlink()
    (catalog_copy / "precedents.yaml").write_text(json.dumps({"precedents": rows}))
    return load_catalog(catalog_copy)


def _rows(n: int, current: str, fix: str, answers: dict) -> list[dict]:
    return [{"id": f"{fix}-{current}-{i}", "source": f"example/{fix}#{i}", "current": current, "fix": fix, "answers": answers}
            for i in range(n)]


# On a state machine, units stuck while their worker still ran were fixed by reclaiming them; on a
# checkpoint, restarts from zero after a crash by resuming from the latest position.
STUCK_ROWS = (_rows(4, "state-machine", "stale-tasks-reclaimed", {"symptoms": ["stuck_unit"], "trigger": "still_running"})
              + _rows(4, "checkpoint", "resumes-from-latest", {"symptoms": ["redone_from_zero"], "trigger": "crash"}))
STUCK = {"symptoms": "stuck_unit", "trigger": "still_running", "workers": "many"}


def test_an_answer_that_went_with_one_fix_on_another_design_moves_it_up(catalog_copy):
    catalog = _catalog(catalog_copy, STUCK_ROWS)
    findings = review(STUCK, catalog, current=CurrentDesign("checkpoint")).findings
    first = findings[0]
    assert first.control.id == "stale-tasks-reclaimed", [f.control.id for f in findings]
    # No checkpoint incident shares an answer with these, so only the tally speaks.
    assert "most like these answers" not in first.ranked
    assert "all past incidents, answer by answer, favour it (most: `symptoms=stuck_unit`" in first.ranked
    assert 0 < first.score <= TALLY_WEIGHT
    # The declared order comes back without them: resuming is the checkpoint's first control.
    (catalog_copy / "precedents.yaml").unlink()
    bare = review(STUCK, load_catalog(catalog_copy), current=CurrentDesign("checkpoint")).findings
    assert bare[0].control.id != "stale-tasks-reclaimed" and all(f.score == 0 for f in bare)


def test_answers_that_tell_the_fixes_apart_no_better_than_chance_move_nothing(catalog_copy):
    """An answer every incident gave, whatever its fix, favours none of them."""
    both = {"symptoms": ["stuck_unit"], "trigger": "crash"}
    rows = _rows(3, "state-machine", "stale-tasks-reclaimed", both) + _rows(3, "state-machine", "sigterm-within-grace", both)
    findings = review({"symptoms": "stuck_unit", "trigger": "crash"}, _catalog(catalog_copy, rows),
                      current=CurrentDesign("checkpoint")).findings
    assert all(f.score == 0 for f in findings), [(f.control.id, f.score) for f in findings]


def test_the_tally_alone_never_makes_a_finding_of_a_control_that_hangs_on_an_open_question(catalog_copy):
    """Looking before a call matters only if the effect is a call: with the effect's kind open, a
    record of that fix elsewhere leaves it apart (answer it, or check it too)."""
    rows = (_rows(4, "state-machine", "intent-before-call", {"symptoms": ["duplicate_effect"], "trigger": "retry_after_error"})
            + _rows(4, "idempotent-retry", "bounded-retries", {"symptoms": ["never_finishes"], "trigger": "crash"}))
    r = review({"symptoms": "duplicate_effect", "trigger": "retry_after_error"}, _catalog(catalog_copy, rows),
               current=CurrentDesign("idempotent-retry"))
    assert "intent-before-call" in {c.id for c in r.undecided}
    assert "intent-before-call" not in {f.control.id for f in r.findings}
    # ... while the effect's kind, once answered, lets the same record rank it first.
    given = review({"symptoms": "duplicate_effect", "trigger": "retry_after_error", "external_effects": "plain_api"},
                   load_catalog(catalog_copy), current=CurrentDesign("idempotent-retry"))
    assert given.findings[0].control.id == "intent-before-call" and "answer by answer" in given.findings[0].ranked
