"""Pilot tests: "probe my job" from the review's findings step — a real job (a tiny script in
tmp_path), real kills, the verdict shown, and the exported record carrying the evidence."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from textual.widgets import Input

from advisor.model.catalog import Catalog
from advisor.tui.app import make_app
from advisor.tui.screens.export import ExportScreen
from advisor.tui.screens.probe import ProbeScreen
from advisor.tui.screens.review_controls import ControlsScreen
from advisor.tui.screens.review_findings import FindingsScreen
from advisor.tui.session import Session

BATCH = {"recovery_point_store": "database", "acceptable_loss": "one_batch", "duration": "hours",
         "work_shape": "record_batch", "workers": "many"}  # fmt: skip
N = 60

JOB = f"""\
import os, sys, time
path = "out.txt"
done = sum(1 for _ in open(path)) if os.path.exists(path) else 0  # resumes from the file's length
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
for i in range(done, {N}):
    os.write(fd, f"{{i}}\\n".encode())  # one write per line: a kill never leaves half a line
    time.sleep(0.02)
"""
CHECK = f"""\
import sys
lines = open("out.txt").read().split()
sys.exit(0 if lines == [str(i) for i in range({N})] else 1)
"""


def shown(app, selector: str) -> str:  # type: ignore[no-untyped-def]
    return str(app.screen.query_one(selector).render())


def fill(app, **values: str) -> None:  # type: ignore[no-untyped-def]
    for id_, value in values.items():
        app.screen.query_one(f"#probe-{id_}", Input).value = value


async def until(pilot, condition, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.05)


def test_probe_my_job_from_the_findings_shows_kills_and_verdict_and_the_export_carries_it(
    catalog: Catalog, tmp_path: Path
) -> None:
    (tmp_path / "job.py").write_text(JOB)
    (tmp_path / "check.py").write_text(CHECK)
    py = sys.executable

    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(140, 45)) as pilot:
            await pilot.press("v")
            await pilot.press("right")  # the review asks what was seen first: nothing, on to the strategy
            await pilot.press(str(list(catalog.strategy_ids).index("checkpoint") + 1))
            assert isinstance(app.screen, ControlsScreen)
            await pilot.press("right")
            assert isinstance(app.screen, FindingsScreen)
            await pilot.press("p")
            assert isinstance(app.screen, ProbeScreen)
            assert app.screen.query_one("#probe-cwd", Input).value == str(tmp_path)  # the TUI's workdir
            (tmp_path / "out.txt").write_text("left over from an earlier try\n")
            fill(app, run=f"{py} job.py", verify=f"{py} check.py", progress="cat out.txt 2>/dev/null | wc -l",
                 kills="2", min="0.15", max="0.3", reset="rm -f out.txt")  # the reset field: from the beginning
            await pilot.press("ctrl+r")
            screen = app.screen
            assert isinstance(screen, ProbeScreen)
            await until(pilot, lambda: screen.report is not None)
            await pilot.pause()
            report = screen.report
            assert report is not None and report["ok"], report.get("verdict")
            assert report["kills"] >= 1
            log = shown(app, "#probe-lines")
            assert "✕ kill 1" in log and "verify passed" in log
            assert report["verdict"] in shown(app, "#probe-verdict")
            # The verdict is on screen when it arrives (scrolled to), not below the form at 140×45.
            box = app.screen.query_one("#probe-verdict")
            await until(pilot, lambda: 0 <= app.screen.find_widget(box).region.y < 45)
            assert not any("in ? s" in line.plain for line in screen.lines)  # a SIGKILL has no stop time
            assert app.session.probe_report is report
            await pilot.press("escape")  # back to the findings: the plan now leads with the evidence
            assert isinstance(app.screen, FindingsScreen)
            await pilot.pause()
            assert "Evidence from a crash drill of the team's own job" in app.screen.markdown
            await pilot.press("e")
            assert isinstance(app.screen, ExportScreen)
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert "Written" in shown(app, "#export-status")

    asyncio.run(walk())
    record = (tmp_path / "decision-record.md").read_text()
    assert "Evidence from a crash drill of the team's own job:" in record
    assert "- [x] Done: probe of the job on" in record
    assert (tmp_path / "out.txt").read_text().split() == [str(i) for i in range(N)]


def test_bad_input_is_shown_in_place_and_nothing_starts(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(100, 40)) as pilot:
            app.push_screen(ProbeScreen())
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, ProbeScreen)
            await pilot.press("ctrl+r")  # the run command is empty
            await pilot.pause()
            assert "Not started" in shown(app, "#probe-status") and "--run is empty" in shown(app, "#probe-status")
            assert not screen.running and not screen.workers
            fill(app, run="true", cwd="no-such-folder")
            await pilot.press("ctrl+r")
            await pilot.pause()
            assert "no such folder" in shown(app, "#probe-status")
            fill(app, cwd=".", kills="three")
            await pilot.press("ctrl+r")
            await pilot.pause()
            assert "Kills 'three': give a number." in shown(app, "#probe-status")
            assert not screen.running and not screen.workers
            assert app.session.probe_report is None
            await pilot.press("escape")
            assert not isinstance(app.screen, ProbeScreen)

    asyncio.run(walk())


def test_without_a_probe_the_record_has_no_evidence_section(catalog: Catalog, tmp_path: Path) -> None:
    session = Session(catalog=catalog, workdir=tmp_path, answers=dict(BATCH))
    assert "Evidence from a crash drill" not in session.decision_record()


def test_leaving_while_the_probe_runs_stops_the_job(catalog: Catalog, tmp_path: Path) -> None:
    (tmp_path / "sleeper.py").write_text("import os, time\nopen('pid', 'w').write(str(os.getpid()))\ntime.sleep(60)\n")

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(100, 40)) as pilot:
            app.push_screen(ProbeScreen())
            await pilot.pause()
            fill(app, run=f"{sys.executable} sleeper.py", progress="echo 0", kills="1", min="30", max="40")
            await pilot.press("ctrl+r")
            await until(pilot, lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text() != "")
            pid = int((tmp_path / "pid").read_text())
            assert alive(pid)
            await pilot.press("escape")
            assert not isinstance(app.screen, ProbeScreen)
            await until(pilot, lambda: not alive(pid), timeout=10.0)
            assert app.session.probe_report is None

    asyncio.run(walk())
