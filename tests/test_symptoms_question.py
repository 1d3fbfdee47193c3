"""The first multiple-value question, `symptoms`, and the other questions the review added:
answers files take a list, `--set symptoms=a,b` or repeated flags add up, `unknown` clears,
`advisor questions` says so, bad values exit 2 naming the valid ones, nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.model.answers import dump_answers, load_answers_file, parse_set_flags, review_input
from advisor.model.catalog import answer_values

NEW_QUESTIONS = {
    "symptoms": {"work_lost", "redone_from_zero", "duplicate_effect", "stuck_unit", "corrupt_state",
                 "never_finishes", "slow_recovery"},
    "engine_owner": {"own_code", "framework", "product"},
    "broker": {"none", "kafka", "rabbitmq", "sqs", "pubsub", "mqtt", "redis", "other"},
    "runner": {"plain", "celery", "airflow", "spark", "flink", "kubernetes_jobs", "slurm", "other"},
    "domain": {"payments", "messaging", "data_pipeline", "ml_training", "infrastructure", "other"},
}  # fmt: skip


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("qid", sorted(NEW_QUESTIONS))
def test_the_new_questions_and_their_values(catalog, qid):
    question = catalog.question(qid)
    assert set(question.values) == NEW_QUESTIONS[qid] and question.help
    assert question.multiple is (qid == "symptoms")
    assert all(c.help and c.label for c in question.choices)


def test_an_answers_file_takes_a_list_in_any_order(catalog, tmp_path):
    path = tmp_path / "job.yml"
    path.write_text("symptoms: [duplicate_effect, work_lost, duplicate_effect]\nduration: hours\n")
    answers = load_answers_file(path, catalog)
    assert answers["symptoms"] == "work_lost,duplicate_effect"  # the question's order, once each
    assert answer_values(answers, "symptoms") == ("work_lost", "duplicate_effect")


def test_set_flags_add_up_and_unknown_clears(catalog):
    assert parse_set_flags(["symptoms=stuck_unit,work_lost"], catalog) == {"symptoms": "work_lost,stuck_unit"}
    repeated = parse_set_flags(["symptoms=stuck_unit", "symptoms=work_lost"], catalog)
    assert repeated == {"symptoms": "work_lost,stuck_unit"}
    assert parse_set_flags(["symptoms=work_lost", "symptoms=unknown"], catalog) == {}


def test_flags_replace_the_files_symptoms(catalog, tmp_path):
    path = tmp_path / "job.yml"
    path.write_text("symptoms: [work_lost]\n")
    given = review_input(catalog, answers_file=path, set_flags=["symptoms=corrupt_state"])
    assert given.answers == {"symptoms": "corrupt_state"}


def test_dump_answers_writes_a_list_that_loads_back(catalog, tmp_path):
    answers = {"symptoms": "work_lost,never_finishes", "engine_owner": "framework"}
    path = tmp_path / "again.yml"
    path.write_text(dump_answers(answers, catalog))
    assert "symptoms: [work_lost, never_finishes]" in path.read_text()
    assert load_answers_file(path, catalog) == answers


@pytest.mark.parametrize(
    "content,expect",
    [
        ("symptoms: [double_charge]\n", "'double_charge' is not a valid value"),
        ("symptoms: {work_lost: true}\n", "expected a list of values"),
        ("symptoms: [1, 2]\n", "expected a list of values"),
        ("engine_owner: us\n", "Valid values: own_code, framework, product"),
    ],
)
def test_bad_symptoms_exit_2_and_write_nothing(capsys, tmp_path, content, expect):
    path = tmp_path / "job.yml"
    path.write_text(content + "current: checkpoint\n")
    out_path = tmp_path / "decision.md"
    code, _, err = run(capsys, "review", "--answers", str(path), "--out", str(out_path))
    assert code == 2 and expect in err and "Traceback" not in err
    assert not out_path.exists()


def test_questions_says_which_take_several_values(capsys):
    code, out, _ = run(capsys, "questions")
    assert code == 0 and "symptoms  (evidence, for the review; several values)" in out
    assert "engine_owner  (evidence, for the review)" in out and "broker  (trait)" in out
    code, out, _ = run(capsys, "questions", "--json")
    by_id = {q["id"]: q for q in json.loads(out)}
    assert by_id["symptoms"]["multiple"] is True and by_id["duration"]["multiple"] is False


def test_recommend_json_lists_the_symptoms_and_they_change_no_pick(capsys):
    base = ["recommend", "--json", "--set", "work_shape=record_batch", "--set", "duration=hours"]
    code, plain, _ = run(capsys, *base)
    code, out, _ = run(capsys, *base, "--set", "symptoms=work_lost,duplicate_effect", "--set", "engine_owner=product",
                       "--set", "broker=kafka", "--set", "domain=payments")
    data = json.loads(out)
    assert code == 0 and data["answers"]["symptoms"] == ["work_lost", "duplicate_effect"]
    assert [r["score"] for r in data["ranking"]] == [r["score"] for r in json.loads(plain)["ranking"]]


def test_the_runner_moves_only_the_stream_engines_checkpoint(capsys):
    """What runs the job decides whether a stream engine's checkpoint is at hand (Spark, Flink) or
    would have to be adopted first (a plain process, a task runner); no other strategy moves."""
    base = ["recommend", "--json", "--set", "work_shape=unbounded_stream"]
    scores = {}
    for runner in (None, "spark", "plain"):
        code, out, _ = run(capsys, *base, *(("--set", f"runner={runner}") if runner else ()))
        assert code == 0
        scores[runner] = {r["strategy"]: r["score"] for r in json.loads(out)["ranking"]}
    stream = "stream-checkpoint"
    assert scores["spark"][stream] == scores[None][stream] + 1 and scores["plain"][stream] == scores[None][stream] - 2
    for runner in ("spark", "plain"):
        assert {k: v for k, v in scores[runner].items() if k != stream} == \
               {k: v for k, v in scores[None].items() if k != stream}


def test_review_cli_ranks_by_the_symptoms(capsys, tmp_path: Path):
    path = tmp_path / "job.yml"
    path.write_text("recovery_point_store: local_disk\nsymptoms: [corrupt_state]\ncurrent: checkpoint\n")
    out_path = tmp_path / "decision.md"
    code, out, _ = run(capsys, "review", "--answers", str(path), "--out", str(out_path))
    assert code == 0 and "unknown: checkpoint-file-checksummed," in out
    assert "Ranked by what you saw (corrupt or inconsistent state)" in out_path.read_text()
