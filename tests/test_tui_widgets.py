"""Pure helpers of the TUI's widgets: tables of cases, no app running."""

from __future__ import annotations

import pytest

from advisor.tui.screens.generate import package_of
from advisor.tui.widgets.drill_log import event_line, verdict
from advisor.tui.widgets.file_tree import file_tree
from advisor.tui.widgets.progress_chart import ProgressChart


def chart(points: list[tuple[float, int]], kills: list[float] = ()) -> ProgressChart:  # type: ignore[assignment]
    c = ProgressChart()
    c.points, c.kills, c.total = list(points), list(kills), 100
    return c


@pytest.mark.parametrize(
    ("points", "width", "expected"),
    [
        ([], 4, [0, 0, 0, 0]),  # nothing yet: empty columns
        ([(1.0, 10), (2.0, 20), (3.0, 30), (4.0, 40)], 4, [10, 20, 30, 40]),  # one point per column
        ([(4.0, 40)], 4, [0, 0, 0, 40]),  # a column shows what was done by its end
        ([(1.0, 10), (1.5, 15), (4.0, 40)], 2, [15, 40]),  # the last point inside a column wins
        ([(1.0, 10)], 0, []),  # no room: no columns
    ],
)
def test_chart_columns(points: list[tuple[float, int]], width: int, expected: list[int]) -> None:
    assert chart(points).columns(width) == expected


@pytest.mark.parametrize(
    ("kills", "expected"),
    [
        ([], set()),  # no kills: a plain axis
        ([1.0], {2}),  # a quarter of the way through: column 2 of 0..7
        ([4.0], {7}),  # a kill at the very end stays on the chart
        ([1.0, 1.1], {2}),  # two kills close together share a column
    ],
)
def test_chart_kill_marks(kills: list[float], expected: set[int]) -> None:
    assert chart([(0.5, 5), (4.0, 100)], kills).kill_columns(8) == expected


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (["a.txt"], "p\n└── a.txt"),  # one file
        (["src/m.py", "README.md"], "p\n├── src/\n│   └── m.py\n└── README.md"),  # folders first
        (["b/y", "b/x"], "p\n└── b/\n    ├── x\n    └── y"),  # sorted within a folder
    ],
)
def test_file_tree(files: list[str], expected: str) -> None:
    assert file_tree(files, "p") == expected


@pytest.mark.parametrize(
    ("name", "package"),
    [
        ("Continuity Job", "continuity_job"),  # spaces become underscores
        ("Nightly  Sync!", "nightly_sync"),  # runs of other characters collapse, trailing ones go
        ("42 things", "things"),  # a package can't start with a digit
        ("!!!", "continuity_job"),  # nothing usable: the template's fallback
    ],
)
def test_package_of_matches_the_template_default(name: str, package: str) -> None:
    assert package_of(name) == package


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"event": "kill", "n": 2, "signal": "SIGKILL", "done": 120, "t": 1.5}, "✕ kill 2 SIGKILL after 120 records"),
        # The probe's SIGKILL carries the exit code (-9) and no stop time: no "exited -9 in ? s".
        ({"event": "kill", "n": 3, "signal": "SIGKILL", "done": 40, "t": 2.5, "exit_code": -9},
         "✕ kill 3 SIGKILL after 40 records"),
        ({"event": "kill", "n": 1, "signal": "SIGTERM", "done": 7, "t": 0.5, "exit_code": 0, "exit_s": 0.123,
          "within_grace": True}, "✕ kill 1 SIGTERM after 7 records, exited 0 in 0.12 s"),  # a graceful stop
        ({"event": "restart", "n": 2, "t": 1.6}, "↻ restart 2"),
        ({"event": "recovered", "n": 2, "ms": 88, "t": 1.7}, "✔ recovered 2 in 88 ms"),
        # A Spark restart is a JVM start: seconds, shown as seconds.
        ({"event": "recovered", "n": 3, "ms": 9412.5, "t": 20.0}, "✔ recovered 3 in 9.4 s"),
        ({"event": "progress", "done": 1, "total": 2, "t": 0.1}, None),  # progress feeds the chart, not the log
        # The fault schedule's other faults, and a SIGTERM whose successor runs on another host.
        ({"event": "fault", "n": 4, "kind": "service-timeout", "done": 90, "t": 2.0, "calls": 2},
         "⚡ service-timeout after 90 records: 2 call(s)"),
        ({"event": "fault", "n": 5, "kind": "resubmit-same", "done": 95, "t": 2.2, "outcome": "repeat"},
         "⚡ resubmit-same after 95 records: repeat"),
        ({"event": "kill", "n": 1, "kind": "other-host", "signal": "SIGTERM", "done": 9, "t": 0.4},
         "✕ kill 1 SIGTERM, successor on another host after 9 records"),
        # The watchdog stopped a run that stood still (a message put back on the queue for ever).
        ({"event": "stalled", "still_s": 120.4, "limit_s": 120.0, "done": 80, "total": 90, "workers": 2, "t": 140.0},
         "⏸ stalled no call, effect or worker change for 120.4 s: the workers were stopped"),
    ],
)
def test_event_lines(event: dict[str, object], expected: str | None) -> None:
    line = event_line(event)
    assert (None if line is None else line.plain.strip().split("s ", 1)[1]) == expected


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ({"ok": True, "lost": 0, "duplicate_effects": 0, "recovery_ms": {"p50": 90}}, "✔ PASSED  lost 0 · duplicated 0"),
        ({"ok": False, "lost": 3, "duplicate_effects": 1}, "✘ FAILED  lost 3 · duplicated 1"),  # either count fails it
        ({"ok": False, "lost": 0, "duplicate_effects": 0, "graceful_exits": [{"exit_code": 1, "within_grace": True}]},
         "✘ FAILED  lost 0 · duplicated 0 · redone calls ?\ngraceful exits 0/1"),  # an unclean SIGTERM exit
        # A slow machine: the drill added records so every kill landed, and says so (the chart ends there).
        ({"ok": True, "records": 450, "extended_records": 150, "lost": 0, "duplicate_effects": 0},
         "✔ PASSED  450 records (150 added to land every fault) · lost 0 · duplicated 0"),
    ],
)
def test_verdict(report: dict[str, object], expected: str) -> None:
    assert verdict(report).plain.startswith(expected)


def test_a_failed_verdict_names_each_failed_check() -> None:
    """All counts can be 0 while the results or the durability are wrong: the check must show."""
    report = {"ok": False, "lost": 0, "duplicate_effects": 0, "failures": [
        {"check": "results", "message": "120 of 2000 records have no stored result, e.g. r0000300"},
        {"check": "durability", "message": "a state-store connection ran with synchronous=OFF"}]}
    lines = verdict(report).plain.splitlines()
    assert lines[0].startswith("✘ FAILED")
    assert "✘ results: 120 of 2000 records have no stored result, e.g. r0000300" in lines
    assert "✘ durability: a state-store connection ran with synchronous=OFF" in lines


@pytest.mark.parametrize(
    ("index", "answered", "asked", "marks", "summary"),
    [
        # the start: everything still to ask
        (0, set(), {"a", "b", "c", "d"}, "◉○○○", "question 1 of 4 · recovery point · 3 more to ask"),
        # two answered, one skipped ahead: the count of what is left leaves it out
        (2, {"a", "b"}, {"a", "b", "c"}, "●●◉·", "question 3 of 4 · recovery point · the last one to ask, 1 skipped (a: ask all)"),
        # a skipped question behind the current one is still counted as skipped
        (3, {"a"}, {"a", "d"}, "●··◉", "question 4 of 4 · your job · the last one to ask, 2 skipped (a: ask all)"),
    ],
)
def test_step_bar_marks_and_summary(index: int, answered: set[str], asked: set[str], marks: str, summary: str) -> None:
    from advisor.tui.widgets.step_bar import step_marks, step_summary

    got = step_marks(index, ["a", "b", "c", "d"], answered, asked)
    assert "".join(got) == marks
    group = "recovery_point" if index < 3 else "trait"
    assert step_summary(index, got, group, show_all=False) == summary


def test_step_summary_when_asking_all() -> None:
    from advisor.tui.widgets.step_bar import step_summary

    assert step_summary(0, ["◉", "○"], "recovery_point", show_all=True).endswith("1 more to ask (asking all: a skips again)")


@pytest.mark.parametrize(
    ("question", "value", "expected"),
    [
        ("duration", "seconds", "duration = seconds"),  # the id in words, the label's short form
        ("work_shape", None, "work shape"),  # unanswered: the question alone
    ],
)
def test_answer_words(catalog, question: str, value: str | None, expected: str) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from advisor.tui.session import Session
    from advisor.tui.widgets.alerts import answer_words

    assert answer_words(Session(catalog, Path(".")), question, value) == expected


@pytest.mark.parametrize(
    ("margin", "words"),
    [
        (1.0, "1 point ahead of X"),  # one point, singular
        (0.0, "tied with X"),  # a tie is said to be one, never "0 points ahead" (issue 24)
        (1.5, "1.5 points ahead of X"),
    ],
)
def test_lead_words(margin: float, words: str) -> None:
    from advisor.model.recommendation import lead_words

    assert lead_words(margin, "X") == words


@pytest.mark.parametrize(
    ("gap", "words"),
    [(1.0, "1 point behind X"), (0.0, "tied with X"), (3.0, "3 points behind X")],
)
def test_behind_words(gap: float, words: str) -> None:
    """The review's fit sentence ("ranks 2 of 6, 1 point behind X") in the same grammar as the lead."""
    from advisor.model.recommendation import behind_words

    assert behind_words(gap, "X") == words


def test_step_summary_when_revisiting() -> None:
    from advisor.tui.widgets.step_bar import step_summary

    # the recommendation's jump keys: the count is of the questions revisited, not of the walk
    assert step_summary(1, ["●", "◉", "·"], "trait", False, (1, 2)) == (
        "question 2 of 3 · your job · revisiting 1 of 2 (escape returns)"
    )
