"""Pilot tests: the drill screen's keys and log, fed with events (no project is run)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.containers import VerticalScroll

from advisor.model.catalog import Catalog
from advisor.tui.app import make_app
from advisor.tui.screens.confirm import ConfirmScreen
from advisor.tui.screens.drill import DrillScreen

START = {"event": "start", "records": 1000, "kills": 12, "t": 0.0}
KILLS = [
    e
    for n in range(1, 13)
    for e in (
        {"event": "kill", "n": n, "signal": "SIGKILL", "done": 80 * n, "t": n * 1.0},
        {"event": "restart", "n": n, "t": n * 1.0 + 0.1},
        {"event": "recovered", "n": n, "ms": 100 + n, "t": n * 1.0 + 0.2},
    )
]
REPORT = {"event": "report", "strategy": "checkpoint", "records": 1000, "kills": 12, "lost": 0,
          "duplicate_effects": 0, "redone_calls": 3, "recovery_ms": {"p50": 105, "p95": 111, "max": 112},
          "throughput": 90.0, "wall_s": 13.0, "ok": True}  # fmt: skip


def test_q_in_the_drill_asks_before_quitting(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = DrillScreen(tmp_path / "job", autostart=False)
            await app.push_screen(screen)
            screen.running = True  # as if a drill were under way
            await pilot.press("q")
            assert isinstance(app.screen, ConfirmScreen)
            assert "Stop the drill" in str(app.screen.query_one("#confirm-text").render())
            await pilot.press("n")  # stay: the drill screen is back, the app runs
            assert app.screen is screen and app.is_running
            await pilot.press("q", "y")
            await pilot.pause()
            assert not app.is_running

    asyncio.run(walk())


def test_the_drill_log_shows_its_last_lines_when_the_drill_ends(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = DrillScreen(tmp_path / "job", autostart=False)
            await app.push_screen(screen)
            for event in [START, *KILLS, REPORT]:
                screen.apply(event)
            await pilot.pause()
            await pilot.pause()
            log = screen.query_one("#drill-log", VerticalScroll)
            assert log.max_scroll_y > 0, "the log must overflow for this test to mean anything"
            assert log.scroll_y == log.max_scroll_y

    asyncio.run(walk())
