"""The drill's run: submit, start the workers, kill and restart them at the planned moments, measure.

command.py says what the drill proves; judge.py checks the run this module makes. Kills are
timed from the effects seen in external.db (a fifth anywhere in a batch, three tenths just
after an effect, half just after a commit), or aimed (``--aim``: the worker is started armed
and kills itself in its window, runtime/faults.py).
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import job
from .. import settings as settings_module
from ..job import demo_records
from ..runtime import effects, faults
from ..runtime.errors import JobError
from ..runtime.external import EXTERNAL_DB, ExternalService, verify
from ..runtime.owners import HOST_ID_ENV
from ..runtime.store import STATE_DB, is_postgresql
from ..runtime.strategy import Context
from .durability import PROBE_ENV, Probe
from .judge import INPUT_FILE, ORACLE_CLOCK_SHIFT_S, PROBE_DIR, judge, start_oracle

POLL_S = 0.002          # how often the drill samples progress (recovery time resolution)
PROGRESS_EVERY_S = 0.2  # --events progress lines
COMMIT_AIM_UNTIL = 0.9   # of the expected effects: later, a kill aimed at a commit lands at once
COMMIT_WAIT_MAX_S = 0.5  # a worker that applies or commits nothing meanwhile is killed anyway (_await_*)
#: --hosts N: simulated host k keeps its data directory in <drill dir>/host-k.
HOST_DIR = "host-"
EXTERNAL_DIR_ENV = settings_module.ENV_PREFIX + "EXTERNAL_DIR"
#: An aimed kill lands the N-th time the worker passes its window, N in 1..AIM_SPREAD
#: (drawn from --seed): not always the first pass after a restart.
AIM_SPREAD = 3
#: Report key for kills the drill aimed by timing (no --aim): their window is not known.
UNAIMED = "unaimed"


def fresh_data_dir(data_dir: Path | None) -> Path:
    if data_dir is None:
        # ./data/drill-<time>-<pid>: kept after the run, so `sqlite3 .../external.db` can check it.
        base = Path("data")
        try:
            base.mkdir(parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix=time.strftime("drill-%Y%m%d-%H%M%S-"), dir=base)).resolve()
        except OSError as exc:
            raise JobError(f"cannot create a drill directory under {base.resolve()}: {exc.strerror}; "
                           "pass --data-dir") from None
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise JobError(f"the drill needs a fresh --data-dir; {data_dir} is not an empty directory")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise JobError(f"cannot create --data-dir {data_dir}: {exc.strerror}") from None
    return data_dir.resolve()


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (the smallest value with at least q of the values at or below it)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return round(ordered[rank - 1], 1)


def check_hosts(ctx: Context, hosts: int, workers: int) -> None:
    """``--hosts N``: only a store every host reaches can be shared (PostgreSQL)."""
    if hosts == 1:
        return
    if getattr(ctx.strategy, "STATE_STORE", "database") == "files" or not is_postgresql(ctx.settings.database_url):
        raise JobError("--hosts needs PostgreSQL (DATABASE_URL=postgresql://...): separate hosts have separate "
                       "data directories and cannot share a SQLite file or checkpoint files")
    if workers < hosts:
        raise JobError(f"--hosts {hosts} needs --workers {hosts} or more (at least one worker per host)")


class Drill:
    def __init__(self, ctx: Context, *, records: int, kills: int, seed: int, sigterm: bool, work_ms: float,
                 workers: int, data_dir: Path | None, emit: Callable[[dict[str, Any]], None],
                 fail_rate: float | None = None, aims: list[str] | None = None, hosts: int = 1) -> None:
        if ctx.strategy is None:
            raise JobError("no strategy loaded")
        check_hosts(ctx, hosts, workers)
        self.hosts = hosts
        if workers > 1 and not ctx.strategy.MULTI_WORKER:
            raise JobError(f"the {ctx.strategy.NAME} variant runs one worker per data directory; use --workers 1")
        self.ctx, self.records, self.kills, self.seed = ctx, records, kills, seed
        self.sigterm, self.work_ms, self.workers = sigterm, work_ms, workers
        self.data_dir_arg, self.emit, self.fail_rate = data_dir, emit, fail_rate
        if aims is not None and len(aims) != kills:
            raise JobError("one window per kill")
        self.aims = aims
        self.rng = random.Random(seed)
        self.t0 = time.monotonic()

    def t(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def run(self) -> dict[str, Any]:
        data_dir = fresh_data_dir(self.data_dir_arg)
        # The drill's external service is its own, in its data directory, whatever the setting says.
        ctx = Context(data_dir=data_dir, settings=replace(self.ctx.settings, external_dir=str(data_dir)),
                      strategy=self.ctx.strategy)
        if self.hosts > 1:
            for host in range(1, self.hosts + 1):
                (data_dir / f"{HOST_DIR}{host}").mkdir()
        strategy = ctx.strategy
        records = demo_records(self.records)
        # submit writes the input the whole run depends on: its durability is watched too.
        with Probe(_probe_dir(data_dir), STATE_DB).watch():
            # A queue input (drill_submit, strategy.py) publishes the records for the workers instead.
            getattr(strategy, "drill_submit", strategy.submit)(ctx, records, work_ms=self.work_ms)
        # The oracle starts now and runs while the workers do: it costs the drill
        # (almost) no time. It reads the submitted input, never the strategy's state.
        (data_dir / INPUT_FILE).write_text(json.dumps(records), encoding="utf-8")
        oracles = [start_oracle(data_dir, "a", None, 0.0, self._env()),
                   start_oracle(data_dir, "b", self.seed, ORACLE_CLOCK_SHIFT_S, self._env())]
        # What must happen: the input x the steps job.py declares (never the strategy's say-so).
        expected = {(str(r["record_id"]), step) for r in records for step in job.STEPS}
        service = ExternalService(data_dir)  # create external.db so progress can be polled
        if self.fail_rate is not None:
            service.set_failure_rate(self.fail_rate)
        service.close()
        targets = sorted(self.rng.uniform(0.05, 0.9) * len(expected) for _ in range(self.kills))
        # Aimed kills: worker slot 0 is started armed for the next window of the plan and
        # kills itself there (faults.py); the others run unarmed.
        aims = self.aims or []
        passes = [self.rng.randint(1, AIM_SPREAD) for _ in aims]
        armed: str | None = aims[0] if aims else None
        kills_by_window: dict[str, int] = {}
        not_reached: list[str] = []
        self.emit({"event": "start", "strategy": strategy.NAME, "records": self.records, "kills": self.kills,
                   "signal": self.signal_name, "workers": self.workers, "data_dir": str(data_dir), "t": self.t(),
                   "aim": list(dict.fromkeys(aims)) or None})
        log = open(data_dir / "drill-workers.log", "ab")
        probe = sqlite3.connect(f"file:{data_dir / EXTERNAL_DB}?mode=ro", uri=True)
        started = time.monotonic()
        procs = [self._spawn(data_dir, log, arm=(armed, passes[0]) if armed and i == 0 else None, slot=i)
                 for i in range(self.workers)]
        recovery_ms: list[float] = []
        graceful: list[dict[str, Any]] = []
        failures: list[int] = []
        kills_done, kills_landed, pending, last_progress = 0, 0, None, 0.0
        try:
            while True:
                done = self._applied(probe)
                now = time.monotonic()
                alive = [i for i, p in enumerate(procs) if p.poll() is None]
                # The armed worker's state is read once, with the others' (``alive``): it may die
                # between two polls, and must never be taken for "every worker finished".
                if armed is not None and 0 not in alive:
                    if procs[0].returncode == -signal.SIGKILL:  # it died in its window: a delivered kill
                        kills_done += 1
                        kills_landed += 1
                        kills_by_window[armed] = kills_by_window.get(armed, 0) + 1
                        self.emit({"event": "kill", "n": kills_done, "signal": "SIGKILL", "window": armed,
                                   "done": done, "t": self.t()})
                        armed = aims[kills_done] if kills_done < len(aims) else None
                        procs[0] = self._spawn(data_dir, log,
                                               arm=(armed, passes[kills_done]) if armed is not None else None)
                        pending = (kills_done, self._applied(probe), time.monotonic())
                        self.emit({"event": "restart", "n": kills_done, "t": self.t()})
                        continue
                    # It exited without passing its window often enough: those kills never landed.
                    not_reached = aims[kills_done:]
                    kills_done = len(aims)
                    armed = None
                if pending is not None and (done > pending[1] or not alive):
                    ms = round((now - pending[2]) * 1000, 1)
                    recovery_ms.append(ms)
                    self.emit({"event": "recovered", "n": pending[0], "ms": ms, "t": self.t()})
                    pending = None
                if now - last_progress >= PROGRESS_EVERY_S:
                    last_progress = now
                    self.emit({"event": "progress", "done": done, "total": len(expected), "t": self.t()})
                if not alive:
                    break
                if not aims and pending is None and kills_done < self.kills and done >= targets[kills_done]:
                    # SIGKILL: a fifth of the kills land anywhere in a batch, three tenths just
                    # after an effect (the call got through, its record is not committed yet),
                    # half just after the worker committed (the narrowest windows need the most
                    # tries). SIGTERM lets the worker reach a safe point anyway, and aimed at a
                    # commit it could reach a worker already exiting (its last commit), which
                    # then dies by the default handler: mid-batch only.
                    aim = 0.0 if self.sigterm else self.rng.random()
                    if aim < 0.2:
                        time.sleep(self.rng.uniform(0, 0.01))  # land anywhere in a batch, not on a boundary
                    elif aim < 0.5:
                        self._await_effect(probe)  # land between a call and the commit that records it
                    else:
                        # land just after the worker committed, but not at the very end of the run
                        self._await_commit(probe, data_dir, give_up_at=int(COMMIT_AIM_UNTIL * len(expected)))
                    victim = alive[self.rng.randrange(len(alive))]
                    kills_done += 1
                    outcome = self._kill(procs[victim])
                    kills_landed += outcome.pop("landed")
                    if self.sigterm and "exit_code" in outcome:
                        graceful.append(outcome)
                    self.emit({"event": "kill", "n": kills_done, "signal": self.signal_name,
                               "done": self._applied(probe), "t": self.t(), **outcome})
                    procs[victim] = self._spawn(data_dir, log, slot=victim)
                    pending = (kills_done, self._applied(probe), time.monotonic())
                    self.emit({"event": "restart", "n": kills_done, "t": self.t()})
                    continue
                time.sleep(POLL_S)
            failures = [p.returncode for p in procs if p.returncode != 0]
        except BaseException:
            _stop(oracles)  # the drill itself was stopped: nobody will read the oracle
            raise
        finally:
            _stop(procs)
            probe.close()
            log.close()
        wall_s = time.monotonic() - started
        checked = verify(data_dir, expected)
        calls = effects.summary(data_dir, self.ctx.settings)  # the kind, its promise, the calls in doubt
        state = strategy.status(ctx)
        kills_for_rate = max(kills_done, 1)
        report = {
            "strategy": strategy.NAME,
            "records": self.records,
            "expected_effects": len(expected),
            "kills": kills_done,
            "kills_requested": self.kills,
            "signal": self.signal_name,
            "seed": self.seed,
            "workers": self.workers,
            "hosts": self.hosts,
            "work_ms": self.work_ms,
            "batch_size": self.ctx.settings.batch_size,
            "fail_rate": self.fail_rate,
            **checked,
            "effect_kind": calls["effect_kind"],
            "plain_policy": calls["plain_policy"],
            "promise": calls["promise"],
            "in_doubt": calls["in_doubt"],
            "in_doubt_ids": calls["in_doubt_ids"],
            "possible_duplicates": calls["possible_duplicates"],
            "redone_work_per_kill": round(max(0, checked["requests"] - len(expected)) / kills_for_rate, 1),
            "recovery_ms": {"p50": percentile(recovery_ms, 0.5), "p95": percentile(recovery_ms, 0.95),
                            "max": max(recovery_ms) if recovery_ms else None},
            "throughput": round(self.records / wall_s, 1) if wall_s > 0 else None,
            "wall_s": round(wall_s, 3),
            "graceful_exits": graceful,
            "worker_failures": failures,
            "incomplete_records": state["total"] - state["done"],
            "kills_landed": kills_landed,
            "aim": list(dict.fromkeys(aims)) or None,
            "kills_by_window": kills_by_window if aims else ({UNAIMED: kills_landed} if kills_landed else {}),
            "windows_not_reached": sorted(set(not_reached)),
            "data_dir": str(data_dir),
        }
        extras = getattr(strategy, "drill_report", None)  # a strategy's own figures (replayed batches skipped)
        if extras is not None:
            report.update(extras(ctx))
        report["failures"] = judge(ctx, self.ctx.settings, data_dir, report, expected, records, oracles, state)
        report["ok"] = report["failures"] == []
        self.emit({"event": "report", **report})
        return report

    @property
    def signal_name(self) -> str:
        return "SIGTERM" if self.sigterm else "SIGKILL"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop(faults.AIM_ENV, None)  # armed only where the drill says so (_spawn)
        src = str(Path(__file__).resolve().parents[2])  # src/: importable even when not installed
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env

    def _spawn(self, data_dir: Path, log: Any, arm: tuple[str, int] | None = None,
               slot: int = 0) -> subprocess.Popen[bytes]:
        env = self._env()
        env[EXTERNAL_DIR_ENV] = str(data_dir)  # every worker, on every simulated host, calls the same service
        work_dir = data_dir
        if self.hosts > 1:  # worker slot -> host: its own data directory and host id (owners.py)
            host = slot % self.hosts + 1
            work_dir = data_dir / f"{HOST_DIR}{host}"
            env[HOST_ID_ENV] = f"drill-host-{host}"
        env[PROBE_ENV] = str(_probe_dir(data_dir))  # the worker reports what it really runs with
        if arm is not None:  # die the N-th time it passes that window (faults.py)
            env[faults.AIM_ENV] = f"{arm[0]}:{arm[1]}"
        cmd = [sys.executable, "-m", settings_module.PACKAGE, "run", "--data-dir", str(work_dir)]
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)

    def _kill(self, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
        """Signal the worker; ``landed`` is 1 only if it was still running and the signal ended it."""
        if proc.poll() is not None:
            return {"landed": 0}  # it had already exited: this kill proves nothing
        if not self.sigterm:
            proc.send_signal(signal.SIGKILL)
            return {"landed": int(proc.wait() == -signal.SIGKILL)}
        grace = self.ctx.settings.grace_period_s
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=grace + 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        seconds = time.monotonic() - sent
        return {"exit_code": code, "exit_s": round(seconds, 3), "within_grace": seconds <= grace, "landed": 1}

    def _await_effect(self, probe: sqlite3.Connection) -> None:
        """Return as soon as a new effect is applied: the worker's call got through and
        its commit is (most likely) still to come, the window recovery lookups exist for."""
        deadline = time.monotonic() + COMMIT_WAIT_MAX_S
        last = self._applied(probe)
        while time.monotonic() < deadline and self._applied(probe) == last:
            time.sleep(POLL_S / 4)

    def _await_commit(self, probe: sqlite3.Connection, data_dir: Path, give_up_at: int) -> None:
        """Return as soon as the state store was written after the latest effect: the
        worker has just committed (a checkpoint, a transition, a position), and the
        kill lands inside its commit sequence.

        Kills that land only while calls are being made miss the commit windows, where
        the subtle bugs live (results committed after the offset, in a second
        transaction): half of the kills aim at those windows instead. The state
        store is watched through its files (state.db-wal, checkpoint files); with
        PostgreSQL there are none and the kill lands at once. Past ``give_up_at``
        effects it lands at once too: the next commit could be the run's last, after
        which the worker exits before the kill arrives."""
        deadline = time.monotonic() + COMMIT_WAIT_MAX_S
        last, base = self._applied(probe), _state_signature(data_dir)
        if base is None:
            return
        while time.monotonic() < deadline:
            time.sleep(POLL_S / 4)
            count, signature = self._applied(probe), _state_signature(data_dir)
            if count >= give_up_at:
                return
            if count != last:
                last, base = count, signature  # an effect: wait for the commit after it
            elif signature != base:
                return

    @staticmethod
    def _applied(probe: sqlite3.Connection) -> int:
        # Effects are only ever inserted, so MAX(rowid) is their count, in O(1).
        return int(probe.execute("SELECT COALESCE(MAX(rowid), 0) FROM effects").fetchone()[0])


def _state_signature(data_dir: Path) -> tuple[tuple[str, int, int], ...] | None:
    """Size and mtime of the state store's files (not external.db, not the drill's own):
    it changes when the worker commits. None when the state is not in files here."""
    found = []
    for entry in os.scandir(data_dir):
        if entry.name.startswith(("external.db", "drill-")) or not entry.is_file():
            continue
        try:
            st = entry.stat()
        except FileNotFoundError:  # a temp file renamed meanwhile: that is a commit too
            found.append((entry.name, -1, -1))
            continue
        found.append((entry.name, st.st_size, st.st_mtime_ns))
    return tuple(sorted(found)) or None


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def _probe_dir(data_dir: Path) -> Path:
    where = data_dir / PROBE_DIR
    where.mkdir(exist_ok=True)
    return where


