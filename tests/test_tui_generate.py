"""Pilot tests: generating a project into a temporary folder, and running its drill live."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from textual.containers import VerticalScroll
from textual.widgets import Button, Input, Select

from advisor.model.catalog import Catalog
from advisor.model.template_questions import generated_strategies
from advisor.tui.app import make_app
from advisor.tui.screens.confirm import ConfirmScreen
from advisor.tui.screens.drill import DrillScreen
from advisor.tui.screens.generate import GenerateScreen
from advisor.tui.widgets.progress_chart import ProgressChart
from drill_kills import planned_kills, writes_cut

BATCH = {"work_shape": "record_batch", "duration": "hours", "recovery_point_store": "database"}
SMALL_DRILL = {"records": 300, "kills": 3}


def shown(app, selector: str) -> str:  # type: ignore[no-untyped-def]
    return str(app.screen.query_one(selector).render())


async def until(pilot, condition, timeout: float = 90.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.1)


async def open_generate(pilot, name: str | None = None, dest: str | None = None) -> None:  # type: ignore[no-untyped-def]
    pilot.app.action_recommend()
    await pilot.pause()
    await pilot.press("g")
    await pilot.pause()
    assert isinstance(pilot.app.screen, GenerateScreen)
    if name is not None:
        pilot.app.screen.query_one("#project-name", Input).value = name
        await pilot.pause()
    if dest is not None:
        pilot.app.screen.query_one("#dest", Input).value = dest


def test_generate_writes_the_project_and_shows_tree_and_next_commands(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_generate(pilot, "Nightly Sync")
            assert app.screen.query_one("#dest", Input).value == "nightly_sync"  # follows the name
            await pilot.press("ctrl+g")
            await until(pilot, lambda: app.session.generated is not None)
            await pilot.pause()
            result = shown(app, "#gen-result")
            assert "schema.sql" in result and "python -m nightly_sync drill" in result
            assert not app.screen.query_one("#try-btn", Button).disabled

    asyncio.run(walk())
    project = tmp_path / "nightly_sync"
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert answers["strategy"] == "checkpoint" and answers["package_name"] == "nightly_sync"
    assert (project / "src" / "nightly_sync").is_dir()


def test_a_preview_that_arrives_after_the_screen_is_gone_is_dropped(catalog: Catalog, tmp_path: Path) -> None:
    """The first preview renders the template in a thread and can take seconds: a user who leaves
    the screen first (or an app closing) must not get a crash from it (it once failed the suite)."""
    from rich.text import Text

    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_generate(pilot)
            screen = app.screen
            assert isinstance(screen, GenerateScreen)
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, GenerateScreen)
            screen.show_preview(Text("Files it will write (1):\nREADME.md"))  # late: nothing to show it in

    asyncio.run(walk())


@pytest.mark.parametrize("clear", [("ctrl+u",), ("end", "shift+home", "backspace")], ids=["ctrl-u", "select-and-delete"])
def test_typing_right_after_clearing_the_name_keeps_every_character(clear: tuple[str, ...], catalog: Catalog,
                                                                    tmp_path: Path) -> None:
    """Cleared and typed at once, while the first preview still renders the template in a thread (it
    imports Copier): every key lands in the field, and the destination follows the new name."""
    async def walk() -> tuple[str, str]:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(140, 45)) as pilot:
            await open_generate(pilot)
            await pilot.press(*clear, *"Nightly Sync")
            await pilot.pause()
            return (app.screen.query_one("#project-name", Input).value, app.screen.query_one("#dest", Input).value)

    assert asyncio.run(walk()) == ("Nightly Sync", "nightly_sync")


def test_the_store_choice_reaches_the_template_and_a_typed_destination_stays(
    catalog: Catalog, tmp_path: Path
) -> None:
    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_generate(pilot, dest="jobs/file_variant")
            app.screen.query_one("#project-name", Input).value = "Renamed Job"
            await pilot.pause()
            assert app.screen.query_one("#dest", Input).value == "jobs/file_variant"
            app.screen.query_one("#store-checkpoint_store", Select).value = "file"
            await pilot.press("ctrl+g")
            await until(pilot, lambda: app.session.generated is not None)

    (tmp_path / "jobs").mkdir()
    asyncio.run(walk())
    answers = yaml.safe_load((tmp_path / "jobs/file_variant/.copier-answers.yml").read_text())
    assert answers["checkpoint_store"] == "file" and answers["package_name"] == "renamed_job"


def test_an_occupied_destination_asks_first_and_no_leaves_it_alone(catalog: Catalog, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("keep me\n")

    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_generate(pilot, dest="taken")
            await pilot.press("ctrl+g")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen) and "not empty" in shown(app, "#confirm-text")
            await pilot.press("n")
            assert isinstance(app.screen, GenerateScreen)
            status = shown(app, "#gen-status")
            assert "not empty" in status and "--force" not in status  # no flag to pass in the TUI
            assert app.session.generated is None
            assert not app.screen.query_one("#generate-btn", Button).disabled  # can try again

    asyncio.run(walk())
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["mine.txt"]


def test_an_occupied_destination_is_written_into_once_confirmed(catalog: Catalog, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("keep me\n")

    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_generate(pilot, dest="taken")
            await pilot.press("ctrl+g")
            await pilot.pause()
            await pilot.press("y")
            await until(pilot, lambda: app.session.generated is not None)

    asyncio.run(walk())
    assert (tmp_path / "taken" / "mine.txt").read_text() == "keep me\n"
    assert (tmp_path / "taken" / "pyproject.toml").exists()


def test_a_project_name_the_template_rejects_is_a_message(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_generate(pilot, "../escape", dest="escape")
            await until(pilot, lambda: "Preview:" in shown(app, "#gen-preview"))  # the preview says so first
            await pilot.press("ctrl+g")
            await until(pilot, lambda: "failed" in shown(app, "#gen-status"))
            assert "path tricks" in shown(app, "#gen-status")

    asyncio.run(walk())
    assert list(tmp_path.iterdir()) == []


def test_a_strategy_without_a_template_says_so(catalog_copy: Path, tmp_path: Path) -> None:
    """Every bundled strategy has a template now; a team's own (`--catalog`) may not."""
    from advisor.model.loader import load_catalog

    saga = (catalog_copy / "state-machine.yaml").read_text()
    saga = saga.replace("id: state-machine", "id: saga").replace("name: State machine", "name: Saga")
    (catalog_copy / "saga.yaml").write_text(saga.replace("  strategy: state-machine", "  strategy: saga"))
    catalog = load_catalog(catalog_copy)
    missing = [s.id for s in catalog.strategies if s.template not in generated_strategies()]
    assert missing == ["saga"]
    work = tmp_path / "work"
    work.mkdir()

    async def walk() -> None:
        app = make_app(catalog, workdir=work)
        app.session.chosen = missing[0]
        async with app.run_test(size=(80, 24)) as pilot:
            app.action_generate()
            await pilot.pause()
            assert "not generated yet" in shown(app, "#gen-title")
            assert app.screen.query_one("#generate-btn", Button).disabled
            await pilot.press("ctrl+g")
            await pilot.pause()
            assert app.session.generated is None

    asyncio.run(walk())
    assert list(work.iterdir()) == []


def test_try_it_runs_the_drill_live_to_a_verdict(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path, drill_options=SMALL_DRILL)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_generate(pilot, "Drill Me")
            await pilot.press("ctrl+g")
            await until(pilot, lambda: app.session.generated is not None)
            await pilot.press("ctrl+t")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, DrillScreen)
            await until(pilot, lambda: not screen.running)
            verdict = shown(app, "#drill-verdict")
            assert "PASSED" in verdict and "lost 0" in verdict and "duplicated 0" in verdict
            chart = screen.query_one(ProgressChart)
            # The 3 kills asked for and the cuts at a worker's first writes, plus the default schedule's
            # successor on another host (a graceful stop of the first worker, drawn as a kill too); every
            # one recovered.
            assert planned_kills(3, "checkpoint") <= len(chart.kills) <= planned_kills(3, "checkpoint") + 1
            # The chart ends at every record done: the 300 asked for and the ones the drill added (new
            # input while the workers ran; on a slow machine, more so that every kill could land): the
            # verdict says how many, and why.
            end = chart.points[-1][1]
            said = re.search(rf"{end} records \(([^)]*)\)", verdict)
            assert said, verdict
            added = re.findall(r"(\d+) (?:added to land every fault|submitted while the workers ran|after a rebuild)",
                               said.group(1))
            assert end == 300 + sum(int(n) for n in added), verdict
            log = shown(app, "#drill-lines")
            assert log.count("✕ kill") == len(chart.kills) == log.count("✔ recovered")
            await pilot.pause()
            scroll = screen.query_one("#drill-log", VerticalScroll)
            assert scroll.scroll_y == scroll.max_scroll_y  # the last lines are in view
            await pilot.press("s")  # again, with SIGTERM: a graceful stop each time
            assert screen.running and "SIGTERM" in shown(app, "#drill-title")
            await until(pilot, lambda: not screen.running)
            assert "PASSED" in shown(app, "#drill-verdict")
            # the same schedule, all SIGTERM (but the cuts at a worker's first writes: a worker's own SIGKILLs)
            assert shown(app, "#drill-lines").count("SIGTERM") == log.count("✕ kill") - writes_cut()

    asyncio.run(walk())


def test_a_failing_drill_is_a_message(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path, drill_options=SMALL_DRILL)
        async with app.run_test(size=(80, 24)) as pilot:
            await app.push_screen(DrillScreen(tmp_path))  # not a generated project
            await until(pilot, lambda: not app.screen.running)
            assert "The drill failed" in shown(app, "#drill-verdict")
            assert "not a generated project" in shown(app, "#drill-verdict")

    asyncio.run(walk())


def test_try_it_before_generating_opens_generate(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("ctrl+p", *"Try it", "enter")
            await pilot.pause()
            assert isinstance(app.screen, GenerateScreen)

    asyncio.run(walk())


def pids(pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]


def quit_during_drill(catalog: Catalog, tmp_path: Path, name: str) -> None:
    async def walk() -> None:
        # 5 ms of work per record: a worker left behind would still be busy minutes later.
        app = make_app(catalog, BATCH, workdir=tmp_path, drill_options={"records": 20000, "kills": 5, "work_ms": 5})
        async with app.run_test(size=(80, 24)) as pilot:
            await open_generate(pilot, name)
            await pilot.press("ctrl+g")
            await until(pilot, lambda: app.session.generated is not None)
            await pilot.press("ctrl+t")
            await until(pilot, lambda: app.screen.query_one(ProgressChart).points != [])
            await pilot.press("ctrl+q")
            await pilot.pause()
        assert app.return_code == 0

    asyncio.run(walk())


def test_quitting_during_a_drill_exits_and_stops_the_drill(catalog: Catalog, tmp_path: Path) -> None:
    quit_during_drill(catalog, tmp_path, "Quit Probe")
    try:
        deadline = time.monotonic() + 20
        while pids("quit_probe drill"):
            assert time.monotonic() < deadline, "the drill kept running after the app quit"
            time.sleep(0.2)
    finally:
        for pid in pids("quit_probe"):  # a worker the drill left behind (the next test fails then)
            subprocess.run(["kill", str(pid)], check=False)


def test_quitting_during_a_drill_stops_its_workers_too(catalog: Catalog, tmp_path: Path) -> None:
    quit_during_drill(catalog, tmp_path, "Orphan Probe")
    try:
        # The app's drill thread stops the drill at its next event, and the drill SIGKILLs its workers on
        # its way out: seconds on a busy machine (10 s was once too short in make test). An orphaned worker
        # would keep going through 20,000 records at 5 ms each for minutes, so 30 s still tells the two apart.
        deadline = time.monotonic() + 30
        while pids("orphan_probe"):
            assert time.monotonic() < deadline, "a drill worker kept running after the app quit"
            time.sleep(0.2)
    finally:
        for pid in pids("orphan_probe"):  # the processes this test started, by id
            subprocess.run(["kill", str(pid)], check=False)
