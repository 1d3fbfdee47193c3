"""Pilot tests: "review my current design" — symptoms (several) and the engine's owner → current
strategy → controls checklist → findings (ranked by the symptoms, the first one above the fold)
→ export, and the exported answers file reproduces the record with `advisor review --answers`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import Input, OptionList

from advisor.cli import main
from advisor.model.answers import load_review_file
from advisor.model.catalog import Catalog
from advisor.tui.app import make_app
from advisor.tui.screens.export import ExportScreen
from advisor.tui.screens.recommendation import RecommendationScreen
from advisor.tui.screens.review_controls import ControlsScreen
from advisor.tui.screens.review_current import CurrentStrategyScreen
from advisor.tui.screens.review_findings import FindingsScreen, findings_part
from advisor.tui.screens.review_symptoms import SymptomsScreen
from advisor.tui.screens.welcome import WelcomeScreen
from pinned_catalog import rules_alone  # tests/ is on sys.path (conftest.py)

BATCH = {"recovery_point_store": "database", "acceptable_loss": "one_batch", "duration": "hours",
         "work_shape": "record_batch", "workers": "many"}  # fmt: skip
CONTEXT = "A redeploy killed the nightly import; 40 invoices went out twice."


def shown(app, selector: str) -> str:  # type: ignore[no-untyped-def]
    return str(app.screen.query_one(selector).render())


def words(text: str) -> str:
    return " ".join(text.split())


def test_the_review_walkthrough_exports_a_record_led_by_the_control_answered_no(
    catalog: Catalog, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    strategies = list(catalog.strategy_ids)
    checkpoint = catalog.strategy("checkpoint")
    applying = [c for c in checkpoint.controls if c.applies(BATCH)]
    assert len(applying) >= 2

    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            assert isinstance(app.screen, WelcomeScreen)
            await pilot.press("v")
            assert isinstance(app.screen, SymptomsScreen)
            await pilot.press("right")  # nothing seen: on to the strategy
            assert isinstance(app.screen, CurrentStrategyScreen)
            await pilot.press("tab", *CONTEXT, "enter")  # the incident, in the team's words
            assert app.session.context == CONTEXT
            await pilot.press(str(strategies.index("checkpoint") + 1))
            assert isinstance(app.screen, ControlsScreen)
            # the highlighted control's why is shown; y / n / u answer it and move down
            assert words(applying[0].worded(BATCH).why) in words(shown(app, "#control-why"))
            await pilot.press("y", "n")
            if len(applying) > 2:  # the third control is highlighted now: its why (and check) shown
                detail = words(shown(app, "#control-why"))
                assert words(applying[2].worded(BATCH).why) in detail
                assert words(applying[2].worded(BATCH).how_to_check) in detail
            assert app.session.current is not None
            assert app.session.current.controls == {applying[0].id: "yes", applying[1].id: "no"}
            await pilot.press("right")
            assert isinstance(app.screen, FindingsScreen)
            findings = app.screen.markdown
            assert findings.startswith("## Findings") and f"1. **Missing: {applying[1].question}" in findings
            await pilot.press("left")  # back to the checklist: the answers are kept
            assert isinstance(app.screen, ControlsScreen)
            assert app.screen.status(applying[1].id) == "no"
            await pilot.press("right", "e")
            assert isinstance(app.screen, ExportScreen)
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert "Written" in shown(app, "#export-status")
            assert "advisor review --answers answers.yml" in shown(app, "#export-status")

    asyncio.run(walk())

    record = (tmp_path / "decision-record.md").read_text()
    findings = record.split("## Findings", 1)[1]
    first = next(line for line in findings.splitlines() if line.startswith("1. "))
    assert "Missing" in first and f"`{applying[1].id}`" in first  # the control answered no leads
    assert CONTEXT in record

    loaded = load_review_file(tmp_path / "answers.yml", catalog)
    assert loaded.context == CONTEXT and loaded.answers == BATCH
    assert loaded.current is not None and loaded.current.strategy == "checkpoint"
    assert loaded.current.status(applying[1].id) == "no" and loaded.current.status(applying[0].id) == "yes"

    monkeypatch.chdir(tmp_path)  # the CLI, given the exported answers file, writes the same record
    assert main(["review", "--answers", "answers.yml", "--out", "again.md"]) == 0
    assert (tmp_path / "again.md").read_text() == record


def test_review_is_reachable_from_the_recommendation_and_back_returns_there(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            app.action_recommend()
            await pilot.pause()
            await pilot.press("v", "right")
            assert isinstance(app.screen, CurrentStrategyScreen)
            await pilot.press("right")  # on, with the highlighted (first) strategy
            assert isinstance(app.screen, ControlsScreen)
            await pilot.press("left", "left", "left")  # back, back, back
            assert isinstance(app.screen, RecommendationScreen)
            await pilot.press("v", "right", "tab", *"ab", "left", "c")  # in the context field ← moves the cursor
            assert app.screen.query_one("#context", Input).value == "acb"

    asyncio.run(walk())


def test_a_loaded_answers_file_with_a_current_design_prefills_the_checklist(catalog: Catalog, tmp_path: Path) -> None:
    control = next(c for c in catalog.strategy("checkpoint").controls if c.applies(BATCH))
    lines = [f"{q}: {v}" for q, v in BATCH.items()]
    lines += ["context: the job lost a night of work", "current:", "  strategy: checkpoint", "  controls:",
              f"    {control.id}: no"]  # fmt: skip
    (tmp_path / "mine.yml").write_text("\n".join(lines) + "\n")

    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("l")
            app.screen.query_one("#answers-path", Input).value = "mine.yml"
            await pilot.press("enter")
            await pilot.pause()
            assert app.session.context == "the job lost a night of work"
            await pilot.press("v", "right")
            assert app.screen.query_one("#current-strategies", OptionList).highlighted == list(
                catalog.strategy_ids
            ).index("checkpoint")
            await pilot.press("enter")
            assert app.screen.status(control.id) == "no"

    asyncio.run(walk())


def test_findings_part_keeps_the_review_sections_only() -> None:
    record = "# Title\n\n* Status: proposed\n\n## Findings\n\n1. x\n\n## Verification plan\n\n1. y\n\n## Context and problem statement\n\nz\n"
    assert findings_part(record) == "## Findings\n\n1. x\n\n## Verification plan\n\n1. y\n"


LOCAL = {"recovery_point_store": "local_disk", "work_shape": "record_batch", "duration": "hours"}


def visible_text(app) -> str:  # type: ignore[no-untyped-def]
    """What the terminal shows right now (the screenshot holds the visible cells only)."""
    svg = app.export_screenshot()
    return " ".join(svg.replace("&#160;", " ").split())


def test_the_symptoms_come_first_and_rank_the_findings(catalog: Catalog, tmp_path: Path, monkeypatch) -> None:
    """Corrupt state on a job with a local progress file: the checksummed write ranks first, says
    why, shows above the fold at 80x24, and the exported file ranks the same with the CLI."""
    choices = catalog.question("symptoms").values

    async def walk() -> None:
        app = make_app(catalog, LOCAL, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("v")
            assert isinstance(app.screen, SymptomsScreen)
            await pilot.press(str(choices.index("corrupt_state") + 1), str(choices.index("never_finishes") + 1))
            assert app.session.answers["symptoms"] == "corrupt_state,never_finishes"
            await pilot.press(str(choices.index("never_finishes") + 1))  # toggled off again
            assert app.session.answers["symptoms"] == "corrupt_state"
            await pilot.press("tab", "home", "down", "enter")  # when it happened: the second choice, a crash
            assert app.session.answers["trigger"] == "crash"
            assert app.screen.query_one("#progress-found").has_focus  # enter moved on to the next list
            found = catalog.question("recovery_point_found").values
            await pilot.press("home", *["down"] * found.index("unreadable"), "enter")
            assert app.session.answers["recovery_point_found"] == "unreadable"
            assert app.screen.query_one("#copies").has_focus  # then how the copies were identified:
            await pilot.press("enter")  # nothing happened twice, so "I don't know" (highlighted) stays
            assert not app.session.answers.get("duplicate_ids")
            assert app.screen.query_one("#engine-owner").has_focus  # and on to the owner
            await pilot.press("up", "enter")  # the owner: from "don't know" up to "a product we run"
            assert app.session.answers["engine_owner"] == "product"
            assert isinstance(app.screen, CurrentStrategyScreen)
            await pilot.press(str(list(catalog.strategy_ids).index("checkpoint") + 1), "right")
            assert isinstance(app.screen, FindingsScreen)
            assert "1. **Unknown:" in app.screen.markdown and "(`checkpoint-file-checksummed`)" in (
                app.screen.markdown.split("\n2. ", 1)[0]
            )
            assert "Ranked first:" in app.screen.markdown
            shown_now = visible_text(app)
            assert "checkpoint-file-checksummed" in shown_now and "Ranked first" in shown_now  # above the fold
            await pilot.press("left", "left", "left")
            assert isinstance(app.screen, SymptomsScreen)
            assert app.screen.query_one("#symptom-list").selected == ["corrupt_state"]  # kept
            await pilot.press("right", "right", "right", "e", "ctrl+s")
            await pilot.pause()

    asyncio.run(walk())
    loaded = load_review_file(tmp_path / "answers.yml", catalog)
    assert loaded.answers["symptoms"] == "corrupt_state" and loaded.answers["engine_owner"] == "product"
    record = (tmp_path / "decision-record.md").read_text()
    assert loaded.answers["trigger"] == "crash" and "when it happened (a crash)" in record
    assert loaded.answers["recovery_point_found"] == "unreadable" and "what the recorded progress said (unreadable)" in record
    monkeypatch.chdir(tmp_path)
    assert main(["review", "--answers", "answers.yml", "--out", "again.md"]) == 0
    assert (tmp_path / "again.md").read_text() == (tmp_path / "decision-record.md").read_text()


def test_the_first_finding_is_above_the_fold_at_140x45(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, {**LOCAL, "symptoms": "corrupt_state"}, workdir=tmp_path)
        async with app.run_test(size=(140, 45)) as pilot:
            await pilot.press("v", "right", str(list(catalog.strategy_ids).index("checkpoint") + 1), "right")
            assert isinstance(app.screen, FindingsScreen)
            shown_now = visible_text(app)
            assert "checkpoint-file-checksummed" in shown_now and "Ranked first" in shown_now

    asyncio.run(walk())


def test_the_main_walkthrough_leaves_the_evidence_to_the_review(catalog: Catalog, tmp_path: Path) -> None:
    from advisor.tui.session import Session

    session = Session(catalog=catalog, workdir=tmp_path, show_all=True)
    asked = [q.id for q in session.questions()]
    assert not {"symptoms", "trigger", "engine_owner"} & set(asked) and "broker" in asked


def test_a_close_call_sends_the_team_to_the_answer_that_tells_the_two_apart(tmp_path: Path) -> None:
    """Work lost on a checkpoint job: committing results with the position and recording more often
    are a close call; `t` goes back to what the recorded progress said, and the answer the record
    names for finding 2 puts it first."""
    catalog = rules_alone()  # the rules' own close call: past incidents can end it
    answers = {**BATCH, "workers": "many", "symptoms": "work_lost"}

    async def walk() -> None:
        app = make_app(catalog, answers, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("v", "right", str(list(catalog.strategy_ids).index("checkpoint") + 1), "right")
            assert isinstance(app.screen, FindingsScreen)
            assert app.screen.apart == ("recovery_point_found",) and "tells them apart" in visible_text(app)
            before = app.session.review()
            second = before.findings[1].control.id
            for_second = before.separators[0].for_second[0]
            await pilot.press("t")
            assert isinstance(app.screen, SymptomsScreen) and app.screen.query_one("#progress-found").has_focus
            values = catalog.question("recovery_point_found").values
            await pilot.press("home", *["down"] * values.index(for_second), "enter")
            assert app.session.answers["recovery_point_found"] == for_second
            await pilot.press("right", str(list(catalog.strategy_ids).index("checkpoint") + 1), "right")
            assert isinstance(app.screen, FindingsScreen)
            assert app.session.review().findings[0].control.id == second and app.screen.apart == ()

    asyncio.run(walk())


def test_a_close_call_on_a_repeated_call_sends_the_team_to_the_copies_identifiers(tmp_path: Path) -> None:
    """A call to a plain service went out twice around a crash: looking before calling again and a
    key on the effect are a close call; `t` goes to how the two copies were identified, and the
    answer the record names for finding 2 (the same id on both) puts the key first."""
    catalog = rules_alone()  # the rules' own close call: past incidents can end it
    answers = {"external_effects": "plain_api", "symptoms": "duplicate_effect", "trigger": "crash"}

    async def walk() -> None:
        app = make_app(catalog, answers, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            pick = str(list(catalog.strategy_ids).index("idempotent-retry") + 1)
            await pilot.press("v", "right", pick, "right")
            assert isinstance(app.screen, FindingsScreen) and app.screen.apart == ("duplicate_ids",)
            before = app.session.review()
            second = before.findings[1].control.id
            copies = before.separators[0]
            await pilot.press("t")
            assert isinstance(app.screen, SymptomsScreen) and app.screen.query_one("#copies").has_focus
            values = catalog.question("duplicate_ids").values
            await pilot.press("home", *["down"] * values.index(copies.for_second[0]), "enter")
            assert app.session.answers["duplicate_ids"] == copies.for_second[0]
            await pilot.press("right", pick, "right")
            assert isinstance(app.screen, FindingsScreen)
            assert app.session.review().findings[0].control.id == second

    asyncio.run(walk())
