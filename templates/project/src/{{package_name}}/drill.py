"""The crash drill: prove that the job survives kill -9 (or SIGTERM) at random moments.

1. Submit the standard demo workload into a fresh data directory.
2. Start the worker(s) as child processes: ``python -m <package> run``.
3. K times, at moments drawn from ``--seed`` and spread over the run, kill one
   worker (SIGKILL, or SIGTERM with ``--sigterm``) and start it again at once;
   recovery time = restart → first new effect at the external service.
4. When the work is finished, verify ``external.db`` against the input:
   lost = expected (record, step) with no effect, duplicate_effects = a
   (record, step) applied twice. Exit 0 only when both are 0.

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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import settings as settings_module
from .errors import JobError
from .external import EXTERNAL_DB, ExternalService, verify
from .job import demo_records
from .strategy import Context

POLL_S = 0.002          # how often the drill samples progress (recovery time resolution)
PROGRESS_EVERY_S = 0.2  # --events progress lines


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .cli import fraction, non_negative_float, positive_int

    p.add_argument("--records", type=positive_int, default=2000, help="demo records (default 2000)")
    p.add_argument("--kills", type=int, default=10, help="how many times to kill the worker (default 10)")
    p.add_argument("--seed", type=int, default=1, help="seed for the kill moments (default 1)")
    p.add_argument("--sigterm", action="store_true", help="send SIGTERM instead of SIGKILL")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--events", action="store_true", help="print JSON events, one per line, while running")
    p.add_argument("--work-ms", type=non_negative_float, default=0.5, help="simulated work per record (ms)")
    p.add_argument("--workers", type=positive_int, default=1, help="worker processes at once (default 1)")
    p.add_argument("--fail-rate", type=fraction, default=None, metavar="F",
                   help="the external service fails this fraction of calls transiently (retrying strategies)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="fresh directory for the drill's data (default: a new ./data/drill-<time>-...)")


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
    _stop_on_sigterm()
    emit = _printer() if args.events else (lambda event: None)
    report = Drill(ctx, records=args.records, kills=args.kills, seed=args.seed, sigterm=args.sigterm,
                   work_ms=args.work_ms, workers=args.workers, data_dir=args.data_dir, emit=emit,
                   fail_rate=args.fail_rate).run()
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
                 fail_rate: float | None = None) -> None:
        if ctx.strategy is None:
            raise JobError("no strategy loaded")
        if workers > 1 and not ctx.strategy.MULTI_WORKER:
            raise JobError(f"the {ctx.strategy.NAME} variant runs one worker per data directory; use --workers 1")
        self.ctx, self.records, self.kills, self.seed = ctx, records, kills, seed
        self.sigterm, self.work_ms, self.workers = sigterm, work_ms, workers
        self.data_dir_arg, self.emit, self.fail_rate = data_dir, emit, fail_rate
        self.rng = random.Random(seed)
        self.t0 = time.monotonic()

    def t(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def run(self) -> dict[str, Any]:
        data_dir = fresh_data_dir(self.data_dir_arg)
        ctx = Context(data_dir=data_dir, settings=self.ctx.settings, strategy=self.ctx.strategy)
        strategy = ctx.strategy
        records = demo_records(self.records)
        strategy.submit(ctx, records, work_ms=self.work_ms)
        expected = set(strategy.expected_effects(records))
        service = ExternalService(data_dir)  # create external.db so progress can be polled
        if self.fail_rate is not None:
            service.set_failure_rate(self.fail_rate)
        service.close()
        targets = sorted(self.rng.uniform(0.05, 0.9) * len(expected) for _ in range(self.kills))
        self.emit({"event": "start", "strategy": strategy.NAME, "records": self.records, "kills": self.kills,
                   "signal": self.signal_name, "workers": self.workers, "data_dir": str(data_dir), "t": self.t()})
        log = open(data_dir / "drill-workers.log", "ab")
        probe = sqlite3.connect(f"file:{data_dir / EXTERNAL_DB}?mode=ro", uri=True)
        started = time.monotonic()
        procs = [self._spawn(data_dir, log) for _ in range(self.workers)]
        recovery_ms: list[float] = []
        graceful: list[dict[str, Any]] = []
        failures: list[int] = []
        kills_done, pending, last_progress = 0, None, 0.0
        try:
            while True:
                done = self._applied(probe)
                now = time.monotonic()
                alive = [i for i, p in enumerate(procs) if p.poll() is None]
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
                if pending is None and kills_done < self.kills and done >= targets[kills_done]:
                    time.sleep(self.rng.uniform(0, 0.01))  # land anywhere in a batch, not on a boundary
                    victim = alive[self.rng.randrange(len(alive))]
                    kills_done += 1
                    outcome = self._kill(procs[victim])
                    if self.sigterm:
                        graceful.append(outcome)
                    self.emit({"event": "kill", "n": kills_done, "signal": self.signal_name,
                               "done": self._applied(probe), "t": self.t(), **outcome})
                    procs[victim] = self._spawn(data_dir, log)
                    pending = (kills_done, self._applied(probe), time.monotonic())
                    self.emit({"event": "restart", "n": kills_done, "t": self.t()})
                    continue
                time.sleep(POLL_S)
            failures = [p.returncode for p in procs if p.returncode != 0]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            probe.close()
            log.close()
        wall_s = time.monotonic() - started
        checked = verify(data_dir, expected)
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
            "work_ms": self.work_ms,
            "batch_size": self.ctx.settings.batch_size,
            "fail_rate": self.fail_rate,
            **checked,
            "redone_work_per_kill": round(max(0, checked["requests"] - len(expected)) / kills_for_rate, 1),
            "recovery_ms": {"p50": percentile(recovery_ms, 0.5), "p95": percentile(recovery_ms, 0.95),
                            "max": max(recovery_ms) if recovery_ms else None},
            "throughput": round(self.records / wall_s, 1) if wall_s > 0 else None,
            "wall_s": round(wall_s, 3),
            "graceful_exits": graceful,
            "worker_failures": failures,
            "incomplete_records": state["total"] - state["done"],
            "data_dir": str(data_dir),
        }
        report["ok"] = (report["lost"] == 0 and report["duplicate_effects"] == 0
                        and report["unexpected_effects"] == 0 and not failures
                        and all(g["exit_code"] == 0 and g["within_grace"] for g in graceful))
        self.emit({"event": "report", **report})
        return report

    @property
    def signal_name(self) -> str:
        return "SIGTERM" if self.sigterm else "SIGKILL"

    def _spawn(self, data_dir: Path, log: Any) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parent.parent)  # importable even when not installed
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [sys.executable, "-m", settings_module.PACKAGE, "run", "--data-dir", str(data_dir)]
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)

    def _kill(self, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
        if not self.sigterm:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return {}
        grace = self.ctx.settings.grace_period_s
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=grace + 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        seconds = time.monotonic() - sent
        return {"exit_code": code, "exit_s": round(seconds, 3), "within_grace": seconds <= grace}

    @staticmethod
    def _applied(probe: sqlite3.Connection) -> int:
        # Effects are only ever inserted, so MAX(rowid) is their count, in O(1).
        return int(probe.execute("SELECT COALESCE(MAX(rowid), 0) FROM effects").fetchone()[0])


def summary(report: dict[str, Any]) -> str:
    rec = report["recovery_ms"]
    verdict = "OK: nothing lost, nothing applied twice" if report["ok"] else "FAILED"
    return "\n".join([
        f"drill: {report['strategy']}, {report['records']} records, {report['kills']} x {report['signal']}, "
        f"{report['workers']} worker(s)",
        f"lost {report['lost']}, duplicate effects {report['duplicate_effects']}, "
        f"redone calls {report['redone_calls']}, lookups {report['lookups']}",
        f"recovery ms p50 {rec['p50']} p95 {rec['p95']} max {rec['max']}; "
        f"{report['throughput']} records/s; {report['wall_s']} s",
        f"data: {report['data_dir']}",
        verdict,
    ])
