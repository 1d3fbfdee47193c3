"""The nemesis: injects one timed event of the schedule (schedule.py) and says what it did.

Each kind is one method; what it did goes to the history (history.py), which the checks
read. An event that cannot land yet (no worker alive, nothing done to resubmit, the store
busy) answers ``None`` and is tried again at the next poll; armed kills are not here (the
worker gives them to itself: workers.py arms it, runner.py reaps it).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import job
from ..runtime.errors import StoreUnavailable
from ..runtime.external import ExternalService
from ..runtime.service_log import calls_by
from .moments import faults_a_call_rides_out
from ..runtime.store import STATE_DB
from ..runtime.strategy import Context
from . import bad_input, store_away
from .history import History
from .progress import Progress
from .resubmitting import Resubmitting
from .workers import Pool

#: An outage is held until the workers were stalled for its hold_s, and at most this much longer.
OUTAGE_MAX_S = 20.0
#: A store outage the drill could not begin (a lock not granted in time, a server busy) is tried again this much later.
OUTAGE_RETRY_S = 0.5
#: An idle outage (schedule.IDLE_OUTAGE_AT) begins once no call was made for this long.
IDLE_S = 0.1
#: How long a second start may take to refuse (an interpreter's start and a lock's answer take < 1 s).
SECOND_START_WAIT_S = 10.0
#: An after-outage stop waits this long at most for a worker that rode the outage out to call again.
BACK_AT_WORK_S = 3.0
#: Until this fraction of the expected effects, a kill aimed at a commit waits for one;
#: later it lands at once (the next commit could be the run's last).
COMMIT_AIM_UNTIL = 0.9
KILLS = ("sigkill", "sigterm", "other-host", "host-lost")


class Nemesis(Resubmitting):
    def __init__(self, ctx: Context, pool: Pool, progress: Progress, history: History, *,
                 records: list[dict[str, Any]], input_id: str | None, expected: Callable[[], int],
                 work_ms: float = 0.0,
                 add_work: Callable[[int, str], list[dict[str, Any]] | None] | None = None) -> None:
        self.ctx, self.pool, self.progress, self.history = ctx, pool, progress, history
        self.records, self.input_id, self.expected, self.work_ms = records, input_id, expected, work_ms
        #: Submits new records as a user would and widens the oracle's input (runner.py's add_work).
        self.add_work = add_work
        self.strategy = ctx.strategy
        self._outage: _Outage | None = None
        self._outage_tried = 0.0  # when the drill last tried to begin one (OUTAGE_RETRY_S)
        self.spells = store_away.Spells()  # the outages, as the malformed-input thread sees them
        self.file_submissions: list[bad_input.FileSubmissions] = []  # the malformed-input fault's, under way
        #: When the last host-lost kill landed (time.monotonic()): its claims are freed by the lease alone.
        self.lost_at: float | None = None
        #: The last submission that queued work, as (time.monotonic(), records): work queued while
        #: the workers were on their way out waits for the job's next run (runner.py starts one).
        self.last_queued: tuple[float, int] | None = None
        #: The effects applied when the last outage ended: a worker may rebuild what it keeps then.
        self.done_at_outage_end = 0
        #: Per worker pid: the effects applied when the drill first saw it call (past its start-up).
        self.done_at_first_call: dict[int, int] = {}
        #: The service's calls when the last burst of refusals was scheduled (after-refusal stops).
        self.calls_at_refusals = 0
        #: The workers alive when the last store outage ended (they rode it out), each with its calls
        #: then: an after-outage stop goes to one that has called since (its run is back at work),
        #: one that held a unit when the outage began first (``outage_holders``: their owner ids).
        self.outage_riders: dict[int, int] = {}
        self.outage_holders: set[str] = set()

    # ------------------------------------------------------------------ dispatch
    def inject(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        """What the event did (its outcome), or None: it cannot land now, try again later."""
        kind = event["kind"]
        if kind in KILLS:
            return self._kill(event, done)
        method = getattr(self, "_" + kind.replace("-", "_"))
        outcome: dict[str, Any] | None = method(event, done)
        return outcome

    @property
    def busy(self) -> bool:
        """An outage is being held: the next event waits for its end."""
        return self._outage is not None

    def tick(self, *, end: bool = False) -> bool:
        """End the outage being held once every worker has been stalled for its ``hold_s``
        (no effect applied that long: each one waited on the lock past busy_timeout), or after
        OUTAGE_MAX_S more at most (a worker that never writes); ``end``: now (no worker is left).
        True when it ended here."""
        if self._outage is None:
            return False
        outage, now, done = self._outage, time.monotonic(), self.progress.applied()
        outage.holder.sweep()
        if done != outage.done:
            outage.done, outage.quiet_since = done, now
        held_long_enough = now - outage.quiet_since >= outage.event["hold_s"]
        if not (end or held_long_enough or now - outage.began >= outage.event["hold_s"] + OUTAGE_MAX_S):
            return False
        outage.holder.release()
        self._outage, self.done_at_outage_end = None, done
        riders = [self.pool.procs[s].pid for s in self.pool.alive()]  # type: ignore[union-attr]
        self.outage_riders = {pid: calls_by(self.ctx.data_dir, pid) for pid in riders}
        self.history.add("fault", event=outage.event["n"], kind=outage.event["kind"], phase="end", done=done,
                         held_s=round(now - outage.began, 3))
        return True

    def close(self) -> None:
        """The drill is ending (or was stopped): let go of an outage still held."""
        if self._outage is not None:
            self._outage.holder.release()
            self._outage = None

    # --------------------------------------------------------------------- kills
    def _kill(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        alive = self.pool.alive()
        if event["kind"] != "sigkill":
            # A graceful stop is never asked of an armed worker: it could pass its point while it
            # finishes and die by its own SIGKILL, which is no verdict on the stop. It waits.
            alive = [slot for slot in alive if self.pool.armed[slot] is None]
        if not alive:
            if event.get("moment") == "after-refusal":
                self._release_hold()  # the refused worker is armed: it is not kept waiting for a later stop
            return None
        if event.get("damage") and self.strategy.drill_damage_newest(self.ctx, None)["file"] is None:
            return None  # no older generation to fall back to yet (the first batch): later
        slot = alive[event.get("slot", 0) % len(alive)]
        moment = event.get("moment", "anywhere")
        if moment == "recovering":
            # The worker started last (in a killed one's place), once it is up and calls flow again:
            # its recovery (lookups, re-sent calls, the claim's first batch) is under way.
            slot = max(alive, key=lambda s: self.pool.spawned_at[s])
            if self.pool.wait_ready(slot):
                self.progress.await_call()
            time.sleep(event.get("delay_ms", 0) / 1000)
        elif moment == "after-refusal":
            # The worker whose call the service just refused: it waits to retry when the stop comes.
            pid = self.progress.await_refusal(since=self.calls_at_refusals)
            slot = next((s for s in alive if self.pool.procs[s].pid == pid), slot)  # type: ignore[union-attr]
        elif moment == "after-outage":
            slot = self._back_at_work(alive, slot)
        if event["kind"] == "host-lost":
            # Mid-unit: a call went out, its commit not yet made, the claim held. With several steps, a
            # later step's call: the unit had moved on under the lost worker (its state and heartbeat
            # rewritten since the claim) when the machine went.
            steps = job.STEPS
            later = steps[1 + event.get("slot", 0) % (len(steps) - 1)] if len(steps) > 1 else None
            self.progress.await_effect(step=later)
            outcome = self._lose_host(slot, event, later)
        elif event["kind"] == "sigkill":
            if moment == "anywhere":
                time.sleep(event.get("delay_ms", 0) / 1000)  # anywhere in a batch, not on a boundary
            elif moment == "after-effect":
                self.progress.await_effect()  # between a call and the commit that records it
            elif moment == "after-commit":
                self.progress.await_commit(give_up_at=int(COMMIT_AIM_UNTIL * self.expected()))
            outcome = self.pool.sigkill(slot, event, self.progress.applied())
            if outcome["landed"] and event.get("damage"):
                outcome["damaged"] = self._damage(event, done)
        elif moment == "after-refusal":
            try:  # the held refusal is answered once the signal is sent: the worker meets both
                outcome = self.pool.sigterm(slot, event, self.ctx.settings.grace_period_s, self.progress.applied(),
                                            sent=self._release_hold)
            finally:
                self._release_hold()
        else:
            outcome = self.pool.sigterm(slot, event, self.ctx.settings.grace_period_s, self.progress.applied())
            if event["kind"] == "other-host" and outcome["landed"]:
                stranded = self._held_by_the_killed()
                if stranded:  # moved now, the successor could only wait out their lease: it stays
                    self.history.add("fault", event=event["n"], kind="other-host", phase="stayed", done=done,
                                     held=stranded)
                else:
                    self.pool.move_host(slot)
        if not outcome["landed"]:
            return None  # it had exited (or never got ready): try another moment
        return {**outcome, "slot": slot}  # the runner restarts the slot

    def _back_at_work(self, alive: list[int], slot: int) -> int:
        """A worker that rode the last outage out and has called the service since (its run started
        again and took work: what the interrupted run held was its to take back), waited for up to
        BACK_AT_WORK_S; else any that rode it out, else ``slot``."""
        pids = {s: self.pool.procs[s].pid for s in alive}  # type: ignore[union-attr]
        riders = sorted((s for s in alive if pids[s] in self.outage_riders),  # holders first (owner ids end in the pid)
                        key=lambda s: not any(o.endswith(f":{pids[s]}") for o in self.outage_holders))
        give_up = time.monotonic() + BACK_AT_WORK_S
        while riders:
            back = [s for s in riders if calls_by(self.ctx.data_dir, pids[s]) > self.outage_riders[pids[s]]]
            if back or time.monotonic() > give_up:
                return (back or riders)[0]
            time.sleep(0.02)
        return slot

    def _holders(self) -> set[str]:
        """The owner ids holding a unit right now (the strategy's held_claims), or none if unreadable."""
        read = getattr(self.strategy, "held_claims", None)
        try:
            return {str(c["owner"]) for c in read(self.ctx)} if read is not None else set()
        except Exception:  # busy, not created yet: no preference then
            return set()

    def _lose_host(self, slot: int, event: dict[str, Any], step: str | None) -> dict[str, Any]:
        """The machine is gone with every worker on it and what they held: each is killed and its
        successor starts on another host. One left running there would see its neighbours' pids gone
        and take their claims at once, which no surviving machine can do: only the lease frees them."""
        there, host = self.pool.on_host_of(slot), self.pool.host[slot]
        outcome = self.pool.sigkill(slot, event, self.progress.applied())
        if not outcome["landed"]:
            return outcome
        alive = self.pool.alive()
        also = [s for s in there[1:] if s in alive and self.pool.sigkill(s, event, self.progress.applied())["landed"]]
        for lost in there:  # every slot of that host, running or not, starts elsewhere from now on
            self.pool.move_host(lost)
        self.lost_at = time.monotonic()
        self.history.add("fault", event=event["n"], kind="host-lost", phase="lost", host=host, slots=[slot, *also],
                         after_step=step, done=self.progress.applied())
        return {**outcome, "also": also} if also else outcome

    def _held_by_the_killed(self) -> list[str]:
        """Claims still held by a worker the drill killed (a SIGKILL, or its own armed kill) that no
        successor took over yet: the stopped worker may have been stopped before it did. A successor
        on this host sees the holder's pid gone and takes them at once; on another host only their
        lease could tell, so the drill does not move it then. Claims kept by a worker that ended by
        itself are the job's own finding (the exits check), and on another host they show."""
        read = getattr(self.strategy, "held_claims", None)
        if read is None or not self.pool.killed:
            return []
        endings = tuple(f":{pid}" for pid in self.pool.killed)  # an owner id ends with its pid (runtime/owners.py)
        try:
            held = read(self.ctx)
        except Exception:  # noqa: BLE001  unreadable now (an outage): move as planned
            return []
        return [claim["what"] for claim in held if str(claim.get("owner") or "").endswith(endings)]

    def _damage(self, event: dict[str, Any], done: int) -> str | None:
        """The killed worker's newest checkpoint generation damaged before its successor starts
        (the damaged-checkpoint fault): the file damaged, or None with the reason in the history."""
        what = self.strategy.drill_damage_newest(self.ctx, event["damage"])
        self.history.add("fault", event=event["n"], kind="damaged-checkpoint", done=done,
                         **{"how": event["damage"], **what})
        return what.get("file")

    def _second_start(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        """The job started again on a running worker's data directory: it must refuse at once.
        Stopped as soon as it makes a call (it ran), or after SECOND_START_WAIT_S."""
        # Never beside an armed worker: it could die at its point meanwhile and leave the second free to run;
        # nor beside one still starting (no call yet): the second could take the data directory first.
        alive = [slot for slot in self.pool.alive() if self.pool.armed[slot] is None
                 and calls_by(self.ctx.data_dir, self.pool.procs[slot].pid)]
        if not alive:
            return None  # nobody at work unarmed: later
        began, first = time.monotonic(), self.pool.procs[alive[0]]
        assert first is not None
        proc = self.pool.start_again(alive[0])
        while proc.poll() is None and time.monotonic() - began < SECOND_START_WAIT_S:
            if calls_by(self.ctx.data_dir, proc.pid):
                break
            time.sleep(0.02)
        # The first one ended meanwhile (its own armed kill, or its work done): the second was free to run.
        first_ended = first.poll() is not None
        if proc.poll() is None:
            # It ran alongside (the verdict), or waits for the lock: enough. Free to run once the first
            # ended, it is asked to stop as a deploy would: a kill would be one the report does not count.
            proc.send_signal(signal.SIGTERM if first_ended else signal.SIGKILL)
        code = proc.wait()
        outcome = {"pid": proc.pid, "code": code, "exit_s": round(time.monotonic() - began, 3),
                   "calls": calls_by(self.ctx.data_dir, proc.pid), "alongside": first.pid, "first_ended": first_ended}
        self.history.add("fault", event=event["n"], kind=event["kind"], done=done, **outcome)
        return outcome

    # ------------------------------------------------------------------- service
    def _service(self, event: dict[str, Any], done: int, **counts: int) -> dict[str, Any] | None:
        """A burst of refused or timed-out calls, once the last burst is over: stacked bursts
        would be one outage longer than any the schedule means (and than a correct project's
        retries of one call ride out)."""
        service = ExternalService(self.ctx.data_dir)
        try:
            if not service.faults_settled():
                return None  # the last burst is still being taken: later
            if counts.get("fail"):
                self.calls_at_refusals = self.progress.calls()  # before: the first refusal can be at once
            service.schedule_faults(**counts, hold=bool(event.get("hold")), cap=faults_a_call_rides_out(self.strategy))
        finally:
            service.close()
        self.history.add("fault", event=event["n"], kind=event["kind"], calls=event["calls"], done=done)
        return {"calls": event["calls"]}

    def _release_hold(self) -> None:
        service = ExternalService(self.ctx.data_dir)
        try:
            service.release_hold()
        finally:
            service.close()

    def _service_fail(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        return self._service(event, done, fail=event["calls"])

    def _service_timeout(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        return self._service(event, done, timeout=event["calls"])

    def _service_slow(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        """A slow downstream: for the event's seconds, every call answered late_ms late."""
        service = ExternalService(self.ctx.data_dir)
        try:
            service.answer_late(event["seconds"], event["late_ms"] / 1000)
        finally:
            service.close()
        outcome = {"seconds": event["seconds"], "late_ms": event["late_ms"]}
        self.history.add("fault", event=event["n"], kind=event["kind"], done=done, **outcome)
        return outcome

    def _scale_out(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        """One more worker beside the running ones (an autoscaler's replica, a deploy's new pod):
        from now on live workers share the work, and each unit must still be done by one of them."""
        beside = [self.pool.procs[s].pid for s in self.pool.alive()]  # type: ignore[union-attr]
        if not beside:
            return None  # nobody running: later (a worker beside a running one is the point)
        slot = self.pool.add_slot()
        proc = self.pool.spawn(slot, None, done=done)
        self.history.add("fault", event=event["n"], kind="scale-out", slot=slot, pid=proc.pid, beside=beside, done=done)
        return {"slot": slot}

    def _new_input(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        """New input while the workers run: records never seen, submitted as a user would. A worker
        that reads its input once, or a position into an input that a submit reorders, loses or
        repeats work here; the drill's last look waits for them (runner.py reruns the job once if
        every worker had left before they came)."""
        if self.add_work is None or not self.pool.alive():
            return None  # nobody running: later (new input mid-run is the point)
        try:
            extra = self.add_work(event["count"], f"new-input-{event['n']}")
        except StoreUnavailable:
            return None  # the store is away (an outage): later
        if extra is None:
            return None  # the broker is away: later
        self.last_queued = (time.monotonic(), len(extra))
        self.history.add("new-input", event=event["n"], correlation_id=f"drill-new-input-{event['n']}",
                         records=len(extra), first=str(extra[0]["record_id"]), done=done)
        return {"outcome": "added", "records": len(extra)}

    def _malformed_input(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        """Input that can never be worked on, sent while the workers run (bad_input.py)."""
        if not self.pool.alive():
            return None  # nobody running: later (a consumer must meet the messages)
        sent = bad_input.inject(self.ctx, self.pool.base_env, event, self.spells)
        if sent is None:
            return None
        outcome, submissions = sent
        if submissions is not None:
            self.file_submissions.append(submissions)
        self.history.add("fault", event=event["n"], kind=event["kind"], done=done, **outcome)
        return outcome

    def bad_input_answers(self) -> None:
        """How the flawed files were answered (bad_input.py), once every worker ended: in the history."""
        for submissions in self.file_submissions:
            submissions.join()
            self.history.add("malformed-answers", event=submissions.event, cases=submissions.cases)
        self.file_submissions = []

    # ---------------------------------------------------------------- the store
    def _store_outage(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        idle = event.get("idle")  # once the consumers committed and acked their last work: they wait for messages
        if time.monotonic() - self._outage_tried < OUTAGE_RETRY_S or (idle and not self.progress.still_for(IDLE_S)):
            return None
        self._outage_tried = time.monotonic()
        self.outage_holders = self._holders()
        holder = store_away.take(self.ctx.settings.database_url, Path(self.ctx.data_dir) / STATE_DB, self.spells)
        if holder is None:
            return None
        self._outage = _Outage(holder, event, self.progress.applied())
        sent = self.add_work(event["count"], f"outage-input-{event['n']}") if idle and self.add_work else None  # None: broker away
        self.history.add("fault", event=event["n"], kind=event["kind"], phase="start", hold_s=event["hold_s"],
                         done=done, published=len(sent or []))
        return {"hold_s": event["hold_s"]}

    # --------------------------------------------------------------- key reuse
    def _key_reuse(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        try:
            answer = self.strategy.drill_reuse_key(self.ctx)
        except StoreUnavailable:
            return None
        if answer is None:
            return None  # no key used yet
        self.history.add("key", event=event["n"], done=done, **answer)
        return {"outcome": answer["outcome"]}


class _Outage:
    """What the drill holds to keep the store away, since when, and when the effects last moved."""

    def __init__(self, holder: store_away.SqliteLock | store_away.PgOutage, event: dict[str, Any], done: int) -> None:
        self.holder, self.event, self.done = holder, event, done
        self.began = self.quiet_since = time.monotonic()
