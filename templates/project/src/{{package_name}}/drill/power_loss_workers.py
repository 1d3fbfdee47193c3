"""``drill --power-loss --workers N``: the power goes out under every worker at once, as it does on a machine.

The one-worker drill cuts at persistence points, which are counted per process (faults.py): with
several workers there is no single "N-th commit" to aim at. Here each cut comes at a seeded moment
(after a drawn number of effects since the workers started, within a batch or two per worker), and
kills every worker that is still running with SIGKILL before LazyFS drops what was not fsynced, as a
power cut does to a whole machine. Then N fresh workers start on what survived: the units the dead
ones held are taken over (their owner is gone), and nothing the store reported committed may be
missing. After the last cut N workers run to the end, and one more cut follows (done stays done).

It mixes into either store's run (power_loss.py's files on LazyFS, power_loss_pg.py's server).
"""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

from .. import job
from .durability import IN_COMMIT, committing
from .power_loss import RANDOM_POINT, PowerLossRun
from .progress import POLL_S
from .segments import _applied
from .sweep_plan import SweepPlan, Target


class MachineCutPlan(SweepPlan):
    """``cuts`` cuts at seeded moments, nothing aimed at a point: the next after ``n`` effects."""

    def __init__(self, cuts: int, seed: int, workers: int) -> None:
        super().__init__(prefix=0, sample=0, seed=seed)
        self.cuts, self.workers = cuts, workers
        self.killed: list[int] = []  # the workers each cut killed

    def coverage(self) -> dict[str, Any]:
        """A kill is a worker's (what the verdict allows per kill is per worker): every worker a cut killed."""
        found = super().coverage()
        found["crashes"] = sum(self.killed)
        found["random_crashes"] = len(self.killed)
        return found

    def next(self, remaining_effects: int, effects_per_batch: int) -> Target | None:
        drawn = len(self.targets)
        if drawn >= self.cuts or remaining_effects <= 0:
            return None
        # Within a batch or two of every worker, and leaving work for the cuts still to come.
        span = min(2 * effects_per_batch * self.workers, remaining_effects // (self.cuts - drawn + 1))
        target = Target("", self.rng.randint(1, max(1, span)), "random")
        self.targets.append(target)
        return target


class ManyWorkersCuts:
    """Mixed in before a PowerLossRun: its segments run ``workers`` workers, and a cut kills them all."""

    workers = 2

    def _segments(self: Any, data_dir: Path, log: Any, probe: sqlite3.Connection, expected: int) -> None:
        per_batch = self.ctx.settings.batch_size * len(job.STEPS)
        self.running = []
        try:
            while True:
                target = self.plan.next(expected - _applied(probe), per_batch)
                self.running = [PowerLossRun._spawn(self, data_dir, log, None) for _ in range(self.workers)]
                spawned, at_start = time.monotonic(), _applied(probe)
                recovering = bool(self.plan.killed)
                while any(p.poll() is None for p in self.running) and (
                        target is None or _applied(probe) < at_start + target.n):
                    if recovering and _applied(probe) > at_start:  # restart -> the first new effect
                        self.recovery_ms.append(round((time.monotonic() - spawned) * 1000, 1))
                        recovering = False
                    time.sleep(POLL_S)
                alive = [p for p in self.running if p.poll() is None]
                for proc in alive:  # the machine loses power: every worker at once
                    proc.send_signal(signal.SIGKILL)
                codes = [p.wait() for p in self.running]
                if target is not None:
                    target.effects_done = _applied(probe)
                if target is not None and alive:
                    target.outcome, target.landed = "killed", RANDOM_POINT
                    self.plan.killed.append(len(alive))
                    self.after_worker(target, -signal.SIGKILL)
                    self.emit({"event": "kill", "n": len(self.plan.targets), "signal": "SIGKILL", "point": RANDOM_POINT,
                               "workers": len(alive), "phase": "random", "done": _applied(probe), "t": self.t()})
                    self.emit({"event": "restart", "n": len(self.plan.targets), "t": self.t()})
                    continue
                if target is not None:
                    target.outcome = "run ended first"
                failed = [code for code in codes if code != 0]
                self.failures += failed
                self.after_worker(None, failed[0] if failed else 0)
                return
        except BaseException:  # the drill itself was stopped: its workers with it
            for proc in self.running:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            raise

    def dead_workers(self: Any) -> list[Any]:
        return list(self.running)

    def in_commit_markers(self: Any) -> bool:
        """Any worker of the last cut killed inside a COMMIT (durability.py's marker for its pid)."""
        if self.in_commit is None:
            return False
        return any(committing(self.in_commit.parent / f"{proc.pid}{IN_COMMIT}") for proc in self.running)

    def more_failures(self: Any, report: dict[str, Any]) -> list[dict[str, str]]:
        report["workers"] = self.workers
        failures: list[dict[str, str]] = super().more_failures(report)  # type: ignore[misc]
        report["power_loss"]["workers"] = self.workers
        return failures


def with_workers(run: type[PowerLossRun], workers: int) -> type[PowerLossRun]:
    """``run`` with every cut under ``workers`` workers at once."""
    return type(f"{run.__name__}Workers", (ManyWorkersCuts, run), {"workers": workers})
