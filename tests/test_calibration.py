"""Calibration against real incidents (tests/calibration/incidents.yaml).

Every row is a public incident where a long-running job was killed, restarted or retried; its
answers go through the same validation as an answers file and then through the engine, and the
top pick must be the senior reviewer's pick (or one of the few alternatives the row accepts).
The expert picks were decided from the incidents, never from the engine's output: when a row
fails, fix the decision model's class of error, not the row.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from advisor.cli import main
from advisor.model.answers import load_review_file, validate_answers
from advisor.model.engine import recommend

_spec = importlib.util.spec_from_file_location(
    "calibration_docs", Path(__file__).parent / "calibration" / "calibration_docs.py"
)
assert _spec and _spec.loader
calibration_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(calibration_docs)

INCIDENTS = calibration_docs.load_incidents()
REQUIRED = {"id", "source", "summary", "answers", "expert_pick", "why"}
OPTIONAL = {"topic", "acceptable", "acceptable_why"}
SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@pytest.mark.parametrize("incident", INCIDENTS, ids=[i["id"] for i in INCIDENTS])
def test_top_pick_is_what_a_senior_reviewer_would_pick(catalog, incident):
    answers = validate_answers(incident["answers"], catalog, source=f"incident {incident['id']}")
    rec = recommend(answers, catalog)
    accepted = [incident["expert_pick"], *incident.get("acceptable", [])]
    if rec.top.strategy.id not in accepted:
        pytest.fail(_explain(incident, answers, rec), pytrace=False)


def _explain(incident, answers, rec) -> str:
    """The failure message: the ranking with each strategy's objections, then the reviewer's why."""
    lines = [
        f"{incident['id']} ({incident['source']}): the advisor picks {rec.top.strategy.id!r},"
        f" a senior reviewer picks {incident['expert_pick']!r}"
        + (f" (also accepts {', '.join(incident['acceptable'])})" if incident.get("acceptable") else ""),
        f"  answers: {answers}",
        "  ranking:",
    ]
    for r in rec.ranking:
        lines.append(f"    {r.strategy.id:<27} {r.score:>6g}   against: {'; '.join(r.against) or '-'}")
        for reason in getattr(r, "ruled_out", ()):
            lines.append(f"    {'':<27} {'':>6}   ruled out: {reason}")
    close = getattr(rec, "close_call", None)
    if close is not None:
        lines.append(f"  close call: {close.runner_up} within {close.margin:g} (threshold {close.threshold:g})")
    for warning in getattr(rec, "warnings", ()):
        lines.append(f"  conflicting answers: {warning.message}")
    lines.append(f"  why: {' '.join(incident['why'].split())}")
    return "\n" + "\n".join(lines)


def test_real_incidents_raise_no_conflicting_answers(catalog):
    """The answers of a real incident describe a real job, so a conflict rule that fires on one
    is a false alarm (or the row's answers are wrong)."""
    fired = {}
    for inc in INCIDENTS:
        rec = recommend(validate_answers(inc["answers"], catalog), catalog)
        if getattr(rec, "warnings", ()):
            fired[inc["id"]] = [w.message for w in rec.warnings]
    assert not fired, fired


def test_each_row_works_as_an_answers_file_end_to_end(catalog, tmp_path, capsys):
    """Written as a team would write it (the incident as `context:`), each row loads as an answers
    file and `advisor recommend --answers FILE --json` agrees with the engine."""
    for inc in INCIDENTS:
        path = tmp_path / f"{inc['id']}.yaml"
        path.write_text(yaml.safe_dump({"context": " ".join(inc["summary"].split()), **inc["answers"]}))
        loaded = load_review_file(path, catalog)
        assert loaded.answers == validate_answers(inc["answers"], catalog), inc["id"]
        assert main(["recommend", "--answers", str(path), "--json"]) == 0, inc["id"]
        out = json.loads(capsys.readouterr().out)
        assert out["top"] == recommend(loaded.answers, catalog).top.strategy.id, inc["id"]


def test_the_table_is_large_and_varied_enough():
    assert len(INCIDENTS) >= 24, len(INCIDENTS)
    picks = Counter(i["expert_pick"] for i in INCIDENTS)
    assert len(picks) >= 5, picks


def test_every_incident_cites_a_source_a_user_can_open():
    for inc in INCIDENTS:
        src = inc["source"]
        assert calibration_docs.GITHUB_REF.match(src) or calibration_docs.URL.match(src), (
            f"{inc['id']}: source {src!r} is neither owner/repo#N nor an http(s) URL"
        )
    sources = Counter(i["source"] for i in INCIDENTS)
    assert not [s for s, n in sources.items() if n > 1], "one incident per source"


def test_every_row_is_complete_and_uses_catalog_strategies(catalog):
    ids = [i["id"] for i in INCIDENTS]
    assert len(ids) == len(set(ids)), "incident ids must be unique"
    for inc in INCIDENTS:
        assert SLUG.match(inc["id"]), inc["id"]
        assert REQUIRED <= set(inc), f"{inc['id']}: missing {sorted(REQUIRED - set(inc))}"
        assert set(inc) <= REQUIRED | OPTIONAL, f"{inc['id']}: unknown keys {sorted(set(inc) - REQUIRED - OPTIONAL)}"
        assert inc["answers"], f"{inc['id']}: no answers"
        assert all(isinstance(v, str) for v in inc["answers"].values()), f"{inc['id']}: answers must be strings"
        assert inc["expert_pick"] in catalog.strategy_ids, inc["expert_pick"]
        also = inc.get("acceptable", [])
        assert len(also) <= 1, f"{inc['id']}: alternatives are for the rare case, not a hedge"
        assert inc["expert_pick"] not in also
        for sid in also:
            assert sid in catalog.strategy_ids, sid
        # every accepted alternative says why a senior reviewer would accept it
        assert sorted(inc.get("acceptable_why", {})) == sorted(also), inc["id"]


def test_summaries_and_reasons_are_short_and_in_our_own_words():
    for inc in INCIDENTS:
        for field in ("summary", "why"):
            text = " ".join(inc[field].split())
            assert 40 <= len(text) <= 450, f"{inc['id']}.{field}: {len(text)} characters"
            assert text.count(". ") <= 2, f"{inc['id']}.{field}: keep it to one to three sentences"


def test_calibration_page_is_current():
    page = calibration_docs.DOC.read_text(encoding="utf-8")
    assert page == calibration_docs.render(INCIDENTS), (
        "docs/calibration.md is stale: run `python tests/calibration/calibration_docs.py --write`"
    )
    for inc in INCIDENTS:
        assert f"**{inc['id']}**" in page
