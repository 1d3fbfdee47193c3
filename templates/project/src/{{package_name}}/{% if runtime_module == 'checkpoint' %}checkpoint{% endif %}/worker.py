"""The checkpoint strategy's worker: claim a task, work it batch by batch, commit each batch.

Each batch: the intents of its calls committed first, then the calls (``job.process_record``),
then results + the batch's intents removed + the new offset in ONE transaction guarded by
``WHERE processed_offset = ?`` (a batch that loses the race is given up). The first batch's
intents commit with the claim, every later batch's with the checkpoint before it: one commit
per batch, one more per task.

Intents are written only for a queryable service (``KEEPS_INTENTS``), the one kind where "this
call may have got through" changes what is done next: the call is looked up instead of made
again. An idempotent service dedupes the re-sent key on its own, and a plain call has its own
ledger row written before it is sent (runtime/effects.py); for those a row per call before each
batch would be a write for nothing (about half the WAL pages a batch writes).
"""

from __future__ import annotations

import functools
import json
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

from .. import job
from ..runtime import effects, faults, metrics
from ..runtime.errors import BadRecord, CorruptStateError, StateVersionError, TransientError
from ..runtime.external import ExternalService
from ..runtime.owners import owner_gone, owner_id, ours_first
from ..runtime.shutdown import Shutdown
from ..runtime.store import Store
from ..runtime.strategy import Context
from .tables import (ADVANCE_OFFSET, CHECKPOINT, CLAIM_TASK, DELETE_BATCH_INTENTS, DELETE_TASK_INTENTS,
                     DROP_UNUSED_INTENTS, INSERT_INTENT, INSERT_RESULT, MARK_FAILED, PAYLOAD, RELEASE_TASK,
                     SELECT_CLAIMABLE, SELECT_PREPARED, SELECT_TASK)


#: Whether intents are kept (see the module docstring).
KEEPS_INTENTS = effects.KIND == "queryable"


def idempotency_key(task_id: str, record_id: str, step: str = "") -> str:
    """Derived from the task and the record: a replayed batch sends the same keys."""
    return f"{task_id}/{record_id}" + (f"/{step}" if step else "")


@dataclass
class FirstBatch:
    """What the claim's transaction read and prepared for the task's first batch."""

    task_id: str
    records: list[dict[str, Any]]
    work_ms: float
    state: dict[str, Any]
    foreign: set[int]  # intents a killed instance prepared and never confirmed
    end: int  # the first batch is records[offset:end]; its intents are prepared


class Unreadable(Exception):
    """The task's input or checkpoint cannot be read: the task fails (its reason is the message)."""


class Worker:
    def __init__(self, ctx: Context, store: Store, external: ExternalService, shutdown: Shutdown) -> None:
        self.ctx, self.store, self.external, self.shutdown = ctx, store, external, shutdown
        self.settings = ctx.settings
        self.effects = effects.Effects(external, ctx.data_dir, ctx.settings)
        self.instance_id = uuid.uuid4().hex
        self.owner = owner_id()
        self.processed = 0
        self.outage: TransientError | None = None  # set when retries run out mid-batch
        self.first_batch: FirstBatch | None = None  # prepared by the last claim

    def log(self, message: str) -> None:
        print(f"[{self.owner} {self.instance_id[:8]}] {message}", file=sys.stderr, flush=True)

    # ---- claiming
    def claim(self) -> dict[str, Any] | None:
        """A task to work on, with its first batch's intents prepared in the claim's own commit
        (``first_batch``): one fsync fewer per task, and still every intent durable before its call."""
        with self.store.transaction():
            task, taken_over = self._claim_in_transaction()
            self.first_batch = self._prepare_first_batch(task, taken_over) if task is not None else None
            return task

    def _claim_in_transaction(self) -> tuple[dict[str, Any] | None, bool]:
        """The claimed task (None: nothing to claim), and whether it was taken over from a
        holder that was running it."""
        now = time.time()
        for row in ours_first(self.store.all(SELECT_CLAIMABLE), self.owner, self.instance_id):
            # Held by this very process under an earlier instance (run re-entered after a
            # store outage, outage.py): ours to take back at once, as from a dead owner.
            ours = row["owner"] == self.owner and row["instance_id"] != self.instance_id
            if row["status"] == "running" and not ours and not owner_gone(
                    row["owner"], row["updated_at"], lease_s=self.settings.lease_s, now=now):
                continue
            changed = self.store.execute(CLAIM_TASK, (
                self.instance_id, self.owner, now, now,
                row["task_id"], row["status"], row["instance_id"] or "")).rowcount
            if changed == 1:
                task = self.store.one(SELECT_TASK, (row["task_id"],))
                if row["status"] == "running":
                    self.log(f"reclaimed {row['task_id']} from {row['owner']}: resuming at offset "
                             f"{task['processed_offset']}/{task['total']}")
                return task, row["status"] == "running"
        return None, False

    def run(self, limit: int | None) -> int:
        while not self.shutdown.requested and (limit is None or self.processed < limit):
            task = self.claim()
            if task is None:
                return 0
            self.process_task(task, limit)
        if self.shutdown.requested:
            self.log(f"{self.shutdown.signal_name}: final checkpoint written, exiting 0")
        return 0

    # ---- processing
    def fail(self, task: dict[str, Any], reason: str) -> None:
        self.log(f"task {task['task_id']} failed: {reason}")
        with self.store.transaction():
            self.store.execute(MARK_FAILED, (reason, time.time(), task["task_id"], self.instance_id))

    @staticmethod
    def _read_task(task: dict[str, Any]) -> tuple[list[dict[str, Any]], float, dict[str, Any]]:
        """(records, work_ms, state) of a claimed task; Unreadable when its input or checkpoint is not."""
        try:
            if task["payload"] is None:  # task_inputs lost its row: nothing to process
                raise CorruptStateError("the task's input is missing from task_inputs")
            payload = PAYLOAD.loads(task["payload"])
            records, work_ms = payload["records"], float(payload.get("work_ms", 0.0))
            if not isinstance(records, list) or len(records) != task["total"]:
                raise CorruptStateError("payload 'records' does not match the task's total")
            state = CHECKPOINT.loads(task["checkpoint_data"] or CHECKPOINT.dumps(job.INITIAL_STATE))
        except (CorruptStateError, StateVersionError, KeyError, TypeError, ValueError) as exc:
            raise Unreadable(f"unreadable payload or checkpoint: {exc}") from None
        return records, work_ms, state

    def _prepare_first_batch(self, task: dict[str, Any], taken_over: bool) -> FirstBatch | None:
        """Inside the claim's transaction: the task read, and its first batch's intents prepared.
        None when it cannot be read (process_task fails it) or has nothing left to do."""
        try:
            records, work_ms, state = self._read_task(task)
        except Unreadable:
            return None
        task_id, offset, total = task["task_id"], task["processed_offset"], task["total"]
        if offset >= total:
            return None
        end = min(offset + self.settings.batch_size, total)
        if KEEPS_INTENTS:
            # Intents another (killed) instance prepared and never confirmed, read once per
            # claim: only an instance holding the task writes its intents, and that is us now.
            foreign = self._foreign_intents(task_id, offset, total)
        else:
            # No intents: after a takeover, the holder may have made the calls of the batch
            # at its offset (counted as re-sent; the key or the ledger keeps them single).
            foreign = set(range(offset, end)) if taken_over else set()
        self.prepare_intents(task_id, records, offset, end, foreign=foreign)
        return FirstBatch(task_id, records, work_ms, state, foreign, end)

    def process_task(self, task: dict[str, Any], limit: int | None) -> None:
        task_id, offset, total = task["task_id"], task["processed_offset"], task["total"]
        first, self.first_batch = self.first_batch, None
        # The intents of the batch about to run: None = not prepared yet; else the seqs of that
        # batch another instance had prepared.
        prepared: set[int] | None = None
        if first is not None and first.task_id == task_id:  # read and prepared by the claim
            records, work_ms, state, foreign = first.records, first.work_ms, first.state, first.foreign
            prepared = {seq for seq in foreign if offset <= seq < first.end}
        else:
            try:
                records, work_ms, state = self._read_task(task)
            except Unreadable as exc:
                self.fail(task, str(exc))
                return
            foreign = self._foreign_intents(task_id, offset, total) if KEEPS_INTENTS else set()
        while offset < total:
            if self.shutdown.requested or (limit is not None and self.processed >= limit):
                self.release(task_id, offset, total)
                return
            end = min(offset + self.settings.batch_size, total)
            if prepared is None:
                if KEEPS_INTENTS:
                    with self.store.transaction():
                        self.prepare_intents(task_id, records, offset, end, foreign=foreign)
                prepared = {seq for seq in foreign if offset <= seq < end}
            try:
                outputs = self.work_batch(task_id, records, offset, end, work_ms, state, prepared=prepared)
            except BadRecord as exc:
                self.fail(task, str(exc))
                return
            new_offset = offset + len(outputs)
            # Will another batch run right after this one? Then its intents are prepared in
            # this batch's checkpoint transaction: one commit (one fsync) per batch, and
            # still every intent is durable before its call.
            going_on = (new_offset < total and self.outage is None and not self.shutdown.requested
                        and (limit is None or self.processed + len(outputs) < limit))
            next_end = min(new_offset + self.settings.batch_size, total) if going_on else None
            if not self.checkpoint(task_id, offset, end, records, outputs, state, total, next_end=next_end,
                                   foreign=foreign):
                self.log(f"task {task_id}: offset moved under us at {offset}; batch given up")
                return
            prepared = {seq for seq in foreign if new_offset <= seq < next_end} if next_end is not None else None
            offset = new_offset
            self.processed += len(outputs)
            if self.outage is not None:
                # The external service stayed down through the retries. What was done is
                # checkpointed above; hand the task back and pause instead of crashing.
                self.log(f"task {task_id}: external service unavailable ({self.outage}); task handed back")
                self.outage = None
                self.release(task_id, offset, total)
                time.sleep(0.5)
                return

    def _foreign_intents(self, task_id: str, offset: int, total: int) -> set[int]:
        return {row["seq"] for row in self.store.all(SELECT_PREPARED, (task_id, offset, total, self.instance_id))}

    def release(self, task_id: str, offset: int, total: int) -> None:
        """Hand the task back at its committed offset, dropping our intents of calls never made."""
        with self.store.transaction():
            if KEEPS_INTENTS:
                self.store.execute(DROP_UNUSED_INTENTS, (task_id, offset, total, self.instance_id))
            self.store.execute(RELEASE_TASK, (time.time(), task_id, self.instance_id))

    def work_batch(self, task_id: str, records: list[dict[str, Any]], offset: int, end: int,
                   work_ms: float, state: dict[str, Any], *, prepared: set[int] | None = None
                   ) -> list[dict[str, Any]]:
        """Process records[offset:end] (cut short by the time trigger or a signal).

        ``prepared``: the intents of this range are already committed (by the previous
        batch's checkpoint) and these seqs among them were prepared by a killed instance.
        None: prepare them here, in their own transaction, before any call.
        """
        if prepared is None:
            if KEEPS_INTENTS:
                with self.store.transaction():
                    prepared = self.prepare_intents(task_id, records, offset, end)
            else:
                prepared = set()
        # The work. Time trigger: stop early so a checkpoint is written at least
        #    every checkpoint_interval_s (and the heartbeat stays fresh).
        # Names looked up once per batch, not once per record (this loop is the hot path).
        # faults.window is NOT hoisted: arming it must take effect at the next record.
        process, make_effect, shutdown, clock = job.process_record, self._effect, self.shutdown, time.monotonic
        deadline = clock() + self.settings.checkpoint_interval_s
        outputs: list[dict[str, Any]] = []
        append = outputs.append
        for seq in range(offset, end):
            record = records[seq]
            effect = make_effect(task_id, record, recovering=seq in prepared)
            try:
                append(process(record, effect, work_ms=work_ms))
            except TransientError as exc:  # retries exhausted: end the batch at this record
                self.outage = exc
                break
            faults.window("after_effect_before_commit")
            if shutdown.requested:  # safe point: this record is complete
                break
            if clock() >= deadline:
                break
        return outputs

    def _effect(self, task_id: str, record: dict[str, Any], *, recovering: bool) -> job.Effect:
        record_id = str(record.get("record_id"))

        def effect(payload: Any, step: str = "") -> dict[str, Any]:
            key = idempotency_key(task_id, record_id, step)
            # recovering: prepared by a killed instance, so the call may have got through.
            for attempt in range(5):
                try:
                    return self.effects.call(record_id, step, key, payload, recovering=recovering)
                except TransientError:
                    time.sleep(min(0.5, 0.01 * 2 ** attempt))
            return self.effects.call(record_id, step, key, payload, recovering=recovering)

        return effect

    def prepare_intents(self, task_id: str, records: list[dict[str, Any]], offset: int, end: int, *,
                        foreign: set[int] | None = None) -> set[int]:
        """Inside a transaction: which calls of records[offset:end] may already have happened
        (a killed instance prepared them; ``foreign`` if already read), then ours recorded as
        prepared, BEFORE any call."""
        if foreign is not None:
            prepared = {seq for seq in foreign if offset <= seq < end}
        else:
            prepared = self._foreign_intents(task_id, offset, end) if KEEPS_INTENTS else set()
        if not KEEPS_INTENTS:
            return prepared
        now = time.time()
        self.store.executemany(INSERT_INTENT, [
            (idempotency_key(task_id, str(records[seq].get("record_id"))), task_id, seq, self.instance_id, now)
            for seq in range(offset, end)])
        return prepared

    def checkpoint(self, task_id: str, offset: int, end: int, records: list[dict[str, Any]],
                   outputs: list[dict[str, Any]], state: dict[str, Any], total: int, *,
                   next_end: int | None = None, foreign: set[int] | None = None) -> bool:
        """Results, the batch's intents removed (done) and the new offset: one transaction,
        or nothing (False).

        With ``next_end``, the same transaction prepares the intents of the next batch
        (records[new offset:next_end]): they are durable before its first call.
        """
        new_offset = offset + len(outputs)
        new_state = functools.reduce(job.fold, outputs, state)  # the job's own fold (job.py)
        try:
            with self.store.transaction():
                now = time.time()
                changed = self.store.execute(ADVANCE_OFFSET, (
                    new_offset, CHECKPOINT.dumps(new_state), new_offset, now, task_id, offset)).rowcount
                if changed != 1:
                    raise _LostRace
                self.store.executemany(INSERT_RESULT, [
                    (task_id, offset + i, str(records[offset + i].get("record_id")), json.dumps(output), now)
                    for i, output in enumerate(outputs)])
                if KEEPS_INTENTS:
                    self.store.execute(DELETE_BATCH_INTENTS, (task_id, offset, new_offset))
                    if new_offset < end:
                        self.store.execute(DROP_UNUSED_INTENTS, (task_id, new_offset, end, self.instance_id))
                if new_offset >= total:  # every record is done: no intent of the task is needed
                    self.store.execute(DELETE_TASK_INTENTS, (task_id,))
                if next_end is not None:
                    self.prepare_intents(task_id, records, new_offset, next_end, foreign=foreign)
        except _LostRace:
            return False
        faults.window("after_commit_before_next_batch")
        metrics.records_done(len(outputs))  # runtime/metrics.py
        state.update(new_state)
        return True


class _LostRace(Exception):
    """The optimistic lock failed: roll the batch back."""
