"""Every CLI command and its exit codes. In-process through ``main(argv)`` for speed, plus
real subprocesses where the console script or the import cost is the point."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def answers_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.yml"
    path.write_text("duration: hours\nwork_shape: record_batch\nworkers: many\n")
    return path


def test_recommend_json_shape(capsys, answers_file):
    code, out, _ = run(capsys, "recommend", "--answers", str(answers_file), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["ranking"][0] == {**data["ranking"][0], "strategy": "checkpoint"}
    assert all({"strategy", "score", "because"} <= set(item) for item in data["ranking"])


def test_recommend_text_names_the_pick_and_reasons(capsys):
    code, out, _ = run(capsys, "recommend", "--set", "work_shape=multi_step_flow")
    assert code == 0
    assert "Recommended: State machine (state-machine)" in out
    assert "+ A multi-step flow with dependencies is what a state machine makes visible" in out
    assert "Why not the others" in out and "Pitfalls to check" in out
    assert "The recovery point, for your answers:" in out and "Q1 where:" in out
    assert "seed" not in out.lower().replace("seeded", "")


def test_recommend_text_shows_the_winners_objections_conflicts_and_close_calls(capsys):
    # the winner's own "against" lines are in the text, not only in --json
    code, out, _ = run(capsys, "recommend", "--set", "work_shape=record_batch", "--set", "duration=seconds")
    assert code == 0 and "- against: A task of seconds gains little from checkpoints" in out
    # conflicting answers get their own section; --strict turns them into exit 2
    argv = ["recommend", "--set", "recovery_point_store=nowhere", "--set", "acceptable_loss=nothing"]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "Conflicting answers" in out and "revisit: recovery_point_store, acceptable_loss" in out
    code, out, _ = run(capsys, *argv, "--strict")
    assert code == 2 and "Conflicting answers" in out
    # when the answers rule every strategy out, the headline doesn't pretend to recommend
    code, out, _ = run(capsys, *argv, "--set", "work_shape=multi_step_flow")
    assert out.startswith("No strategy fits these answers as given") and "closest: State machine" in out
    code, out, _ = run(capsys, *argv, "--json", "--strict")
    assert code == 2 and json.loads(out)["warnings"][0]["id"] == "nowhere-but-keep-progress"
    # a tie never reads as a plain "Recommended", and it says what would settle it
    argv = ["recommend", "--set", "recovery_point_store=event_log", "--set", "work_shape=entity_changes",
            "--set", "external_effects=plain_api"]  # fmt: skip
    code, out, _ = run(capsys, *argv)
    assert code == 0 and out.startswith("Close call: ") and "Recommended" not in out.splitlines()[0]
    assert "What would settle it" in out and "unacceptable → Event sourcing + idempotent commands" in out
    data = json.loads(run(capsys, *argv, "--json")[1])
    assert data["close_call"]["settle"] and data["recipe"]["where"]


def test_recommend_never_prints_a_next_command_the_advisor_would_refuse(capsys):
    code, out, _ = run(capsys, "recommend", "--set", "work_shape=unbounded_stream",
                       "--set", "recovery_point_store=stream_engine")  # fmt: skip
    assert code == 0 and "stream-checkpoint" in out.splitlines()[0]
    # Every strategy has a template now (stream-checkpoint since issue 9): the command is printed.
    assert "Next: advisor generate stream-checkpoint ./my-job" in out
    code, out, _ = run(capsys, "explain", "stream-checkpoint")
    assert code == 0 and "advisor generate stream-checkpoint" in out and "not generated" not in out


def test_set_overrides_the_file(capsys, answers_file):
    code, out, _ = run(capsys, "recommend", "--answers", str(answers_file), "--set", "work_shape=unbounded_stream",
                       "--json")  # fmt: skip
    assert code == 0
    assert json.loads(out)["answers"]["work_shape"] == "unbounded_stream"


def test_unknown_answer_marks_unanswered(capsys):
    code, out, _ = run(capsys, "recommend", "--set", "duration=unknown", "--json")
    assert code == 0 and "duration" in json.loads(out)["unanswered"]


@pytest.mark.parametrize(
    "content,expect",
    [
        ("durration: hours\n", ["unknown question 'durration'", "duration", "work_shape"]),  # typo'd id
        ("duration: forever\n", ["'forever' is not a valid value", "seconds, minutes, hours"]),  # bad value
        ("duration: [hours\n", ["not valid YAML"]),  # malformed YAML
        ("- duration\n- hours\n", ["expected a mapping"]),  # a list, not a mapping
        ("duration: 3\n", ["3 is not a valid value"]),  # a number, not a value id
    ],
)
def test_bad_answers_file_exit_2(capsys, tmp_path, content, expect):
    path = tmp_path / "bad.yml"
    path.write_text(content)
    code, out, err = run(capsys, "recommend", "--answers", str(path))
    assert code == 2 and out == ""
    assert "Traceback" not in err
    for text in expect:
        assert text in err


@pytest.mark.parametrize(
    "flag,expect",
    [
        ("workers=lots", "Valid values: one, many"),
        ("nonsense=1", "unknown question 'nonsense'"),
        ("duration", "expected QUESTION=VALUE"),
    ],
)
def test_bad_set_flag_exit_2(capsys, flag, expect):
    code, _, err = run(capsys, "recommend", "--set", flag)
    assert code == 2 and expect in err


def test_missing_answers_file_exit_2(capsys, tmp_path):
    code, _, err = run(capsys, "recommend", "--answers", str(tmp_path / "none.yml"))
    assert code == 2 and "no such answers file" in err


def test_unknown_flag_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["recommend", "--jsn"])
    assert exit_.value.code == 2


def test_questions_lists_ids_values_and_help(capsys, catalog):
    code, out, _ = run(capsys, "questions")
    assert code == 0
    for q in catalog.questions:
        assert q.id in out and q.asks in out
        for c in q.choices:
            assert c.id in out
            assert " ".join(c.help.split()[:4]) in out  # each value's help, not only its label
    code, out, _ = run(capsys, "questions", "--json")
    assert [q["id"] for q in json.loads(out)] == list(catalog.question_ids)


def test_strategies(capsys, catalog):
    code, out, _ = run(capsys, "strategies")
    assert code == 0 and all(sid in out for sid in catalog.strategy_ids)
    code, out, _ = run(capsys, "strategies", "--json")
    assert {s["id"] for s in json.loads(out)} == set(catalog.strategy_ids)


def test_explain(capsys):
    code, out, _ = run(capsys, "explain", "checkpoint")
    assert code == 0
    assert "Q1 where stored" in out and "Pitfalls" in out and "os.replace" in out
    code, out, _ = run(capsys, "explain", "event-sourcing", "--json")
    assert json.loads(out)["granularity"] == "event"


def test_explain_unknown_lists_valid(capsys):
    code, _, err = run(capsys, "explain", "saga")
    assert code == 2 and "idempotent-retry" in err and "event-sourcing-idempotent" in err


def test_review_writes_record_and_refuses_overwrite(capsys, tmp_path, answers_file):
    out_file = tmp_path / "decision.md"
    code, out, _ = run(capsys, "review", "--answers", str(answers_file), "--out", str(out_file))
    assert code == 0 and out_file.exists()
    first = out_file.read_text()
    assert "Checkpoint + state table" in first
    code, _, err = run(capsys, "review", "--set", "work_shape=multi_step_flow", "--out", str(out_file))
    assert code == 2 and "already exists" in err and "--force" in err
    assert out_file.read_text() == first  # nothing written
    code, _, _ = run(capsys, "review", "--set", "work_shape=multi_step_flow", "--out", str(out_file), "--force")
    assert code == 0 and "State machine" in out_file.read_text().splitlines()[0]


def test_review_current_verdict(capsys, tmp_path, answers_file):
    out_file = tmp_path / "d.md"
    code, out, _ = run(capsys, "review", "--answers", str(answers_file), "--current", "idempotent-retry",
                       "--out", str(out_file))  # fmt: skip
    assert code == 0 and "does not fit" in out
    assert "**Does not fit.**" in out_file.read_text()


def test_review_bad_input_writes_nothing(capsys, tmp_path):
    out_file = tmp_path / "d.md"
    code, _, err = run(capsys, "review", "--current", "saga", "--out", str(out_file))
    assert code == 2 and "saga" in err and not out_file.exists()
    code, _, err = run(capsys, "review", "--out", str(tmp_path / "no" / "such" / "d.md"))
    assert code == 2 and "does not exist" in err


def test_broken_catalog_is_a_clear_error(capsys, catalog_copy):
    (catalog_copy / "checkpoint.yaml").write_text("id: [\n")
    code, _, err = run(capsys, "--catalog", str(catalog_copy), "strategies")
    assert code == 2 and "checkpoint.yaml" in err and "Traceback" not in err


def test_console_script_and_light_imports():
    """`advisor recommend` runs as a real process and imports neither Textual nor Copier, nor any
    feature package it does not use (the commands keep their imports inside the function)."""
    probe = (
        "import sys; from advisor.cli import main; code = main(['recommend', '--set', 'duration=hours', '--json']);"
        "heavy = [m for m in ('textual', 'copier', 'advisor.tui', 'advisor.scaffold', 'advisor.review',"
        " 'advisor.probe', 'advisor.inspect', 'advisor.docgen') if m in sys.modules];"
        "print('HEAVY', heavy, file=sys.stderr); sys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stderr
    exe = Path(sys.executable).with_name("advisor")
    done = subprocess.run([str(exe), "explain", "nope"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_drill_text_names_each_failed_check(capsys, monkeypatch, tmp_path):
    """`advisor drill` prints the judge's failures, not only the counts (which can all be 0).
    The drill itself is exercised for real in test_template_generated.py; here only the wording."""
    from advisor.scaffold import drill

    report = {"event": "report", "ok": False, "lost": 0, "duplicate_effects": 0, "redone_calls": 0,
              "failures": [{"check": "final_state", "message": "task t1: saved count 100, the fold gives 500"}]}
    monkeypatch.setattr(drill, "drill_events", lambda dest, **options: iter([report]))
    code, out, _ = run(capsys, "drill", str(tmp_path))
    assert code == 1
    assert "FAILED: final_state: task t1: saved count 100, the fold gives 500" in out.splitlines()


def test_drill_passes_the_fault_kinds_and_prints_the_smallest_failing_schedule(capsys, monkeypatch, tmp_path):
    """`advisor drill --only KIND --no-shrink` reach the project's drill; the fault events and the
    shrunk schedule's command are printed (the drill itself: test_template_generated.py)."""
    from advisor.scaffold import drill

    seen = {}
    report = {"event": "report", "ok": False, "lost": 0, "duplicate_effects": 1, "redone_calls": 0,
              "failures": [{"check": "duplicate_effects", "message": "1 effect applied twice"}],
              "shrunk": {"check": "duplicate_effects", "records": 100, "events": 1,
                         "command": "python -m job drill --replay /d/drill-schedule-min.json"}}
    fault = {"event": "fault", "n": 2, "kind": "resubmit-same", "done": 40}

    def events(dest, **options):
        seen.update(options)
        return iter([fault, report])

    monkeypatch.setattr(drill, "drill_events", events)
    code, out, _ = run(capsys, "drill", str(tmp_path), "--only", "sigkill", "--only", "resubmit-same", "--no-shrink")
    assert code == 1 and seen["only"] == ["sigkill", "resubmit-same"] and seen["shrink"] is False
    assert "fault #2 resubmit-same at 40 records" in out
    assert "python -m job drill --replay /d/drill-schedule-min.json" in out


def to_a_closed_pipe(argv: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    """Run with stdout a pipe whose reader has already gone (what `| head -2` ends up as)."""
    import os

    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(argv, stdout=write, stderr=subprocess.PIPE, text=True, timeout=60, **kwargs)
    finally:
        os.close(write)


@pytest.mark.parametrize("command", [["questions"], ["strategies"], ["explain", "checkpoint"],
                                     ["recommend", "--set", "duration=hours"]])
def test_a_reader_that_goes_away_ends_quietly(command):
    result = to_a_closed_pipe([sys.executable, "-m", "advisor", *command])
    assert result.stderr == "" and result.returncode == 0, result.stderr


def test_no_answers_match_no_typical_case(capsys):
    """With nothing answered, nothing 'matches': no typical case is claimed (CLI text, JSON, TUI caption)."""
    code, out, _ = run(capsys, "recommend")
    assert code == 0 and "Typical case" not in out
    code, out, _ = run(capsys, "recommend", "--json")
    assert json.loads(out)["scenario"] is None
    code, out, _ = run(capsys, "recommend", "--set", "duration=hours", "--set", "work_shape=record_batch")
    assert "Typical case: Long batch job" in out  # an answer that agrees with the row: it is claimed


def test_user_facing_text_cites_nothing_a_user_cannot_open(capsys, catalog):
    """No internal document (the seed, its sections, shared/...) in anything the CLI prints."""
    outputs = [run(capsys, "questions")[1], run(capsys, "questions", "--json")[1],
               run(capsys, "recommend", "--set", "duration=hours")[1]]
    for sid in catalog.strategy_ids:
        outputs += [run(capsys, "explain", sid)[1], run(capsys, "explain", sid, "--json")[1]]
    for out in outputs:
        assert not re.search(r"§|\bseeds?\b.*\d{3}|shared/|SEEDS\.md|DESIGN\.md", out, re.I), out[:200]


@pytest.mark.parametrize("answers", [{"duration": "hours"}, {"duration": "hours", "work_shape": "record_batch"},
                                     {"work_shape": "unbounded_stream", "external_effects": "plain_api"}])
def test_why_not_lines_are_sentences(catalog, answers):
    from advisor.model.engine import recommend

    for sid, lines in recommend(answers, catalog).why_not.items():
        for line in lines:
            assert not re.match(r"^\w+=\w+:", line), (sid, line)  # not `duration=hours: ...`
            assert line[0].isupper() and line.rstrip().endswith((".", ")")), (sid, line)
