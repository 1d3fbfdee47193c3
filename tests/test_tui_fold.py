"""Above the fold: at the documented minimum (80×24) and at a common large terminal (140×45), what
each screen is for is on screen when it arrives, without scrolling: the pick and the conflicts
(recommendation), the commands to type next (after Generate), the drill's verdict. The probe's
verdict is checked in tests/test_tui_probe.py, the footer's keys in tests/test_tui_snapshots.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widget import Widget

from advisor.tui.app import make_app
from advisor.tui.screens.drill import DrillScreen
from test_tui_snapshots import BATCH, CONFLICT, DRILL_EVENTS

SIZES = [(80, 24), (140, 45)]


def on_screen(app, widget: Widget, lines: int = 1) -> bool:  # type: ignore[no-untyped-def]
    """Its first ``lines`` lines are inside the screen, above the footer (the last row)."""
    region = app.screen.find_widget(widget).region
    height = app.size.height
    return region.y >= 0 and region.y + lines <= height - 1 and region.height >= min(lines, widget.size.height)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_pick_and_the_conflicts_are_whole_on_screen(size: tuple[int, int]) -> None:
    async def walk() -> None:
        app = make_app(answers=CONFLICT, workdir=Path("."), blink=False)
        async with app.run_test(size=size) as pilot:
            app.action_recommend()
            await pilot.pause()
            for wid in ("#verdict", "#conflicts", "#close-call"):
                widget = app.screen.query_one(wid)
                assert str(widget.render()).strip(), wid
                whole = widget.virtual_region.height
                assert on_screen(app, widget, whole), (wid, app.screen.find_widget(widget).region, whole)

    asyncio.run(walk())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_after_generate_the_next_commands_come_first(size: tuple[int, int], tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(answers=BATCH, workdir=tmp_path, blink=False)
        async with app.run_test(size=size) as pilot:
            app.action_recommend()
            await pilot.pause()
            app.action_generate()
            await pilot.pause()
            await pilot.press("ctrl+g")
            for _ in range(600):
                await pilot.pause(0.05)
                if app.session.generated is not None:
                    break
            await pilot.pause()
            await pilot.pause()
            result = app.screen.query_one("#gen-result")
            lines = str(result.render()).splitlines()
            assert lines[0] == "Next, in a shell:" and lines[1].strip().startswith("cd "), lines[:3]
            assert on_screen(app, result, 3)  # the heading and the first two commands

    asyncio.run(walk())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_drills_verdict_is_on_screen(size: tuple[int, int]) -> None:
    async def walk() -> None:
        app = make_app(workdir=Path("."), blink=False)
        async with app.run_test(size=size) as pilot:
            screen = DrillScreen(Path("demo_job"), autostart=False)
            await app.push_screen(screen)
            for event in DRILL_EVENTS:
                screen.apply(event)
            await pilot.pause()
            verdict = app.screen.query_one("#drill-verdict")
            assert "PASSED" in str(verdict.render())
            assert on_screen(app, verdict, 1)

    asyncio.run(walk())
