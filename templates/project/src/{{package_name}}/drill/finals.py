"""What the drill does once every worker ended (the schedule's final events, fault_kinds.FINAL_KINDS):
a person answers the calls in doubt (reconcile, reconciler.py), an operator rebuilds the projection
(rebuild, rebuilder.py), the job meets two store outages with a short limit (second-outage,
second_outage.py), and a store an older release left is continued by this code (upgrade,
upgrade.py). Mixed into runner.Drill, whose state it reads (set in Drill.run).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..runtime.strategy import Context
from .history import History
from .progress import Progress
from ..runtime.store import STATE_DB
from . import hung_worker, second_outage, store_away
from .rebuilder import KILLED_AT, rebuild
from .reconciler import Operator
from .tally import Tally
from .upgrade import continue_fixture
from .workers import Pool


class Finals:
    """Mixed into runner.Drill."""

    ctx: Context  # the project's
    drill_ctx: Context  # the drill's own (its data directory, its service)
    schedule: Any
    pool: Pool
    history: History
    progress: Progress
    tally: Tally
    emit: Callable[[dict[str, Any]], None]
    t: Callable[[], float]
    records: list[dict[str, Any]]
    operator: list[dict[str, Any]]
    add_work: Callable[..., list[dict[str, Any]] | None]
    nemesis: Any  # its spells: the outages, as the malformed-input thread sees them
    _start_every_slot: Callable[..., None]
    _loop: Callable[[], None]
    _undone: Callable[[], int]

    def _finals(self, final: list[dict[str, Any]]) -> None:
        self.operator = [self._operator(event) for event in final if event["kind"] == "reconcile"]
        for event in final:
            if event["kind"] == "rebuild":
                self._rebuild(event)
            elif event["kind"] == "second-outage":
                self._second_outage(event)
            elif event["kind"] == "hung-worker":
                self._hung_worker(event)
            elif event["kind"] == "upgrade":
                self._upgrade(event)

    def _operator(self, event: dict[str, Any]) -> dict[str, Any]:
        """Every worker ended: a person answers the calls in doubt, and the job runs again (reconciler.py)."""
        outcome = Operator(self.drill_ctx.data_dir, self.pool, self.history).play(
            event, self.progress.applied(), self.progress.calls())
        self.tally.injected(event, outcome, self.emit, self.t, self.progress.applied())
        return outcome

    def _rebuild(self, event: dict[str, Any]) -> None:
        """Every worker ended: an operator rebuilds the projection (rebuilder.py), new input arrives,
        and the job runs once more (checks/rebuild.py); then, at each of KILLED_AT, a rebuild killed
        mid-way, new input and the job's run on what it left, and a whole rebuild that compares."""
        self._rebuild_once(event, None, then_run=True, first=True)
        for point in KILLED_AT:
            self._rebuild_once(event, point, then_run=True)
            self._rebuild_once(event, None, then_run=False)

    def _rebuild_once(self, event: dict[str, Any], killed_at: int | None, *, then_run: bool,
                      first: bool = False) -> None:
        done = self.progress.applied()
        outcome = rebuild(self.drill_ctx, self.progress, killed_at)
        ran = outcome["code"] == 0 or (killed_at is not None and outcome["code"] == -9)
        label = f"after-rebuild-{event['n']}-{len(self.records)}"
        added = self.add_work(event["count"], label) if then_run and ran else None
        self.history.add("fault", event=event["n"], kind="rebuild", done=done, records=len(added or []), **outcome)
        if first:  # one fault of the schedule, however many rebuilds it runs
            self.tally.injected(event, outcome, self.emit, self.t, done)
        if added:
            self._start_every_slot(self.progress.applied())
            self._loop()

    def _upgrade(self, event: dict[str, Any]) -> None:
        """Every worker ended: the store an older release left mid-run, continued by this code with
        crashes in a directory of its own (upgrade.py); its findings are the ``upgrade`` check's."""
        done = self.progress.applied()
        outcome = continue_fixture(self.ctx, int(event["from"]), self.drill_ctx.data_dir / "upgrade",
                                   seed=self.schedule.seed, work_ms=self.schedule.work_ms)
        self.history.add("fault", event=event["n"], kind="upgrade", done=done, **outcome)
        self.tally.injected(event, outcome, self.emit, self.t, done)

    def _second_outage(self, event: dict[str, Any]) -> None:
        """Every worker ended: one worker with a short store_outage_s meets two outages, each within it, the
        second more than that after the first (second_outage.py); then the job finishes what is left."""
        done, label, ctx = self.progress.applied(), f"second-outage-{event['n']}", self.drill_ctx
        if self._left_undone(event, done):
            return
        try:
            done_before = int(ctx.strategy.status(ctx)["done"])
        except Exception:  # a store the run left unreadable: the verdict says so (store_corrupt), nothing runs on it
            return
        if not self._add_soon(2 * second_outage.BATCH, label):
            return
        self.pool.home(0)
        proc = self.pool.spawn(0, None, done=done, env_extra=second_outage.ENV)
        outcome = second_outage.Run(
            proc, self.pool.probe_report, lambda: ctx.strategy.status(ctx),
            lambda: store_away.take(ctx.settings.database_url, Path(ctx.data_dir) / STATE_DB, self.nemesis.spells),
            self.add_work, label, added=2 * second_outage.BATCH, done_before=done_before).play()
        self.pool.exited()  # its exit is this fault's finding (checks/second_outage.py), not a worker failure
        self.history.add("fault", event=event["n"], kind="second-outage", done=done, **outcome)
        self.tally.injected(event, outcome, self.emit, self.t, done)
        self._finish_what_is_left(outcome["code"] != 0)  # all of it, if it gave up at once (a queue's too)

    def _hung_worker(self, event: dict[str, Any]) -> None:
        """Every worker ended: the job once more with a short lease, its worker hung while it holds a unit,
        another started once the lease ran out, then the hung one killed (hung_worker.py); then the job
        finishes what is left."""
        done, ctx = self.progress.applied(), self.drill_ctx
        if self._left_undone(event, done) or not self._add_soon(hung_worker.RECORDS, f"hung-worker-{event['n']}",
                                                                 hung_worker.WORK_MS):
            return
        while len(self.pool.procs) < 2:  # the hung one's and its taker's
            self.pool.add_slot()
        for slot in (0, 1):
            self.pool.home(slot)  # one host: the hung pid is alive there, and only the lease may free its unit
        hung = self.pool.spawn(0, None, done=done, env_extra=hung_worker.ENV)

        def taker() -> Any:
            self.history.add("hung", slot=0, pid=hung.pid, done=self.progress.applied())
            return self.pool.spawn(1, None, done=self.progress.applied(), env_extra=hung_worker.ENV)

        outcome = hung_worker.Hang(ctx, lambda: ctx.strategy.held_claims(ctx), store_away.WORKER_APP).play(hung, taker)
        if outcome["frozen"]:
            self.pool.sigkill(0, event, self.progress.applied())  # a liveness probe ends the hung process
        self.history.add("fault", event=event["n"], kind="hung-worker", done=done, **outcome)
        self.tally.injected(event, outcome, self.emit, self.t, done)
        self._loop()  # the taker's run (or the unhung worker's) to its end
        self._finish_what_is_left()

    def _finish_what_is_left(self, ended_early: bool = False) -> None:
        """The job's next run, as its user would start it, if the fault's runs left work undone (or ended
        early: a queue's messages not taken yet are not in the store)."""
        if ended_early or self._undone():
            self._start_every_slot(self.progress.applied())
            self._loop()

    def _left_undone(self, event: dict[str, Any], done: int) -> bool:
        """Did the run leave work undone? Then a fault that runs the job again would finish it and hide
        the ``incomplete`` finding: it is left out, and the history says why."""
        undone = self._undone()
        if undone:
            self.history.add("fault", event=event["n"], kind=event["kind"], done=done, skipped=True, undone=undone)
        return bool(undone)

    def _add_soon(self, count: int, label: str, work_ms: float = second_outage.WORK_MS) -> bool:
        """``count`` new records (``work_ms`` each), once the broker takes them (a queue input)."""
        deadline = time.monotonic() + second_outage.DEADLINE_S
        while self.add_work(count, label, work_ms) is None:
            if time.monotonic() > deadline:
                return False
            time.sleep(second_outage.POLL_S)
        return True
