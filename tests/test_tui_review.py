"""Pilot tests: "review my current design" — current strategy → controls checklist → findings
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
from advisor.tui.screens.welcome import WelcomeScreen

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
            await pilot.press("v")
            assert isinstance(app.screen, CurrentStrategyScreen)
            await pilot.press("right")  # on, with the highlighted (first) strategy
            assert isinstance(app.screen, ControlsScreen)
            await pilot.press("left", "left")  # back, back
            assert isinstance(app.screen, RecommendationScreen)
            await pilot.press("v", "tab", *"ab", "left", "c")  # in the context field ← moves the cursor
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
            await pilot.press("v")
            assert app.screen.query_one("#current-strategies", OptionList).highlighted == list(
                catalog.strategy_ids
            ).index("checkpoint")
            await pilot.press("enter")
            assert app.screen.status(control.id) == "no"

    asyncio.run(walk())


def test_findings_part_keeps_the_review_sections_only() -> None:
    record = "# Title\n\n* Status: proposed\n\n## Findings\n\n1. x\n\n## Verification plan\n\n1. y\n\n## Context and problem statement\n\nz\n"
    assert findings_part(record) == "## Findings\n\n1. x\n\n## Verification plan\n\n1. y\n"
