"""Event sourcing, the command side: the commands that append events (one batch
of records per transaction; the ledger variant's idempotent ``charge``) and the
``Worker`` that runs them, with the effects subscriber and the projection.

The command side NEVER calls the external service: ``job.process_record``'s
``effect()`` only records the requested effect inside the event.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import RecordConflictError

from .. import job
from ..runtime import faults, metrics
from ..runtime.errors import BadRecord, JobError
from ..runtime.external import ExternalService
from ..runtime.owners import owner_id
from ..runtime.shutdown import Shutdown
from ..runtime.store import Store, note_commit
from ..runtime.strategy import Context
from .domain import Payment, Task, stream_id
from .event_store import ACK_COMMANDS, IDEMPOTENT, MARK_TASK, SELECT_INPUTS, SELECT_OPEN_TASKS, Events
from .subscriber import EFFECTS, RELEASE_LEASE, RESULTS, WITHDRAW_INTENT, EffectsSubscriber


#: The window right after a batch of events is appended (drill --aim): before the effects
#: subscriber reads them, and (ledger variant) before the client acknowledged the commands.
APPEND_WINDOW = "after_append_before_ack" if IDEMPOTENT else "after_append_before_effects"


def request_hash(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


class IdempotencyConflict(JobError):
    """An idempotency key was reused with a different request."""


# ---------------------------------------------------------------------- command
def load_task(app: Events, task_id: str, total: int) -> Task:
    """Rebuild the stream's state: latest snapshot + the events after it."""
    try:
        return app.repository.get(stream_id(task_id))
    except AggregateNotFoundError:
        return Task(task_id=task_id, total=total)


def charge(app: Events, task: Task, seq: int, record: dict[str, Any], key: str, *,
           work_ms: float = 0.0) -> tuple[dict[str, Any], Payment | None]:
    """Idempotent command: the first result for ``key``, or a new (pending) payment.

    A repeated key with the same request returns the stored result and creates
    nothing; with a different request it is refused (IdempotencyConflict).
    """
    digest = request_hash({"task_id": task.task_id, "record": record})
    try:
        first: Payment = app.repository.get(Payment.create_id(key))
    except AggregateNotFoundError:
        first = None  # type: ignore[assignment]
    if first is not None:
        if first.request_hash != digest:
            raise IdempotencyConflict(f"idempotency key {key!r} was first used for a different request "
                                      f"(task {first.task_id}, seq {first.seq}); refusing it")
        return {**first.result, "replayed": True}, None
    output, effects = run_job(record, work_ms)
    result = {"record_id": str(record.get("record_id")), "seq": seq, "output": output, "key": key}
    task.record_processed(seq=seq, record_id=result["record_id"], output=output, effects=effects, key=key)
    return {**result, "replayed": False}, Payment(key=key, request_hash=digest, result=result,
                                                  task_id=task.task_id, seq=seq)


def run_job(record: dict[str, Any], work_ms: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Call the user's job; its effect() RECORDS the effect (no call happens here)."""
    effects: list[dict[str, Any]] = []

    def effect(payload: Any, step: str = "") -> dict[str, Any]:
        effects.append({"step": step, "payload": payload})
        return {"status": "recorded", "record_id": record.get("record_id"), "step": step}

    return job.process_record(record, effect, work_ms=work_ms), effects


def payment_key(task_id: str, record: dict[str, Any]) -> str:
    """The demo's idempotency key: what a client would send with its charge."""
    return f"pay:{task_id}/{record.get('record_id')}"


# -------------------------------------------------------------------------- run
class Worker(EffectsSubscriber):
    """One `run` process: effects first, then a batch of commands, then the projection (which
    rides in the effects subscriber's commit unless it is behind: subscriber.py)."""

    def __init__(self, ctx: Context, store: Store, app: Events, external: ExternalService,
                 shutdown: Shutdown) -> None:
        self.ctx, self.store, self.app, self.external, self.shutdown = ctx, store, app, external, shutdown
        self.settings = ctx.settings
        self.owner = owner_id()
        self.processed = 0
        self.skip: set[str] = set()  # tasks another worker is appending to right now
        #: Idempotent variant: task -> (commands to acknowledge, replays among them).
        self.unacked: dict[str, tuple[int, int]] = {}
        self.task_ids: dict[UUID, str] = {}
        self.own_intent: tuple[int, int, Any] | None = None

    def run(self, limit: int | None) -> int:
        idle = 0
        try:
            while not self.shutdown.requested:
                stop = limit is not None and self.processed >= limit
                # Effects first: after a restart the backlog of recorded effects goes out
                # before new commands are computed (recovery = restart -> first effect).
                sent = self.effects_batch()
                worked = 0 if stop else self.command_batch()
                projected = self.project_batch()
                if worked or sent or projected:
                    idle = 0
                    continue
                if stop or self.finished():
                    break
                idle += 1
                # Another worker holds the effects lease or the last stream: wait a little.
                time.sleep(min(0.05, 0.005 * idle))
                if idle % 20 == 0:
                    self.skip.clear()
        except BaseException:
            # Best effort only: when the store went away these fail too, and the error on
            # its way out (StoreUnavailable for an outage) is the one to report. What is
            # left behind is what a kill leaves: the unacknowledged commands are re-sent,
            # and the lease is this process's, so a `run` re-entered here takes it back.
            try:
                self._stop()
            except Exception:  # noqa: BLE001
                pass
            raise
        self._stop()
        if self.shutdown.requested:
            self.log(f"{self.shutdown.signal_name}: position committed, lease released, exiting 0")
        return 0

    def _stop(self) -> None:
        for task_id in list(self.unacked):  # a clean stop acknowledges everything
            self._ack(task_id)
        with self.store.transaction():
            if self.own_intent is not None:  # prepared, not called: nothing for the next worker to look up
                self.store.execute(WITHDRAW_INTENT, (EFFECTS, self.owner, *self.own_intent[:2]))
                self.own_intent = None
            self.store.execute(RELEASE_LEASE, (EFFECTS, self.owner))

    def finished(self) -> bool:
        if self.store.one("SELECT 1 AS x FROM es_tasks WHERE status = 'open'"):
            return False
        last = self.app.recorder.max_notification_id() or 0
        rows = {r["name"]: r["position"] for r in self.store.all("SELECT name, position FROM es_subscribers")}
        return rows.get(EFFECTS, 0) >= last and rows.get(RESULTS, 0) >= last

    # ---- the command side: append events, never call out
    def command_batch(self) -> int:
        tasks = [t for t in self.store.all(SELECT_OPEN_TASKS) if t["task_id"] not in self.skip]
        if not tasks:
            return 0
        # Different workers start on different streams (fewer conflicts).
        row = tasks[os.getpid() % len(tasks)]
        task = load_task(self.app, row["task_id"], row["total"])
        if self._complete(task, row["acked"]):
            self._mark(row["task_id"], "failed" if task.failed else "done", task.failed)
            return 0
        start = min(row["acked"], task.next_seq) if IDEMPOTENT else task.next_seq
        end = min(start + self.settings.batch_size, task.total)
        inputs = self.store.all(SELECT_INPUTS, (row["task_id"], start, end))
        started, payments, done, replayed = time.monotonic(), [], 0, 0
        try:
            for item in inputs:
                record = json.loads(item["record"])
                if IDEMPOTENT:
                    result, payment = charge(self.app, task, item["seq"], record,
                                             payment_key(row["task_id"], record), work_ms=row["work_ms"])
                    if payment is None:
                        replayed += 1
                    else:
                        payments.append(payment)
                else:
                    output, effects = run_job(record, row["work_ms"])
                    task.record_processed(seq=item["seq"], record_id=str(record.get("record_id")),
                                          output=output, effects=effects)
                done += 1
                if self.shutdown.requested:  # safe point: this record is complete
                    break
                if time.monotonic() - started >= self.settings.checkpoint_interval_s:
                    break
        except BadRecord as exc:
            task.fail(reason=str(exc))
            self.log(f"task {row['task_id']} failed: {exc}")
        try:
            # One transaction for the batch (and its payments): all or nothing.
            began = time.perf_counter()
            self.app.save(task, *payments)
            note_commit(time.perf_counter() - began)  # the library committed: an outage is over (outage.py)
        except RecordConflictError:
            # Another worker appended to this stream first: its events win, ours
            # are dropped (nothing was called), and we move to another stream.
            self.log(f"task {row['task_id']}: stream moved under us; batch given up")
            self.skip.add(row["task_id"])
            return 0
        faults.window(APPEND_WINDOW)
        # Replayed commands came back as their first result: an earlier batch committed them.
        metrics.records_done(done - replayed)  # runtime/metrics.py (and run's summary line)
        if IDEMPOTENT and done:
            # The client acknowledges one batch late (like a consumer that commits its
            # offsets lazily): a kill makes it re-send the last batch, and every one of
            # those commands must come back as its first result, appending nothing.
            self._ack(row["task_id"])
            self.unacked[row["task_id"]] = (start + done, replayed)
        if self._complete(task, start + done):
            self._ack(row["task_id"])
            self._mark(row["task_id"], "failed" if task.failed else "done", task.failed)
        self.processed += done
        return done

    @staticmethod
    def _complete(task: Task, acked: int) -> bool:
        """Every record is in the stream (ledger: and every command was acknowledged)."""
        if task.failed is not None:
            return True
        return task.next_seq >= task.total and (not IDEMPOTENT or acked >= task.total)

    def _ack(self, task_id: str) -> None:
        if task_id in self.unacked:
            upto, replayed = self.unacked.pop(task_id)
            with self.store.transaction():
                self.store.execute(ACK_COMMANDS, (upto, replayed, task_id, upto))

    def _mark(self, task_id: str, status: str, error: str | None) -> None:
        with self.store.transaction():
            self.store.execute(MARK_TASK, (status, error, task_id))
