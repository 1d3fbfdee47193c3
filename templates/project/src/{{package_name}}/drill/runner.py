"""The drill's run: submit, start the workers, play the fault schedule, measure, judge.

command.py says what the drill proves; schedule.py draws the faults; nemesis.py injects
the timed ones and workers.py arms the others; every op goes to the history (history.py),
and judge.py checks the run this module makes. The run sizes itself: every worker slot is
armed, a kill that finds its worker gone is tried again at the next moment, and when the
work runs out before every planned event landed, more work is submitted (up to
MAX_EXTENSIONS times): ``kills_not_delivered`` is then left only for plans no run can
satisfy (a window the code never passes, far more kills than work). Work the drill resubmits
as the last workers leave is done by one more run, as the user's next run would do it.
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import job
from ..job import demo_records
from ..runtime import effects, submission
from ..runtime.errors import JobError, TransientError
from ..runtime.external import ExternalService, verify
from ..runtime.store import STATE_DB
from ..runtime.strategy import Context
from . import schedule as schedule_module
from .claims_watch import ClaimsWatch
from .crashed_submit import crash_a_submit
from .durability import Probe
from .history import History
from .judge import PROBE_DIR, judge, start_oracles, stop_oracles
from .nemesis import KILLS, Nemesis
from .preflight import check_hosts, fresh_data_dir, refuse_a_held_workload
from .finals import Finals
from .progress import POLL_S, Progress
from .report_data import aimed_windows, build_report, signal_name
from .stall import Stall
from .stall import message as stall_message
from .tally import Tally
from .verdict import failure
from .workers import HOST_DIR, Pool, worker_env

PROGRESS_EVERY_S = 0.2  # --events progress lines
#: At most this many rounds of extra work to land the planned events, each adding half the input.
MAX_EXTENSIONS = 3
#: At most this many extra runs for work the drill queued after the workers' last look (_rerun).
MAX_RERUNS = 2
#: host-lost: the job is started again this long after the lease ran out (heartbeats are written
#: at most at the kill; the clocks of the drill and the store's rows are the same machine's).
LEASE_MARGIN_S = 0.5
#: How long the drill waits for a queue's broker to take the extra work it adds (the drill may restart it).
BROKER_AWAY_S = 120.0
#: The correlation id of the drill's input, when the schedule resubmits part of it under the same id.
INPUT_ID = "drill-input"
SCHEDULE_FILE = "drill-schedule.json"


class Drill(Finals):
    def __init__(self, ctx: Context, schedule: schedule_module.Schedule, *, data_dir: Path | None,
                 emit: Callable[[dict[str, Any]], None]) -> None:
        if ctx.strategy is None:
            raise JobError("no strategy loaded")
        check_hosts(ctx, schedule.hosts, schedule.workers)
        if schedule.workers > 1 and not ctx.strategy.MULTI_WORKER:
            raise JobError(f"the {ctx.strategy.NAME} variant runs one worker per data directory; use --workers 1")
        self.ctx, self.schedule, self.data_dir_arg, self.emit = ctx, schedule, data_dir, emit
        self.t0 = time.monotonic()

    def t(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    # ----------------------------------------------------------------- the run
    def run(self) -> dict[str, Any]:
        plan = self.schedule
        data_dir = fresh_data_dir(self.data_dir_arg)
        # The drill's external service is its own, in its data directory, whatever the setting says.
        ctx = Context(data_dir=data_dir, settings=replace(self.ctx.settings, external_dir=str(data_dir)),
                      strategy=self.ctx.strategy)
        self.drill_ctx = ctx
        for host in range(1, plan.hosts + 1 if plan.hosts > 1 else 1):
            (data_dir / f"{HOST_DIR}{host}").mkdir()
        schedule_path = plan.write(data_dir / SCHEDULE_FILE)
        history = self.history = History(data_dir, self.t0)
        history.add("start", seed=plan.seed, records=plan.records, workers=plan.workers, schedule=str(schedule_path))
        strategy = ctx.strategy
        queue = getattr(strategy, "drill_submit", None)
        resubmits = "resubmit-same" in plan.kinds or "submit-crash" in plan.kinds
        self.input_id = INPUT_ID if resubmits and queue is None else None
        records = self.records = demo_records(plan.records)
        refuse_a_held_workload(ctx)
        crashes = [(e, crash_a_submit(data_dir, records, INPUT_ID, plan.work_ms)) for e in plan.setup()
                   if e["kind"] == "submit-crash" and self.input_id is not None]
        for event, what in crashes:  # a producer killed mid-submit: the submit below is its retry
            history.add("fault", event=event["n"], kind=event["kind"], done=0, **what)
        # submit writes the input the whole run depends on: its durability is watched too.
        outcome = "added"
        with Probe(_probe_dir(data_dir), STATE_DB).watch():
            if queue is not None:  # a queue input publishes the records for the workers instead
                queue(ctx, records, work_ms=plan.work_ms)
                _pin_queue_on_hosts(data_dir, plan.hosts)
            elif self.input_id is not None:
                answer = submission.queue(ctx, records, correlation_id=self.input_id, work_ms=plan.work_ms)
                outcome = "added" if answer.added else "repeat"
            else:
                strategy.submit(ctx, records, work_ms=plan.work_ms)
        history.add("submit", event=None, correlation_id=self.input_id, records=len(records), outcome=outcome)
        self.oracles = start_oracles(data_dir, records, plan.seed, worker_env())
        service = ExternalService(data_dir)  # create external.db so progress can be polled
        if plan.fail_rate is not None:
            service.set_failure_rate(plan.fail_rate)
        service.close()
        self.emit({"event": "start", "strategy": strategy.NAME, "records": plan.records, "kills": plan.kills,
                   "signal": signal_name(plan), "workers": plan.workers, "data_dir": str(data_dir), "t": self.t(),
                   "aim": aimed_windows(plan) or None, "schedule": str(schedule_path),
                   "faults": [schedule_module.describe(e) for e in plan.events]})
        self.tally = Tally()
        for event, what in crashes:
            self.tally.injected(event, what, self.emit, self.t, 0)
        # Armed kills go to the workers in the order they start; one marked "after" damage goes to the
        # successor of the kill that damaged the newest checkpoint (schedule.py), held until then.
        self.armed = [e for e in plan.armed() if e.get("after") != "damage"]
        self.after_damage = [e for e in plan.armed() if e.get("after") == "damage"]
        self.timed = plan.timed()
        self._no_damage_left()
        self.base = self._expected_count()
        self.marks = {e["n"]: e["at"] * self.base for e in self.timed}
        self.extended = 0
        self.broker_away_since: float | None = None  # a queue's broker refusing the drill's extra work
        self.reruns = 0
        self.settling = -1  # effects applied when the last outage ended
        log = open(data_dir / "drill-workers.log", "ab")
        self.progress = Progress(data_dir)
        self.pool = Pool(data_dir, plan.workers, plan.hosts, worker_env(), log, history, _probe_dir(data_dir))
        self.nemesis = Nemesis(ctx, self.pool, self.progress, history, records=records, input_id=self.input_id,
                               expected=self._expected_count, work_ms=plan.work_ms, add_work=self.add_work)
        self.watch = ClaimsWatch(ctx, history, lambda: self.nemesis.busy)
        self.stall = Stall(self.ctx.settings.lease_s, plan.stall_s)
        started = time.monotonic()
        try:
            for slot in range(plan.workers):
                self.pool.spawn(slot, self.armed.pop(0) if self.armed else None, done=0)
            self._loop()
            self.nemesis.bad_input_answers()  # before the finals: they run the job again
            # finals.py: a person's answers, a rebuild, an upgrade; none asked of a stalled run (stopped)
            self._finals(plan.final() if self.stall.found is None else [])
        except BaseException:
            stop_oracles(self.oracles)  # the drill itself was stopped: nobody will read the oracle
            raise
        finally:
            self.watch.close()
            self.nemesis.close()
            self.pool.stop_all()
            self.progress.close()
            log.close()
        wall_s = time.monotonic() - started
        history.add("end", wall_s=round(wall_s, 3))
        history.close()
        records = self.records
        expected = {(str(r["record_id"]), step) for r in records for step in job.STEPS}
        checked = verify(data_dir, expected)
        calls = effects.summary(data_dir, self.ctx.settings)  # the kind, its promise, the calls in doubt
        try:
            state = strategy.status(ctx)
        except Exception as exc:  # a store the faults left unreadable: a verdict, not a crash of the drill
            state = {"total": len(records), "done": 0, "tasks": [], "unreadable": f"{type(exc).__name__}: {exc}"}
        report = build_report(self, plan, checked, calls, state, expected, wall_s, data_dir, schedule_path)
        extras = getattr(strategy, "drill_report", None)  # a strategy's own figures (replayed batches skipped)
        if extras is not None:
            report.update(extras(ctx))
        report["operator"] = self.operator
        report["failures"] = judge(ctx, self.ctx.settings, data_dir, report, expected, records, self.oracles, state)
        report["stalled"] = self.stall.found
        if self.stall.found is not None:
            report["failures"].insert(0, failure("stalled", stall_message(self.stall.found)))
        if state.get("unreadable"):
            report["unreadable_store"] = state["unreadable"]
            report["failures"].insert(0, failure("store_corrupt", "after the run the strategy cannot read what it "
                                                                  f"stored: {state['unreadable']}"))
        report["ok"] = report["failures"] == []
        return report  # command.py emits it (after shrinking a failure)

    def _loop(self) -> None:
        last_progress = 0.0
        while True:
            done = self.progress.applied()
            now = time.monotonic()
            # Alive first, reaped second: a worker that ends between the two readings is reaped in
            # this pass (its kill counted, its successor started), never taken for the end of the run.
            anyone_was_alive = bool(self.pool.alive())
            for slot in self.pool.exited():
                self._reap(slot, done)
            self.tally.recovered(done, now, self.emit, self.t, everyone_gone=not self.pool.alive())
            if now - last_progress >= PROGRESS_EVERY_S:
                last_progress = now
                self.emit({"event": "progress", "done": done, "total": self._expected_count(), "t": self.t()})
                if self._stalled(done, now):
                    return
            if not anyone_was_alive and not self.pool.alive():
                self.nemesis.tick(end=True)  # nobody left to ride an outage out: the store is back
                undone = self._undone()
                if (self.armed or self.timed) and self.extended < MAX_EXTENSIONS and not undone:
                    self._extend(done)
                    continue
                if undone and self.nemesis.lost_at is not None:
                    self._after_the_lease(done, undone)
                    continue
                if undone and self.reruns < MAX_RERUNS and self._queued_after_every_look(undone):
                    self._rerun(done, undone)
                    continue
                return
            self.watch.tick()
            if self.nemesis.tick():
                self.settling = done  # the store is back: the next kill waits until work moved again
            event = self.timed[0] if self.timed else None
            if event is not None and not self.nemesis.busy and self._due(event, done):
                outcome = self.nemesis.inject(event, done)
                if outcome is not None:
                    self.timed.pop(0)
                    self.tally.injected(event, outcome, self.emit, self.t, self.progress.applied())
                    if event["kind"] in KILLS:  # a lost host's neighbours (also) went with it
                        for slot in [outcome["slot"], *outcome.get("also", [])]:
                            self._restart(slot, after_damage=bool(outcome.get("damaged")))
                    self._no_damage_left()
                    continue
            time.sleep(POLL_S)

    def _stalled(self, done: int, now: float) -> bool:
        """Has the run stopped moving (stall.py)? Then its workers are stopped, and the verdict says so."""
        alive = self.pool.alive()
        mark = (done, self.progress.calls(), tuple(self.pool.procs[s].pid for s in alive))  # type: ignore[union-attr]
        still = self.stall.still_for(mark, paused=self.nemesis.busy or not alive, now=now)
        if still is None:
            return False
        found = self.stall.stop(still, done, self._expected_count(), len(alive))
        self.history.add("stalled", **found)
        self.emit({"event": "stalled", "t": self.t(), **found})
        self.pool.stop_all()
        return True

    def _due(self, event: dict[str, Any], done: int) -> bool:
        """Is the next timed event's moment here? A kill waits for the last restart's recovery (unless aimed
        at it) and for work after an outage; so does an outage, which also waits for a unit held (the claims
        watch's last reading), to meet units in flight, or, ``idle``, for every record so far done. A stop
        after a refusal follows its burst at once: the refused call is held until the stop is sent."""
        if event.get("moment") == "after-refusal":
            return True
        if event.get("idle"):
            return done >= self._expected_count()
        if done < self.marks[event["n"]] or (event["kind"] == "store-outage" and not self.watch.holding()):
            return False
        return event["kind"] not in (*KILLS, "store-outage") or not (
            (self.tally.pending and event.get("moment") != "recovering") or done <= self.settling)

    def _no_damage_left(self) -> None:
        """No damaging kill left to follow (all landed, or shrunk away): the held kills are armed as the others."""
        if self.after_damage and not any(e.get("damage") for e in self.timed):
            self.armed += self.after_damage
            self.after_damage = []

    def _reap(self, slot: int, done: int) -> None:
        """A worker ended on its own: in its armed point (a delivered kill), or it finished."""
        proc = self.pool.procs[slot]
        assert proc is not None
        code, armed = proc.returncode, self.pool.armed[slot]
        self.pool.armed[slot] = None
        if armed is not None and code == -signal.SIGKILL:  # it died in its window: a delivered kill
            self.pool.killed.add(proc.pid)
            self.history.add("exit", slot=slot, pid=proc.pid, code=code, by="self", event=armed["n"], done=done)
            self.tally.injected(armed, {"landed": 1, "slot": slot}, self.emit, self.t, done)
            self._restart(slot, after_damage=armed.get("after") == "damage")
            return
        self.history.add("exit", slot=slot, pid=proc.pid, code=code, by="worker", event=None, done=done)
        if armed is not None:  # it finished without passing its point often enough: later
            self.armed.insert(0, armed)
        if code != 0:
            self.tally.worker_failures.append(code)

    def _restart(self, slot: int, *, after_damage: bool = False) -> None:
        """Start the slot's next worker at once, armed with the next armed event if any; after a kill
        that damaged the newest checkpoint, or a link of the chain that follows it, the chain's next."""
        left = self.pool.armed[slot]
        if left is not None:  # killed by the drill before its own point: the point is still planned
            after_damage = after_damage or left.get("after") == "damage"
            (self.after_damage if left.get("after") == "damage" else self.armed).insert(0, left)
        queue = self.after_damage if after_damage and self.after_damage else self.armed
        # The effects now, not the loop's reading: the worker that ended may have applied more since.
        # A late resubmission must pick only what its successor did (nemesis.py), and its recovery
        # is its first effect after these (an older reading would take the predecessor's last for
        # it, and let the next kill land before the successor took over what it inherited).
        done = self.progress.applied()
        self.pool.spawn(slot, queue.pop(0) if queue else None, done=done)
        self.tally.restarted(done, self.emit, self.t)

    def _undone(self) -> int:
        """Every worker ended: the records not finished. Workers that quit with work left (a task
        held by a worker that is gone) are a finding (``incomplete``), never papered over by more
        work; only what the drill itself queued too late for them is run once more (_rerun)."""
        try:
            state = self.ctx.strategy.status(self.drill_ctx)
        except Exception:  # unreadable: nothing more can run on it, and the verdict says so (run())
            return 0
        return max(0, int(state["total"]) - int(state["done"]) - int(state.get("failed", 0)))

    def _queued_after_every_look(self, undone: int) -> bool:
        """Could the undone records be the drill's own last submission, queued after each worker
        of the run had last looked for work? Only if it came after every one of them started (a
        worker started later looked after it) and it holds at least as many records as are undone."""
        last = self.nemesis.last_queued
        if last is None:
            return False
        queued_at, records = last
        return queued_at > max(self.pool.spawned_at) and undone <= records

    def _rerun(self, done: int, undone: int) -> None:
        """The drill queued work as the workers were finding none and leaving: a user's next run
        of the job would do it, so the drill starts that run (said in the history and the report)."""
        self.reruns += 1
        self.history.add("rerun", undone=undone, done=done)
        self._start_every_slot(done)

    def _after_the_lease(self, done: int, undone: int) -> None:
        """Every worker left, with work a lost host held (host-lost): as an orchestrator would, the job
        is started again once the lease ran out since the loss, on the hosts the workers are on now
        (never back home, where the dead pid would give the claim away). Once per loss; work still
        undone after that run is the ``incomplete`` finding."""
        lost_at, self.nemesis.lost_at = self.nemesis.lost_at, None
        assert lost_at is not None
        wait = max(0.0, lost_at + float(self.ctx.settings.lease_s) + LEASE_MARGIN_S - time.monotonic())
        self.history.add("lease-wait", undone=undone, done=done, waited_s=round(wait, 3))
        time.sleep(wait)
        self._start_every_slot(self.progress.applied(), home=False)

    def _extend(self, done: int) -> None:
        """The work ran out before every planned event landed: submit more and start the workers again."""
        extra = self.add_work(max(50, self.schedule.records // 2), f"extend-{self.extended + 1}")
        if extra is None:  # the broker is away (the drill may restart it): the loop comes back
            time.sleep(POLL_S)
            return
        self.extended += 1
        self.history.add("extend", records=len(extra), done=done, pending=[e["n"] for e in self.armed + self.timed])
        added = len(extra) * len(job.STEPS)
        for i, event in enumerate(self.timed):  # spread what is left over the new work
            self.marks[event["n"]] = done + added * 0.9 * (i + 1) / (len(self.timed) + 1)
        self._start_every_slot(done)

    def add_work(self, count: int, label: str, work_ms: float | None = None) -> list[dict[str, Any]] | None:
        """``count`` new records (never seen before) submitted as a user would, under correlation id
        ``drill-<label>`` (a queue input: published on the drill's queue); the oracle restarted on the
        whole input. None: the broker is away; the caller tries again later. Used when the work ran
        out (_extend) and for the new-input fault (nemesis.py), while the workers run."""
        start = len(self.records)
        extra = demo_records(start + count)[start:]
        publish = getattr(self.drill_ctx.strategy, "drill_submit", None)
        if publish is not None:  # a queue input: more messages on the drill's queue
            try:
                publish(self.drill_ctx, extra, work_ms=work_ms or self.schedule.work_ms, more=label.replace("-", ""))
            except TransientError as exc:
                now = time.monotonic()
                self.broker_away_since = self.broker_away_since or now
                if now - self.broker_away_since > BROKER_AWAY_S:
                    raise JobError(f"{exc}: the drill could not add work for {BROKER_AWAY_S:.0f} s") from None
                return None
            self.broker_away_since = None
        else:
            submission.queue(self.drill_ctx, extra, correlation_id=f"drill-{label}", work_ms=work_ms or self.schedule.work_ms)
        self.records = self.records + extra
        self.nemesis.records = self.records  # a resubmission may pick from the new work too
        stop_oracles(self.oracles)
        # the oracle sees the whole input
        self.oracles = start_oracles(self.drill_ctx.data_dir, self.records, self.schedule.seed, worker_env())
        return extra

    def _start_every_slot(self, done: int, *, home: bool = True) -> None:
        """A new run of the job, at the size it grew to (a scale-out's slot too: an event waiting for two
        live workers never lands in a one-worker run); ``home``: on its first hosts, else where they are."""
        for slot in range(len(self.pool.procs)):
            if home:
                self.pool.home(slot)
            self.pool.spawn(slot, self.armed.pop(0) if self.armed else None, done=done)

    def _expected_count(self) -> int:
        """What must happen: the input x the steps job.py declares (never the strategy's say-so)."""
        return len(self.records) * len(job.STEPS)


def _pin_queue_on_hosts(data_dir: Path, hosts: int) -> None:
    """A simulated host's workers run in its own data directory: each finds the drill's queue there too."""
    if hosts > 1:
        from ..runtime.amqp_input.broker import DRILL_QUEUE_FILE  # only a queue project has it
        for host in range(1, hosts + 1):
            shutil.copyfile(data_dir / DRILL_QUEUE_FILE, data_dir / f"{HOST_DIR}{host}" / DRILL_QUEUE_FILE)


def _probe_dir(data_dir: Path) -> Path:
    (where := data_dir / PROBE_DIR).mkdir(exist_ok=True)
    return where
