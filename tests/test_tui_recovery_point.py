"""The drill's live recovery-point view: Pilot (it follows the drill's data dir) and a snapshot.

The data directories are built by hand (tests/test_inspect.py's fixtures), so the picture
holds no clock time and no temporary path.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from advisor.tui.screens.drill import DrillScreen
from advisor.tui.widgets.recovery_point import RecoveryPointView
from test_inspect import checkpoint_dir, file_dir  # noqa: F401  (fixtures)


class OneWidget(App[None]):
    def __init__(self, data_dir: Path | None) -> None:
        super().__init__()
        self.data_dir = data_dir

    def compose(self) -> ComposeResult:
        yield RecoveryPointView(self.data_dir, interval=0)


async def _settle(pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait until no read of the view is running (a newer read cancels an older one)."""
    for _ in range(200):
        await pilot.pause()
        if not any(w.is_running for w in pilot.app.workers if w.group == "recovery-point"):
            break
        await asyncio.sleep(0.02)
    await pilot.pause()


def test_the_drill_screen_follows_the_drills_data_dir(checkpoint_dir: Path) -> None:  # noqa: F811
    async def drive() -> None:
        from advisor.tui.app import make_app

        app = make_app(workdir=Path("."), blink=False)
        async with app.run_test(size=(100, 40)) as pilot:
            screen = DrillScreen(Path("demo_job"), autostart=False)
            await app.push_screen(screen)
            view = screen.query_one(RecoveryPointView)
            assert not view.display  # nothing to show before the drill says where its data is
            screen.apply({"event": "start", "records": 1000, "kills": 2, "data_dir": str(checkpoint_dir), "t": 0})
            await _settle(pilot)
            assert view.display
            shown = view.shown.plain
            assert "▶ task demo-00000 resumes at record 300 of 500" in shown
            assert "in doubt: 3 maybe made, not done (1 got through)" in shown
            highlighted = [s for s in view.shown.spans if "reverse" in str(s.style)]
            assert len(highlighted) == 1  # the row that matters
            # the worker moves on: the next read shows the new offset
            import sqlite3

            conn = sqlite3.connect(checkpoint_dir / "state.db")
            conn.execute("UPDATE tasks SET processed_offset = 400 WHERE task_id = 'demo-00000'")
            conn.commit()
            conn.close()
            view.reload()
            await _settle(pilot)
            assert "resumes at record 400 of 500" in view.shown.plain

    asyncio.run(drive())


def test_a_directory_that_is_not_there_yet_is_said_quietly(tmp_path: Path) -> None:
    async def drive() -> None:
        app = OneWidget(tmp_path / "missing")
        async with app.run_test() as pilot:
            await _settle(pilot)
            assert "does not exist" in app.query_one(RecoveryPointView).shown.plain

    asyncio.run(drive())


def test_snapshot_file_variant(snap_compare, file_dir: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    assert snap_compare(OneWidget(file_dir), run_before=_settle, terminal_size=(100, 14))


@pytest.mark.slow
def test_the_view_follows_a_real_drill(tmp_path: Path) -> None:
    """A generated checkpoint project's drill in the TUI: the view shows the offsets move
    while the worker is killed and restarted, and the finished state at the end."""
    import re

    from advisor.scaffold.generation import generate
    from advisor.tui.app import make_app

    dest = tmp_path / "proj"
    generate("checkpoint", dest, {"project_name": "demo job"})

    async def drive() -> None:
        app = make_app(workdir=tmp_path, blink=False, drill_options={"records": 1000, "kills": 3, "work_ms": 3})
        async with app.run_test(size=(100, 40)) as pilot:
            screen = DrillScreen(dest)
            await app.push_screen(screen)
            view = screen.query_one(RecoveryPointView)
            seen: set[str] = set()
            deadline = time.monotonic() + 120
            await pilot.pause(0.2)
            while screen.running and time.monotonic() < deadline:
                seen |= set(re.findall(r"resumes at record (\d+) of 500", view.shown.plain))
                await pilot.pause(0.05)
            assert not screen.running
            view.reload()
            await _settle(pilot)
            assert len(seen - {"0"}) >= 2, seen  # the offset moved, live (3 ms a record: seconds to watch)
            # 1000 and the new input the drill submitted while the workers ran
            done = re.search(r"all (\d+) records are checkpointed; nothing to resume", view.shown.plain)
            assert done and int(done.group(1)) >= 1000, view.shown.plain
            assert f"0 (record, step) applied twice; 0 of {done.group(1)} expected lost" in view.shown.plain

    asyncio.run(drive())
