"""The review's calibration files load and follow their schema.

tests/calibration/heldout/incidents.yaml (held out: no rule was tuned on it) and
tests/calibration/review_tuned*.yaml (the part a rule-writer may look at) share one schema,
described at the top of each file. This checks the schema only: that every answer is a question
id and value the advisor understands (or one of the review's new questions), that every control
belongs to the strategy the row says the team runs (or is one of the controls being added), and
that no public source is used twice across all calibration files. It never runs the advisor:
how the review ranks these rows is measured elsewhere.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.paths import strategies_dir
from calibration_docs import GITHUB_REF, URL  # pytest puts this directory on sys.path
from review_ranking import TUNED

HERE = Path(__file__).resolve().parent
#: Held out (the last round): written by someone who never saw the evidence rules or the ranking.
HELDOUT = HERE / "heldout" / "incidents.yaml"
#: Every review file: the held-out part, then the tuned ones (review_ranking.TUNED keeps their one list).
REVIEW_FILES = (HELDOUT, *TUNED)
ALL_FILES = (HERE / "incidents.yaml", *REVIEW_FILES)

# Questions the review is getting; they are not in strategies/questions.yaml yet.
NEW_QUESTIONS = {
    "engine_owner": {"own_code", "framework", "product"},
    "broker": {"none", "kafka", "rabbitmq", "sqs", "pubsub", "mqtt", "redis", "other"},
    "runner": {"plain", "celery", "airflow", "spark", "flink", "kubernetes_jobs", "slurm", "other"},
    "domain": {"payments", "messaging", "data_pipeline", "ml_training", "infrastructure", "other"},
}
SYMPTOMS = {
    "work_lost", "redone_from_zero", "duplicate_effect", "stuck_unit",
    "corrupt_state", "never_finishes", "slow_recovery",
}
# Controls being added to the catalog; any row may name them whatever its current strategy.
NEW_CONTROLS = {"output-durable-before-progress", "planned-kills-deferred", "per-key-ordering"}

REQUIRED = {"id", "topic", "source", "summary", "answers", "expert_pick", "why", "review"}
OPTIONAL = {"context", "acceptable", "acceptable_why", "support"}
#: How firmly the row's thread supports its real fix and pick, as its writer rated it before any
#: measure: the thread states the mechanism and the fix (firm), is short or only implies the fix
#: (thin), or leaves another control a fair answer too (debatable). Rows from round 21 on.
SUPPORT = {"firm", "thin", "debatable"}
REVIEW_REQUIRED = {"current", "in_place", "real_fix", "fix_words"}
REVIEW_OPTIONAL = {"also_first"}
SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def load_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))["incidents"]
    return rows


@pytest.fixture(scope="module")
def vocabulary(catalog) -> dict[str, Any]:
    """Question ids → allowed values, and strategy id → its control ids, from strategies/."""
    questions = yaml.safe_load((strategies_dir() / "questions.yaml").read_text(encoding="utf-8"))
    values = {q["id"]: {c["id"] for c in q["choices"]} for q in questions["questions"]}
    values.update(NEW_QUESTIONS)
    controls = {}
    for sid in catalog.strategy_ids:
        strategy = yaml.safe_load((strategies_dir() / f"{sid}.yaml").read_text(encoding="utf-8"))
        controls[sid] = {c["id"] for c in strategy.get("controls", [])}
    return {"values": values, "controls": controls}


def _sentences(text: str) -> int:
    return " ".join(text.split()).count(". ") + 1


def row_problems(row: dict[str, Any], vocabulary: dict[str, Any]) -> list[str]:
    """Everything wrong with one row; an empty list means the row follows the schema."""
    rid = row.get("id", "?")
    out = [f"{rid}: missing {k}" for k in sorted(REQUIRED - set(row))]
    out += [f"{rid}: unknown key {k}" for k in sorted(set(row) - REQUIRED - OPTIONAL)]
    if out:
        return out
    if not SLUG.match(rid):
        out.append(f"{rid}: id is not kebab-case")
    if not (GITHUB_REF.match(row["source"]) or URL.match(row["source"])):
        out.append(f"{rid}: source {row['source']!r} is neither owner/repo#N nor an http(s) URL")
    for field, most in (("summary", 4), ("why", 3)):
        text = " ".join(str(row[field]).split())
        if not 40 <= len(text) <= 650 or _sentences(text) > most:
            out.append(f"{rid}: {field} should be 40-650 characters, at most {most} sentences")
    if "support" in row and row["support"] not in SUPPORT:
        out.append(f"{rid}: support must be one of {sorted(SUPPORT)}")
    out += _answer_problems(rid, row["answers"], vocabulary["values"])
    strategies = vocabulary["controls"]
    also = row.get("acceptable", [])
    if row["expert_pick"] not in strategies or any(s not in strategies for s in also):
        out.append(f"{rid}: expert_pick/acceptable must be catalog strategies")
    if len(also) > 1 or row["expert_pick"] in also or sorted(row.get("acceptable_why", {})) != sorted(also):
        out.append(f"{rid}: at most one alternative pick, each with its acceptable_why")
    return out + _review_problems(rid, row["review"], strategies)


def _answer_problems(rid: str, answers: dict[str, Any], values: dict[str, set[str]]) -> list[str]:
    out = []
    if not isinstance(answers, dict) or not answers.get("symptoms"):
        return [f"{rid}: answers need at least one symptom"]
    for qid, value in answers.items():
        if qid == "symptoms":
            if not isinstance(value, list) or len(set(value)) != len(value) or not set(value) <= SYMPTOMS:
                out.append(f"{rid}: symptoms must be a list of distinct values of {sorted(SYMPTOMS)}")
        elif qid not in values:
            out.append(f"{rid}: unknown question {qid!r}")
        elif value not in values[qid]:
            out.append(f"{rid}: {qid}={value!r} is not one of {sorted(values[qid])}")
    return out


def _review_problems(rid: str, review: Any, strategies: dict[str, set[str]]) -> list[str]:
    if not isinstance(review, dict) or not REVIEW_REQUIRED <= set(review):
        return [f"{rid}: review needs {sorted(REVIEW_REQUIRED)}"]
    if set(review) - REVIEW_REQUIRED - REVIEW_OPTIONAL:
        return [f"{rid}: unknown review keys {sorted(set(review) - REVIEW_REQUIRED - REVIEW_OPTIONAL)}"]
    if review["current"] not in strategies:
        return [f"{rid}: review.current {review['current']!r} is not a catalog strategy"]
    known = strategies[review["current"]] | NEW_CONTROLS
    out = []
    fix, in_place, also = review["real_fix"], review["in_place"], review.get("also_first", [])
    if fix is not None and fix not in known:
        out.append(f"{rid}: real_fix {fix!r} is not a control of {review['current']} (nor a new one)")
    for name, ids in (("in_place", in_place), ("also_first", also)):
        if not isinstance(ids, list) or not set(ids) <= known:
            out.append(f"{rid}: {name} must list controls of {review['current']}: {ids!r}")
    if fix is not None and (fix in in_place or fix in also):
        out.append(f"{rid}: the real fix cannot also be in place or an alternative")
    if not str(review["fix_words"]).strip():
        out.append(f"{rid}: fix_words is empty")
    return out


@pytest.mark.parametrize("path", REVIEW_FILES, ids=lambda p: p.relative_to(HERE).as_posix())
def test_every_row_follows_the_schema(path, vocabulary):
    rows = load_rows(path)
    problems = [p for row in rows for p in row_problems(row, vocabulary)]
    assert not problems, "\n".join(problems)


def test_ids_and_sources_are_unique_across_all_calibration_files():
    rows = [row for path in ALL_FILES for row in load_rows(path)]
    for key in ("id", "source"):
        repeated = [v for v, n in Counter(r[key] for r in rows).items() if n > 1]
        files = [p.relative_to(HERE).as_posix() for p in ALL_FILES]
        assert not repeated, f"{key}s used twice across {files}: {repeated}"


def test_the_held_out_part_is_large_enough_to_measure():
    scored = [r for r in load_rows(HELDOUT) if r["review"]["real_fix"] is not None]
    assert len(scored) >= 20, len(scored)


def test_every_held_out_row_says_how_firmly_its_thread_supports_the_fix():
    """The figures are also given per `support`, so a miss on a debatable row reads as one."""
    unrated = [r["id"] for r in load_rows(HELDOUT) if r.get("support") not in SUPPORT]
    assert not unrated, unrated


def test_planted_bad_rows_are_caught(vocabulary):
    """Each mistake a row can make is reported, so a green run means the files really comply."""
    good = load_rows(HELDOUT)[0]
    assert row_problems(good, vocabulary) == []

    def planted(**changes: Any) -> dict[str, Any]:
        row = yaml.safe_load(yaml.safe_dump(good))
        for dotted, value in changes.items():
            *path, last = dotted.split("__")
            target = row
            for part in path:
                target = target[part]
            if value is KeyError:
                del target[last]
            else:
                target[last] = value
        return row

    bad_rows = {
        "unknown question": planted(answers__work_style="batch"),
        "unknown value": planted(answers__duration="days"),
        "unknown new-question value": planted(answers__broker="nats"),
        "unknown symptom": planted(answers__symptoms=["slow"]),
        "symptoms not a list": planted(answers__symptoms="work_lost"),
        "no symptoms": planted(answers__symptoms=KeyError),
        "control of another strategy": planted(review__current="stream-checkpoint",
                                               review__real_fix="ack-after-commit"),
        "made-up control": planted(review__real_fix="retry-harder"),
        "unknown strategy": planted(review__current="saga"),
        "missing review key": planted(review__fix_words=KeyError),
        "missing field": planted(why=KeyError),
        "bad source": planted(source="see the forum"),
        "hedged picks": planted(acceptable=["checkpoint", "state-machine"]),
        "unknown support": planted(support="solid"),
    }
    missed = [name for name, row in bad_rows.items() if not row_problems(row, vocabulary)]
    assert not missed, f"planted mistakes not reported: {missed}"
