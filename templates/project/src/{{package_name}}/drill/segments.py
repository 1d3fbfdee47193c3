"""The crash-point drill's run (``--sweep``, ``--upgrade-from``): one worker at a time, each dying at its point.

Unlike the timed drill (runner.py), nobody here sends a kill at a moment: every worker
after the census is started armed (``<PKG>_DRILL_CRASH_AT``, runtime/faults.py) and kills
itself at the point the plan (sweep.py) chose; the next one starts at once and recovers.
The first armed workers die at the plan's opening points, the census at a call well into the
work (sweep_plan.py). The input comes
from ``prepare`` (the demo records submitted; or a store an older release wrote,
upgrade.py); the oracle and the checks are the drill's own (judge.py).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import job
from .. import settings as settings_module
from ..runtime import effects, faults
from ..runtime.errors import JobError
from ..runtime.external import EXTERNAL_DB, ExternalService, verify
from ..runtime.store import STATE_DB
from ..runtime.strategy import Context
from .durability import PROBE_ENV, Probe
from .judge import PROBE_DIR, judge, start_oracles
from .progress import POLL_S
from .report_data import percentile
from .preflight import fresh_data_dir
from .workers import EXTERNAL_DIR_ENV
from .stall import Stall
from .stall import message as stall_message
from .sweep_plan import SweepPlan, Target
from .verdict import failure

#: Where every worker reports the points it passed (faults.py, ``<PKG>_DRILL_POINTS``).
POINTS_DIR = "drill-points"

#: A kill's label when it was not aimed at a named window (the timed drill's word for it).
UNAIMED = "unaimed"


def _applied(probe: sqlite3.Connection) -> int:
    """The effects applied so far: only ever inserted, so MAX(rowid) is their count, in O(1)."""
    return int(probe.execute("SELECT COALESCE(MAX(rowid), 0) FROM effects").fetchone()[0])
#: ``prepare(ctx)`` fills the fresh data directory and returns the records the run must complete.
Prepare = Callable[[Context], list[dict[str, Any]]]


def worker_env(data_dir: Path, target: Target | None) -> dict[str, str]:
    """A worker's environment: the drill's variables set here only, the project importable."""
    env = {k: v for k, v in os.environ.items() if k not in (faults.AIM_ENV, faults.CRASH_ENV, faults.POINTS_ENV)}
    src = str(Path(__file__).resolve().parents[2])  # src/: importable even when not installed
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env[EXTERNAL_DIR_ENV] = str(data_dir)
    env[PROBE_ENV] = str(data_dir / PROBE_DIR)
    env[faults.POINTS_ENV] = str(data_dir / POINTS_DIR)
    if target is not None:
        env[faults.CRASH_ENV] = target.env_value
    return env


class CrashPointRun:
    #: Each worker in a process group of its own (power_loss.py: a power cut ends its children too).
    own_session = False

    def __init__(self, ctx: Context, plan: SweepPlan, prepare: Prepare, *, seed: int, work_ms: float,
                 data_dir: Path | None, emit: Callable[[dict[str, Any]], None], fail_rate: float | None = None,
                 mode: str = "sweep", extra: dict[str, Any] | None = None) -> None:
        if ctx.strategy is None:
            raise JobError("no strategy loaded")
        self.ctx, self.plan, self.prepare, self.seed, self.work_ms = ctx, plan, prepare, seed, work_ms
        self.data_dir_arg, self.emit, self.fail_rate, self.mode = data_dir, emit, fail_rate, mode
        self.extra = extra or {}  # what the mode adds to the report (upgrade.py: the fixture)
        self.t0 = time.monotonic()
        self.recovery_ms: list[float] = []
        self.failures: list[int] = []
        self.worker: subprocess.Popen[bytes] | None = None  # the one running now
        self.stall = Stall(ctx.settings.lease_s)  # a worker that stops moving is stopped (stall.py)
        self.expected = 0  # the effects the run must make (the stalled message says how far it got)
        #: Where the workers keep their state (``run --data-dir``); None: the drill's own directory.
        #: A power-loss drill (power_loss.py) puts it on a LazyFS mount, the service's external.db not.
        self.work_dir: Path | None = None

    def t(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def run(self) -> dict[str, Any]:
        return self.run_in(fresh_data_dir(self.data_dir_arg))

    def run_in(self, data_dir: Path) -> dict[str, Any]:
        """The run in the fresh directory ``data_dir`` (the service, the drill's files; the workers'
        state too unless ``work_dir`` says otherwise)."""
        ctx = Context(data_dir=self.work_dir or data_dir,
                      settings=replace(self.ctx.settings, external_dir=str(data_dir)),
                      strategy=self.ctx.strategy)
        (data_dir / PROBE_DIR).mkdir(exist_ok=True)
        (data_dir / POINTS_DIR).mkdir()
        with Probe(data_dir / PROBE_DIR, STATE_DB).watch():  # what prepare writes must be durable too
            records = self.prepare(ctx)
        oracles = start_oracles(data_dir, records, self.seed, worker_env(data_dir, None))
        expected = {(str(r["record_id"]), step) for r in records for step in job.STEPS}
        service = ExternalService(data_dir)  # exists before the first worker, so progress can be polled
        if self.fail_rate is not None:
            service.set_failure_rate(self.fail_rate)
        service.close()
        self.emit({"event": "start", "strategy": ctx.strategy.NAME, "records": len(records), "mode": self.mode,
                   "workers": 1, "data_dir": str(data_dir), "t": self.t()})
        started = time.monotonic()
        try:
            with open(data_dir / "drill-workers.log", "ab") as log, \
                    closing(sqlite3.connect(f"file:{data_dir / EXTERNAL_DB}?mode=ro", uri=True)) as probe:
                self._segments(data_dir, log, probe, len(expected))
        except BaseException:  # the drill itself was stopped: its worker and the oracles with it
            for proc in [*oracles, *([self.worker] if self.worker else [])]:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            raise
        return self._report(ctx, data_dir, records, expected, oracles, time.monotonic() - started)

    # ------------------------------------------------------------ the workers
    def _segments(self, data_dir: Path, log: Any, probe: sqlite3.Connection, expected: int) -> None:
        per_batch = self.ctx.settings.batch_size * len(job.STEPS)
        self.expected = expected
        while True:
            before = _applied(probe)
            target = self.plan.next(expected - before, per_batch)
            proc = self._spawn(data_dir, log, target)
            census = target is not None and target.phase == "census"
            code = self._wait(proc, probe, measure_from=None if census else before)
            if self.stall.found is not None:  # stopped by the watchdog: the run ends here, judged as it stands
                return
            trace = _trace(data_dir, proc.pid)
            self.plan.learn(trace, census_effects=_applied(probe) - before if census else None)
            if target is None:  # the last worker, unarmed: the run is over
                if code != 0:
                    self.failures.append(code)
                self.after_worker(None, code)
                return
            target.effects_done = _applied(probe)
            landed = self.landed(target, code, trace)
            if landed:
                target.outcome, target.landed = "killed", landed
                self.after_worker(target, code)
                self.emit({"event": "kill", "n": len(self.plan.targets), "signal": "SIGKILL", "point": landed,
                           "pass": target.n, "phase": target.phase, "done": _applied(probe), "t": self.t()})
                self.emit({"event": "restart", "n": len(self.plan.targets), "t": self.t()})
                continue
            target.outcome = "run ended first" if code == 0 else "worker failed"
            if code != 0:
                self.failures.append(code)
            self.after_worker(target, code)
            return

    def landed(self, target: Target, code: int, trace: dict[str, Any] | None) -> str | None:
        """The point the worker died at, when it died where it was armed to (None: it did not)."""
        if code == -signal.SIGKILL and trace and trace.get("crashed_at"):
            return str(trace["crashed_at"])
        return None

    def after_worker(self, target: Target | None, code: int) -> None:
        """A worker has ended (killed at ``target``, or the last one): before the next one starts."""

    def _spawn(self, data_dir: Path, log: Any, target: Target | None) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-m", settings_module.PACKAGE, "run", "--data-dir", str(self.work_dir or data_dir)]
        self.worker = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                       env=worker_env(data_dir, target), start_new_session=self.own_session)
        return self.worker

    def _wait(self, proc: subprocess.Popen[bytes], probe: sqlite3.Connection, *, measure_from: int | None) -> int:
        """Until the worker exits; ``measure_from``: time its recovery (start -> first new effect)."""
        spawned, at_start = time.monotonic(), _applied(probe)
        while proc.poll() is None:
            applied = _applied(probe)
            calls = int(probe.execute("SELECT COALESCE(MAX(rowid), 0) FROM calls").fetchone()[0])
            still = self.stall.still_for((applied, calls, proc.pid), paused=False, now=time.monotonic())
            if still is not None:
                self.emit({"event": "stalled", "t": self.t(), **self.stall.stop(still, applied, self.expected, 1)})
                proc.kill()
                proc.wait()
                break
            if measure_from is not None and applied > measure_from:
                self.recovery_ms.append(round((time.monotonic() - spawned) * 1000, 1))
                measure_from = None
            self.watch(proc, applied, at_start)
            time.sleep(POLL_S)
        return int(proc.returncode)

    def watch(self, proc: subprocess.Popen[bytes], applied: int, at_start: int) -> None:
        """Each poll of a running worker (``applied`` effects so far, ``at_start`` when it started): a mode
        that kills at moments of its own does it here (power_loss.py)."""

    # ------------------------------------------------------------ the report
    def _report(self, ctx: Context, data_dir: Path, records: list[dict[str, Any]], expected: set[tuple[str, str]],
                oracles: list[subprocess.Popen[bytes]], wall_s: float) -> dict[str, Any]:
        strategy = ctx.strategy
        checked = verify(data_dir, expected)
        calls = effects.summary(ctx.data_dir, self.ctx.settings)  # the ledger is the workers' (state.db)
        try:
            state = strategy.status(ctx)
        except Exception as exc:  # a store the crashes (or power cuts) left unreadable: a verdict, not a crash
            state = {"total": len(records), "done": 0, "unreadable": f"{type(exc).__name__}: {exc}"}
        coverage = self.plan.coverage()
        missed = self.plan.missed()
        kills = coverage["crashes"]
        report = {
            "strategy": strategy.NAME, "records": len(records), "expected_effects": len(expected),
            "kills": kills, "kills_requested": kills + len(missed),
            "signal": "SIGKILL", "seed": self.seed, "workers": 1, "hosts": 1, "work_ms": self.work_ms,
            "batch_size": self.ctx.settings.batch_size, "fail_rate": self.fail_rate, **checked,
            "effect_kind": calls["effect_kind"], "plain_policy": calls["plain_policy"], "promise": calls["promise"],
            "in_doubt": calls["in_doubt"], "in_doubt_ids": calls["in_doubt_ids"],
            "possible_duplicates": calls["possible_duplicates"],
            "redone_work_per_kill": round(max(0, checked["requests"] - len(expected)) / max(kills, 1), 1),
            "recovery_ms": {"p50": percentile(self.recovery_ms, 0.5), "p95": percentile(self.recovery_ms, 0.95),
                            "max": max(self.recovery_ms) if self.recovery_ms else None},
            "throughput": round(len(records) / wall_s, 1) if wall_s > 0 else None, "wall_s": round(wall_s, 3),
            "graceful_exits": [], "worker_failures": self.failures,
            "incomplete_records": state["total"] - state["done"], "kills_landed": kills, "aim": None,
            "kills_by_window": {UNAIMED: kills} if kills else {}, "windows_not_reached": missed,
            "data_dir": str(data_dir), "sweep": coverage, "unreadable_store": state.get("unreadable"), **self.extra,
        }
        extras = getattr(strategy, "drill_report", None)
        if extras is not None:
            report.update(extras(ctx))
        report["failures"] = judge(ctx, self.ctx.settings, data_dir, report, expected, records, oracles, state)
        report["failures"] += self.more_failures(report)
        report["stalled"] = self.stall.found
        if self.stall.found is not None:
            report["failures"].insert(0, failure("stalled", stall_message(self.stall.found)))
        report["ok"] = report["failures"] == []
        self.emit({"event": "report", **report})
        return report


    def more_failures(self, report: dict[str, Any]) -> list[dict[str, str]]:
        """What a mode checks beyond the drill's verdict (power_loss.py: what the power cuts lost)."""
        return []


def _trace(data_dir: Path, pid: int) -> dict[str, Any] | None:
    """What a worker reported about its points (faults.py), if it got to write it."""
    try:
        doc = json.loads((data_dir / POINTS_DIR / f"{pid}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
