"""Run a generated project's crash drill (``python -m PACKAGE drill --events``) and stream its events."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from advisor.errors import DrillError, InputError
from advisor.redact import redact_all
from advisor.safe_read import parse_json
from advisor.scaffold.project import package_of, strategy_of

#: A drill's size when the caller does not say: a Spark restart is a JVM start (5-10 s),
#: so the stream project's drill kills 3 times, each aimed (--aim) at the window
#: between its sink's commit and Spark's commit log.
DRILL_DEFAULTS: dict[str, dict[str, Any]] = {
    "stream-checkpoint": {"records": 600, "kills": 3, "aim": "after_sink_commit"},
}


def drill_size(strategy: str | None) -> dict[str, Any]:
    """``records``, ``kills`` and ``aim`` of a drill of ``strategy`` when the caller does not say."""
    return {"records": 2000, "kills": 10, "aim": None, **DRILL_DEFAULTS.get(strategy or "", {})}


def drill_events(
    dest: Path,
    *,
    records: int | None = None,
    kills: int | None = None,
    seed: int = 1,
    sigterm: bool = False,
    work_ms: float | None = None,
    aim: str | None = None,
    only: list[str] | None = None,
    shrink: bool = True,
) -> Iterator[dict[str, Any]]:
    """Run the generated project's drill and yield its events; the last is the report.

    ``records``/``kills`` default to 2000/10 (DRILL_DEFAULTS per strategy); ``aim``
    is the drill's ``--aim WINDOW|all``; ``only``: its fault kinds (``--only KIND``, default:
    every kind that applies); ``shrink=False``: a failure is not shrunk (``--no-shrink``)."""
    dest = Path(dest)
    package = package_of(dest)
    defaults = drill_size(strategy_of(dest))
    records = defaults["records"] if records is None else records
    kills = defaults["kills"] if kills is None else kills
    aim = defaults["aim"] if aim is None else aim
    cmd = [sys.executable, "-m", package, "drill", "--records", str(records), "--kills", str(kills),
           "--seed", str(seed), "--events", "--json"]
    if sigterm:
        cmd.append("--sigterm")
    if work_ms is not None:
        cmd += ["--work-ms", str(work_ms)]
    if aim is not None:  # a critical window of the strategy, or "all" (the project's `drill --help`)
        cmd += ["--aim", aim]
    for kind in only or ():  # the fault kinds of the schedule (the project's `drill --help`)
        cmd += ["--only", kind]
    if not shrink:
        cmd.append("--no-shrink")
    env = dict(os.environ)
    src = str((dest / "src").resolve())
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    errors = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: it can never fill up and block
    try:
        # A session of its own: the drill, its workers and its oracles are one process group, so a
        # drill that does not stop when asked is killed with everything it started (no orphans).
        proc = subprocess.Popen(cmd, cwd=dest, env=env, stdout=subprocess.PIPE, stderr=errors,
                                stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    except OSError as exc:
        errors.close()
        raise DrillError(f"cannot start the drill of {dest}: {exc}") from None
    report = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = parse_json(line, f"the drill of {dest}", "drill event")
            except InputError:
                continue  # not an event (a stray print, a line nested too deep); the report decides
            if isinstance(event, dict):
                event = redact_all(event)  # a generated project redacts its own; an edited one may not
                if event.get("event") == "report":
                    report = event
                yield event
        proc.wait()
    finally:
        if proc.poll() is None:
            # Stopped early (the consumer closed the generator): SIGTERM lets the drill
            # stop its own workers; SIGKILL to its whole group only if it does not exit promptly.
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        errors.seek(0)
        err = errors.read().strip().splitlines()
        errors.close()
    if report is None:
        detail = err[-1] if err else f"exit code {proc.returncode}"
        raise DrillError(f"the drill of {dest} did not report: {detail}")


def run_drill(dest: Path, **options: Any) -> dict[str, Any]:
    """Run the drill to the end and return its report."""
    report: dict[str, Any] | None = None
    for event in drill_events(dest, **options):
        if event.get("event") == "report":
            report = event
    assert report is not None  # drill_events raises otherwise
    return report
