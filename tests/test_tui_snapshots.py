"""Layout: SVG snapshots of the main screens at 80x24 (pytest-textual-snapshot).

Update them after a deliberate change with ``pytest tests/test_tui_snapshots.py --snapshot-update``
and look at ``snapshot_report.html``. Cursor blink is off and the decision record's date is
fixed, so the pictures are the same on every run and machine.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from advisor.tui.app import AdvisorApp, make_app
from advisor.tui.screens.drill import DrillScreen
from pinned_catalog import first_round_catalog  # tests/ is on sys.path (conftest.py)

FIXED_DAY = dt.date(2026, 1, 15)
BATCH = {"work_shape": "record_batch", "duration": "hours", "acceptable_loss": "one_batch",
         "recovery_point_store": "database"}

# A short drill, as the generated project reports it (fixed, so the picture is stable).
DRILL_EVENTS = [
    {"event": "start", "records": 300, "kills": 2, "t": 0.0},
    *({"event": "progress", "done": d, "total": 300, "t": t}
      for d, t in [(0, 0.1), (40, 0.4), (80, 0.8), (100, 1.0)]),
    {"event": "kill", "n": 1, "signal": "SIGKILL", "done": 100, "t": 1.1},
    {"event": "restart", "n": 1, "t": 1.2},
    {"event": "recovered", "n": 1, "ms": 130, "t": 1.33},
    *({"event": "progress", "done": d, "total": 300, "t": t} for d, t in [(140, 1.6), (190, 2.0)]),
    {"event": "kill", "n": 2, "signal": "SIGKILL", "done": 190, "t": 2.1},
    {"event": "restart", "n": 2, "t": 2.2},
    {"event": "recovered", "n": 2, "ms": 95, "t": 2.3},
    *({"event": "progress", "done": d, "total": 300, "t": t} for d, t in [(250, 2.7), (300, 3.1)]),
    {"event": "report", "strategy": "checkpoint", "records": 300, "kills": 2, "lost": 0,
     "duplicate_effects": 0, "redone_calls": 12, "recovery_ms": {"p50": 112, "p95": 130, "max": 130},
     "throughput": 96.8, "wall_s": 3.1, "ok": True},
]


def app(answers: dict[str, str] | None = None) -> AdvisorApp:
    return make_app(answers=answers, workdir=Path("."), blink=False, today=FIXED_DAY, catalog=first_round_catalog())


def test_welcome(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(), terminal_size=(80, 24))


def test_first_question(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(), press=["s"], terminal_size=(80, 24))


def test_a_trait_question_after_answers(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(), press=["s", "3", "2", "down"], terminal_size=(80, 24))


def test_recommendation(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def open_it(pilot) -> None:  # type: ignore[no-untyped-def]
        pilot.app.action_recommend()
        await pilot.pause()

    assert snap_compare(app(BATCH), run_before=open_it, terminal_size=(80, 24))


def test_recommendation_scenario_table(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def open_it(pilot) -> None:  # type: ignore[no-untyped-def]
        pilot.app.action_recommend()
        await pilot.pause()

    assert snap_compare(app(BATCH), run_before=open_it, press=["2"], terminal_size=(80, 24))


def test_recommendation_pitfalls(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def open_it(pilot) -> None:  # type: ignore[no-untyped-def]
        pilot.app.action_recommend()
        await pilot.pause()

    assert snap_compare(app(BATCH), run_before=open_it, press=["4"], terminal_size=(80, 24))


def test_export(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def open_it(pilot) -> None:  # type: ignore[no-untyped-def]
        pilot.app.action_export()
        await pilot.pause()

    assert snap_compare(app(BATCH), run_before=open_it, terminal_size=(80, 24))


def test_help(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(), press=["question_mark"], terminal_size=(80, 24))


def test_drill_finished(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def feed(pilot) -> None:  # type: ignore[no-untyped-def]
        screen = DrillScreen(Path("demo_job"), autostart=False)
        await pilot.app.push_screen(screen)
        for event in DRILL_EVENTS:
            screen.apply(event)
        await pilot.pause()

    assert snap_compare(app(), run_before=feed, terminal_size=(80, 24))


# The template's real file list changes whenever a strategy adds files; the picture uses a
# fixed one (the real preview is exercised in tests/test_tui_generate.py).
FIXED_PREVIEW = ["README.md", "pyproject.toml", "schema.sql", "src/continuity_job/cli.py", "tests/test_drill.py"]


def test_generate_form_with_preview(snap_compare, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("advisor.scaffold.generation.preview", lambda strategy, answers=None: list(FIXED_PREVIEW))

    async def open_it(pilot) -> None:  # type: ignore[no-untyped-def]
        pilot.app.action_recommend()
        await pilot.pause()
        pilot.app.action_generate()
        await pilot.pause()
        preview = pilot.app.screen.query_one("#gen-preview")
        for _ in range(300):  # the preview renders the template in a thread
            if "Files it will write (" in str(preview.render()):
                break
            await pilot.pause(0.05)

    assert snap_compare(app(BATCH), run_before=open_it, terminal_size=(80, 24))


def test_welcome_with_a_bad_answers_file(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def load_missing(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("l")
        pilot.app.screen.query_one("#answers-path").value = "no-such-answers.yml"
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(app(), run_before=load_missing, terminal_size=(80, 24))


# Seconds-long runs of an unbounded stream contradict each other, and the pick is a close call.
CONFLICT = {"recovery_point_store": "local_disk", "acceptable_loss": "one_batch", "duplicate_cost": "harmless",
            "duration": "seconds", "work_shape": "unbounded_stream"}  # fmt: skip
REVIEWED = {**BATCH, "workers": "many"}


def test_recommendation_with_a_conflict_and_a_close_call(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def open_it(pilot) -> None:  # type: ignore[no-untyped-def]
        pilot.app.action_recommend()
        await pilot.pause()

    assert snap_compare(app(CONFLICT), run_before=open_it, terminal_size=(80, 24))


def test_review_controls_checklist(snap_compare) -> None:  # type: ignore[no-untyped-def]
    # v: review; →: no symptom; 2: the checkpoint strategy; the first control in place, the second missing
    assert snap_compare(app(REVIEWED), press=["v", "right", "2", "y", "n"], terminal_size=(80, 24))


def test_review_findings(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(REVIEWED), press=["v", "right", "2", "y", "n", "right"], terminal_size=(80, 24))


def test_review_current_strategy(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(REVIEWED), press=["v", "right", "down"], terminal_size=(80, 24))


def test_review_symptoms(snap_compare) -> None:  # type: ignore[no-untyped-def]
    # 3: an effect applied twice; 5: corrupt state (toggled); tab: the engine's owner
    assert snap_compare(app(REVIEWED), press=["v", "3", "5", "tab"], terminal_size=(80, 24))


# Every control unknown; what the team saw ranks the findings. The first one must show unscrolled.
SEEN = {**REVIEWED, "recovery_point_store": "local_disk", "workers": "one", "symptoms": "corrupt_state"}


def test_review_findings_ranked_by_symptoms(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(SEEN), press=["v", "right", "2", "right"], terminal_size=(80, 24))


def test_review_findings_ranked_by_symptoms_wide(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(SEEN), press=["v", "right", "2", "right"], terminal_size=(140, 45))
