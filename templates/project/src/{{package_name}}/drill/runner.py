"""The crash drill: prove that the job survives kill -9 (or SIGTERM) at random moments.

1. Submit the standard demo workload into a fresh data directory.
2. Start the worker(s) as child processes: ``python -m <package> run``.
3. K times, at moments drawn from ``--seed`` and spread over the run, kill one
   worker (SIGKILL, or SIGTERM with ``--sigterm``) and start it again at once;
   recovery time = restart → first new effect at the external service.
4. When the work is finished, judge the run against an oracle that knows only
   the input and job.py (oracle.py, run twice in clean processes meanwhile):
   the effects in ``external.db`` (lost, applied twice, unexpected, payloads,
   judged by the promise of the external call's kind: effects.py, verdict.py),
   the results and running state the strategy stored, whether job.py is a pure
   function of its record, whether every kill landed, calls re-sent beyond the
   strategy's promise, worker failures, graceful exits, and the durability the
   workers were observed to run with (durability.py). Every failing check is a
   ``{"check", "message"}`` in ``failures`` (verdict.py); exit 0 only when there
   is none.

``--aim WINDOW`` (or ``all``) aims every kill at one of the strategy's critical
windows (its module's ``WINDOWS``; faults.py): instead of the drill signalling
the worker, the worker is started armed (``<PKG>_DRILL_AIM=WINDOW:N``) and kills
itself with SIGKILL the N-th time it passes that point, N drawn from ``--seed``.
``all`` cycles through the windows, one kill each in turn. The report's
``kills_by_window`` says where each kill landed; an armed worker that finishes
without reaching its window is a kill not delivered.

``--events`` prints one JSON object per line while running (start, progress,
kill, restart, recovered, report) for live views such as the advisor's TUI.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..runtime import effects, faults
from .. import job
from .. import settings as settings_module
from . import verdict
from .durability import PROBE_ENV, Probe, collect
from ..runtime.errors import JobError
from ..runtime.external import EXTERNAL_DB, ExternalService, a_redone_call, applied_effects, verify
from ..job import demo_records
from ..runtime.owners import HOST_ID_ENV
from ..runtime.store import STATE_DB, is_postgresql
from ..runtime.strategy import Context

POLL_S = 0.002          # how often the drill samples progress (recovery time resolution)
PROGRESS_EVERY_S = 0.2  # --events progress lines
COMMIT_AIM_UNTIL = 0.9   # of the expected effects: later, a kill aimed at a commit lands at once
COMMIT_WAIT_MAX_S = 0.5  # a worker that applies or commits nothing meanwhile is killed anyway (_await_*)
ORACLE_TIMEOUT_S = 120  # the oracle runs meanwhile; waiting longer means job.py hangs
#: The second oracle run's wall clock is moved this far (a day and a bit): a job that
#: reads the time, even rounded to the hour or the day, answers differently.
ORACLE_CLOCK_SHIFT_S = 90061.5
INPUT_FILE = "drill-input.json"
#: --hosts N: simulated host k keeps its data directory in <drill dir>/host-k.
HOST_DIR = "host-"
EXTERNAL_DIR_ENV = settings_module.ENV_PREFIX + "EXTERNAL_DIR"
PROBE_DIR = "drill-durability"
#: An aimed kill lands the N-th time the worker passes its window, N in 1..AIM_SPREAD
#: (drawn from --seed): not always the first pass after a restart.
AIM_SPREAD = 3
#: Report key for kills the drill aimed by timing (no --aim): their window is not known.
UNAIMED = "unaimed"


def windows_help(strategy: Any) -> str:
    """The strategy's critical windows, one per line, for ``drill --help`` (epilog)."""
    windows = faults.declared(strategy)
    if not windows:
        return "this strategy declares no critical windows (--aim is not available)"
    lines = [f"critical windows of the {getattr(strategy, 'NAME', '?')} strategy (--aim WINDOW, or --aim all):"]
    for name, proves in windows.items():
        lines += textwrap.wrap(f"{name}: {proves}", 100, initial_indent="  ", subsequent_indent="      ")
    return "\n".join(lines)


def aim_plan(strategy: Any, aim: str | None, kills: int, sigterm: bool = False) -> list[str] | None:
    """The window of each kill (None: kills are timed by the drill, not aimed).

    ``WINDOW``: every kill there; ``all``: the windows in turn (needs at least one kill
    per window). An unknown window is a JobError (exit 2) naming the valid ones."""
    if aim is None:
        return None
    windows = list(faults.declared(strategy))
    valid = ", ".join(windows + ["all"]) if windows else "none (this strategy declares no windows)"
    if sigterm:
        raise JobError("--aim kills with SIGKILL at a window; it cannot be combined with --sigterm")
    if aim != "all" and aim not in windows:
        raise JobError(f"unknown window {aim!r} for the {getattr(strategy, 'NAME', '?')} strategy; valid: {valid}")
    if not windows:
        raise JobError(f"--aim all: the {getattr(strategy, 'NAME', '?')} strategy declares no windows")
    if aim == "all":
        if kills < len(windows):
            raise JobError(f"--aim all needs --kills {len(windows)} or more (one per window: {valid[:-5]})")
        return [windows[n % len(windows)] for n in range(kills)]
    return [aim] * kills


def add_arguments(p: argparse.ArgumentParser, strategy: Any = None) -> None:
    from ..cli import fraction, non_negative_float, positive_int

    p.add_argument("--records", type=positive_int, default=2000, help="demo records (default 2000)")
    p.add_argument("--kills", type=int, default=10, help="how many times to kill the worker (default 10)")
    p.add_argument("--seed", type=int, default=1, help="seed for the kill moments (default 1)")
    p.add_argument("--sigterm", action="store_true", help="send SIGTERM instead of SIGKILL")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--events", action="store_true", help="print JSON events, one per line, while running")
    p.add_argument("--work-ms", type=non_negative_float, default=0.5, help="simulated work per record (ms)")
    p.add_argument("--workers", type=positive_int, default=1, help="worker processes at once (default 1)")
    p.add_argument("--hosts", type=positive_int, default=1,
                   help="spread the workers over this many simulated hosts: separate data directories, each "
                        "with its own host id, sharing DATABASE_URL and one external service (PostgreSQL only)")
    p.add_argument("--fail-rate", type=fraction, default=None, metavar="F",
                   help="the external service fails this fraction of calls transiently (retrying strategies)")
    names = list(faults.declared(strategy)) if strategy is not None else []
    p.add_argument("--aim", default=None, metavar="WINDOW|all",
                   help="aim every SIGKILL at this critical window of the strategy (the worker kills itself "
                        "exactly there), or cycle through all of them"
                        + (f"; windows: {', '.join(names)}" if names else ""))
    p.add_argument("--data-dir", type=Path, default=None,
                   help="fresh directory for the drill's data (default: a new ./data/drill-<time>-...)")


def check_hosts(ctx: Context, hosts: int, workers: int) -> None:
    """``--hosts N``: only a store every host reaches can be shared (PostgreSQL)."""
    if hosts == 1:
        return
    if getattr(ctx.strategy, "STATE_STORE", "database") == "files" or not is_postgresql(ctx.settings.database_url):
        raise JobError("--hosts needs PostgreSQL (DATABASE_URL=postgresql://...): separate hosts have separate "
                       "data directories and cannot share a SQLite file or checkpoint files")
    if workers < hosts:
        raise JobError(f"--hosts {hosts} needs --workers {hosts} or more (at least one worker per host)")


def _stop_on_sigterm() -> None:
    """A SIGTERM to the drill unwinds it (SystemExit), so its `finally` stops the workers."""
    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    try:
        signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (embedded use): leave signals alone
        pass


def run_drill(args: argparse.Namespace, ctx: Context) -> int:
    if args.kills < 0:
        raise JobError("--kills must be zero or more")
    aims = aim_plan(ctx.strategy, getattr(args, "aim", None), args.kills, args.sigterm)
    _stop_on_sigterm()
    emit = _printer() if args.events else (lambda event: None)
    report = Drill(ctx, records=args.records, kills=args.kills, seed=args.seed, sigterm=args.sigterm,
                   work_ms=args.work_ms, workers=args.workers, data_dir=args.data_dir, emit=emit,
                   fail_rate=args.fail_rate, aims=aims, hosts=getattr(args, "hosts", 1)).run()
    if args.events:
        pass  # the report was the last event
    elif args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(summary(report))
    return 0 if report["ok"] else 1


def _printer() -> Callable[[dict[str, Any]], None]:
    def emit(event: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(event, sort_keys=True) + "\n")
        sys.stdout.flush()
    return emit


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
        oracles = [self._start_oracle(data_dir, "a", None, 0.0),
                   self._start_oracle(data_dir, "b", self.seed, ORACLE_CLOCK_SHIFT_S)]
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
        report["failures"] = self._judge(ctx, data_dir, report, expected, records, oracles, state)
        report["ok"] = report["failures"] == []
        self.emit({"event": "report", **report})
        return report

    # ---- the oracle and the verdict
    def _start_oracle(self, data_dir: Path, name: str, shuffle_seed: int | None,
                      clock_shift_s: float) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-m", f"{settings_module.PACKAGE}.drill.oracle", "--input", str(data_dir / INPUT_FILE),
               "--output", str(data_dir / f"drill-oracle-{name}.json")]
        if shuffle_seed is not None:
            cmd += ["--shuffle-seed", str(shuffle_seed)]
        if clock_shift_s:
            cmd += ["--clock-shift-s", str(clock_shift_s)]
        env = self._env()
        env.pop(PROBE_ENV, None)
        with open(data_dir / f"drill-oracle-{name}.log", "wb") as err:
            return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env)

    def _oracle_result(self, data_dir: Path, proc: subprocess.Popen[bytes], name: str) -> dict[str, Any]:
        try:
            code = proc.wait(timeout=ORACLE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise _OracleFailed(f"the oracle took longer than {ORACLE_TIMEOUT_S} s (does process_record hang?)")
        if code != 0:
            lines = (data_dir / f"drill-oracle-{name}.log").read_text(errors="replace").strip().splitlines()
            raise _OracleFailed(f"the oracle exited with code {code}: {lines[-1] if lines else 'no output'}")
        result: dict[str, Any] = json.loads((data_dir / f"drill-oracle-{name}.json").read_text(encoding="utf-8"))
        return result

    def _judge(self, ctx: Context, data_dir: Path, report: dict[str, Any], expected: set[tuple[str, str]],
               records: list[dict[str, Any]], oracles: list[subprocess.Popen[bytes]],
               state: dict[str, Any]) -> list[verdict.Failure]:
        strategy = ctx.strategy
        applied = applied_effects(data_dir)
        failures: list[verdict.Failure] = []
        try:
            a, b = (self._oracle_result(data_dir, proc, name) for proc, name in zip(oracles, "ab"))
        except _OracleFailed as exc:
            a = None
            failures.append(verdict.failure("results", f"{exc}; results could not be checked"))
        policy = report["plain_policy"] or ""
        failures += verdict.check_effects(applied, expected, a, policy=policy,
                                          in_doubt=set(effects.in_doubt_calls(data_dir, self.ctx.settings)),
                                          resent=report["possible_duplicates"])
        if a is not None:
            a["records_in_order"] = [str(r["record_id"]) for r in records]
            unstable = verdict.unstable_records(a, b)
            skip = set(unstable)
            failures += verdict.check_determinism(a, b, unstable)
            stored = _read_back(strategy.stored_results, ctx, "results", failures)
            if stored is not _UNREADABLE:
                failures += verdict.check_results(stored, a, skip)
            states = _read_back(strategy.stored_final_states, ctx, "final_state", failures)
            if states is not _UNREADABLE:
                failures += verdict.check_final_states(states, a, skip, job.fold)
            failures += verdict.check_payloads(applied, a, skip)
            report["oracle"] = {
                "records": len(a["records"]), "expected_effects": len(expected), "steps": a["steps"],
                "computed_by": "job.process_record in two clean processes (input order; shuffled with the clock "
                               "moved), with a recording effect: no external call",
                "unstable_records": len(unstable),
                "errors": sum("error" in r for r in a["records"].values()),
            }
        else:
            report["oracle"] = {"records": len(records), "expected_effects": len(expected), "steps": list(job.STEPS),
                                "computed_by": "the oracle failed; see the results failure"}
        failed_task = next((t for t in state.get("tasks", []) if t.get("error")), None)
        # A store outage a worker rode out restarts its unit in flight like a kill: same allowance.
        report["store_outages_ridden"] = collect(data_dir / PROBE_DIR)["outages"]
        failures += verdict.check_run(report, promise=strategy.REDONE_CALLS_PER_KILL,
                                      redone_example=a_redone_call(data_dir) if report["redone_calls"] else None,
                                      failed_task=failed_task, log_path=str(data_dir / "drill-workers.log"),
                                      resent=report["possible_duplicates"] if policy == "at-least-once" else None)
        report["durability"] = self._durability(ctx, data_dir)
        failures += verdict.check_durability(report["durability"])
        return failures

    def _durability(self, ctx: Context, data_dir: Path) -> dict[str, Any]:
        """What the workers were observed to run with (their probes' reports, durability.py)."""
        seen = collect(data_dir / PROBE_DIR)
        if getattr(ctx.strategy, "STATE_STORE", "database") == "files":
            return {"state_store": "files", "processes": seen["processes"], **seen["files"],
                    "violations": seen["violations"]}
        if ctx.settings.database_url.startswith(("postgresql://", "postgres://")):
            return {"state_store": "postgresql", "processes": seen["processes"], "settings": seen["postgresql"]}
        return {"state_store": "sqlite", "processes": seen["processes"], "settings": seen["sqlite"]}

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


_UNREADABLE = object()


def _read_back(read: Callable[[Context], Any], ctx: Context, check: str, failures: list[verdict.Failure]) -> Any:
    """What the strategy stored; a store it cannot read back is that check's failure, not a crash."""
    try:
        return read(ctx)
    except Exception as exc:  # a broken store is exactly what a drill is for
        failures.append(verdict.failure(check, f"what the run stored cannot be read back: "
                                               f"{type(exc).__name__}: {exc}"))
        return _UNREADABLE


class _OracleFailed(Exception):
    """The oracle could not say what the run should have produced."""


def summary(report: dict[str, Any]) -> str:
    rec = report["recovery_ms"]
    return "\n".join([
        f"drill: {report['strategy']}, {report['records']} records, {report['kills_landed']} of "
        f"{report['kills_requested']} x {report['signal']} landed, {report['workers']} worker(s)"
        + (f" on {report['hosts']} hosts" if report.get("hosts", 1) > 1 else ""),
        f"lost {report['lost']}, duplicate effects {report['duplicate_effects']}, "
        f"redone calls {report['redone_calls']}, lookups {report['lookups']}, "
        f"incomplete {report['incomplete_records']}",
        f"recovery ms p50 {rec['p50']} p95 {rec['p95']} max {rec['max']}; "
        f"{report['throughput']} records/s; {report['wall_s']} s",
        f"external calls: {report['effect_kind']}"
        + (f", {report['plain_policy']}" if report.get("plain_policy") else "")
        + f": {report['in_doubt']} in doubt" + (f" ({', '.join(report['in_doubt_ids'][:3])}"
                                                + (", ..." if len(report["in_doubt_ids"]) > 3 else "") + ")"
                                                if report["in_doubt_ids"] else ""),
        f"durability: {_durability_line(report['durability'])}",
        *([f"queue: {report['messages']} messages, redelivered {report['redelivered']}, deduped "
           f"{report['deduped']}, rejected {report['rejected']}, left in the queue {report['queue_left']}"]
          if "redelivered" in report else []),
        *([f"kills by window: " + ", ".join(f"{w} {n}" for w, n in report["kills_by_window"].items())]
          if report.get("aim") else []),
        f"data: {report['data_dir']}",
        *verdict.summary_line(report["failures"], report),
    ])


def _durability_line(d: dict[str, Any]) -> str:
    if d["state_store"] == "files":
        return (f"files: {d['file_fsyncs']} file fsyncs, {d['dir_fsyncs']} directory fsyncs, "
                f"{d['renames']} renames, {len(d['violations'])} violation(s)")
    settings = "; ".join(", ".join(f"{k} {v}" for k, v in sorted(s.items())) for s in d["settings"]) or "none seen"
    return f"{d['state_store']}: {settings}"
