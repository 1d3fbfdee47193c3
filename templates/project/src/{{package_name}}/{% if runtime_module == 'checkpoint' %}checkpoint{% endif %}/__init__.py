"""Checkpoint strategy: a task/state table, results + offset in one transaction.

The recovery point (the three questions):

* **Where** — the ``tasks`` row: ``processed_offset`` plus versioned JSON
  ``checkpoint_data``, in the state database (schema.sql).
* **How often** — after ``batch_size`` records (item-count trigger) or after
  ``checkpoint_interval_s`` seconds (time trigger), whichever comes first.
* **No duplicates, no omissions** — each batch commits its results and the new
  offset in ONE transaction, guarded by ``WHERE processed_offset = ?`` (a batch
  that loses the race is given up, not applied). External calls carry an
  idempotency key derived from the task and the record, are recorded as
  *prepared* before the call and *done* with the checkpoint; a prepared call
  found on recovery follows the rule of the service's kind (effects.py): re-sent
  with its key (idempotent), looked up first (queryable), or in doubt (plain).

On start, stale ``running`` tasks (heartbeat older than the lease, or owned by a
dead process on this host) are reclaimed and resume at their offset; a task whose
payload cannot be processed is marked ``failed`` with the reason.
"""

from __future__ import annotations

import functools
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from ..runtime import correlation, effects, faults
from .. import job
from ..runtime.errors import BadRecord, CorruptStateError, JobError, StateVersionError, TransientError
from ..runtime.external import ExternalService
from ..runtime.owners import owner_gone, owner_id
from ..runtime.shutdown import Shutdown
from ..runtime.state import StateCodec
from ..settings import INPUT_SOURCE, Settings
from ..runtime.store import Store, apply_schema, connect, workload_held
from ..runtime.strategy import Context, Submitted, percent, run_worker

NAME = "checkpoint"
MULTI_WORKER = True
#: After a kill, the calls of the uncommitted batch are re-sent with their keys when the
#: service is idempotent (the service dedupes them); otherwise none (effects.py).
REDONE_CALLS_PER_KILL = effects.promise(Settings.from_env().batch_size * len(job.STEPS))
#: The critical windows (drill --aim): name -> what a kill there proves.
WINDOWS = {
    "after_effect_before_commit": "a record's external call went through, the batch commit that records it has "
                                  "not happened: the restarted worker must follow the rule of the service's kind "
                                  "for its prepared intent (re-send with the key, look it up, or hold it in doubt)",
    "after_commit_before_next_batch": "the batch's results, offset and the next batch's intents are committed, "
                                      "no call of the next batch is made yet: nothing may be lost or redone, and "
                                      "the prepared intents of calls never made must not block the next run",
}

#: What `reset` drops in the state store (strategy.py): every table schema.sql creates.
STORE_TABLES = ("tasks", "results", "intents", "schema_version")

SCHEMA_FILE = Path(__file__).parent.with_name("schema.sql")  # src/<package>/schema.sql
SCHEMA_VERSION = 3
#: MIGRATIONS[v] turns schema version v - 1 into v.
MIGRATIONS = {
    2: "ALTER TABLE tasks ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
    3: correlation.TABLE,  # submissions by correlation id
}

#: Task input, stored with the task (version 1).
PAYLOAD = StateCodec("task-payload", 1)


def _checkpoint_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    # v1 kept only the sum; v2 keeps a count as well (a mean needs both).
    return {"sum": data["sum"], "count": data.get("offset", 0)}


#: The job's running state at processed_offset (job.fold's; version 2, version 1 is upgraded).
CHECKPOINT = StateCodec("checkpoint", 2, {1: _checkpoint_v1_to_v2})

# --------------------------------------------------------------------------- SQL
INSERT_TASK = """
INSERT INTO tasks (task_id, correlation_id, payload, status, processed_offset, total,
                   checkpoint_data, created_at, updated_at)
VALUES (?, ?, ?, 'pending', 0, ?, ?, ?, ?)"""

COUNT_TASKS = "SELECT COUNT(*) AS n FROM tasks"

# Candidates for a claim: new work, and running work whose owner may be gone.
SELECT_CLAIMABLE = """
SELECT task_id, status, instance_id, owner, updated_at FROM tasks
WHERE status IN ('pending', 'running') ORDER BY created_at, task_id"""

# Compare-and-set on (status, instance_id): of two workers claiming the same row,
# exactly one changes it.
CLAIM_TASK = """
UPDATE tasks SET status = 'running', instance_id = ?, owner = ?, attempts = attempts + 1,
                 claimed_at = ?, claimed_offset = processed_offset, updated_at = ?, error = NULL
WHERE task_id = ? AND status = ? AND COALESCE(instance_id, '') = ?"""

SELECT_TASK = "SELECT * FROM tasks WHERE task_id = ?"

# Intents another (killed) instance prepared but never confirmed.
SELECT_PREPARED = """
SELECT seq FROM intents
WHERE task_id = ? AND seq >= ? AND seq < ? AND status = 'prepared' AND instance_id != ?"""

# Our own intents for records we did not reach (time trigger, signal): never called.
DROP_UNUSED_INTENTS = """
DELETE FROM intents WHERE task_id = ? AND seq >= ? AND seq < ? AND status = 'prepared' AND instance_id = ?"""

# ON CONFLICT DO NOTHING: an intent left 'prepared' by a killed instance stays as it is.
INSERT_INTENT = """
INSERT INTO intents (idempotency_key, task_id, seq, status, instance_id, prepared_at)
VALUES (?, ?, ?, 'prepared', ?, ?) ON CONFLICT (idempotency_key) DO NOTHING"""

# A batch's intents are done once its offset commits ("done with the checkpoint" above):
# they are removed in that same transaction, all at once by range (one statement; the
# table holds a batch or two per running task, so no per-key update and no pile of
# 'done' rows to scan and delete later).
DELETE_BATCH_INTENTS = "DELETE FROM intents WHERE task_id = ? AND seq >= ? AND seq < ?"

INSERT_RESULT = "INSERT INTO results (task_id, seq, record_id, output, created_at) VALUES (?, ?, ?, ?, ?)"

# The checkpoint itself. WHERE processed_offset = ? is the optimistic lock: if
# another worker moved the offset since we read it, 0 rows change and the whole
# transaction (results included) is rolled back: the batch is given up.
ADVANCE_OFFSET = """
UPDATE tasks SET processed_offset = ?, checkpoint_data = ?, last_checkpoint_id = last_checkpoint_id + 1,
                 status = CASE WHEN ? >= total THEN 'done' ELSE status END, updated_at = ?
WHERE task_id = ? AND processed_offset = ? AND status = 'running'"""

# 'done' rows are no longer written; this clears those a store from an earlier version kept.
DELETE_DONE_INTENTS = "DELETE FROM intents WHERE task_id = ? AND status = 'done'"

# Graceful stop (signal, --limit): hand the task back at its committed offset so
# the next worker starts at once instead of waiting for the lease.
RELEASE_TASK = """
UPDATE tasks SET status = 'pending', owner = NULL, updated_at = ?
WHERE task_id = ? AND instance_id = ? AND status = 'running'"""

MARK_FAILED = "UPDATE tasks SET status = 'failed', error = ?, updated_at = ? WHERE task_id = ? AND instance_id = ?"

SELECT_STATUS = """
SELECT task_id, status, processed_offset, total, attempts, error, updated_at, claimed_at, claimed_offset,
       last_checkpoint_id
FROM tasks ORDER BY created_at, task_id"""


# ---------------------------------------------------------------------- storage
def open_store(ctx: Context, *, create: bool = False) -> Store:
    store = connect(ctx.data_dir, ctx.settings, create=create)
    apply_schema(store, SCHEMA_FILE.read_text(encoding="utf-8"), SCHEMA_VERSION, MIGRATIONS)
    return store


def idempotency_key(task_id: str, record_id: str, step: str = "") -> str:
    """Derived from the task and the record: a replayed batch sends the same keys."""
    return f"{task_id}/{record_id}" + (f"/{step}" if step else "")


# ----------------------------------------------------------------------- submit
def submit(ctx: Context, records: list[dict[str, Any]], *, work_ms: float = 0.0,
           correlation_id: str | None = None) -> Submitted:
    """Queue records as tasks of ``task_size`` (strategy.py: without a correlation id,
    the demo, refused on a data dir that has work; with one, new work unless redelivered)."""
    if correlation_id is None:
        return _insert_tasks(ctx, records, work_ms=work_ms, prefix="demo", correlation_id=None)
    return _insert_tasks(ctx, records, work_ms=work_ms, prefix="task", correlation_id=correlation_id)


def submit_many(ctx: Context, store: Store, submissions: list[tuple[str, list[dict[str, Any]], float]]
                ) -> list[Submitted]:
    """Several submissions (correlation id, records, work_ms) in ONE transaction on ``store``
    (strategy.py): each deduped by its own id, all kept or none."""
    with store.transaction():
        return [_add(ctx, store, records, work_ms=work_ms, prefix="task", correlation_id=cid)
                for cid, records, work_ms in submissions]


def _insert_tasks(ctx: Context, records: list[dict[str, Any]], *, work_ms: float, prefix: str,
                  correlation_id: str | None) -> Submitted:
    """Split records into tasks; each task stores its own input (the payload)."""
    store = open_store(ctx, create=True)
    try:
        with store.transaction():
            return _add(ctx, store, records, work_ms=work_ms, prefix=prefix, correlation_id=correlation_id)
    finally:
        store.close()


def _add(ctx: Context, store: Store, records: list[dict[str, Any]], *, work_ms: float, prefix: str,
         correlation_id: str | None) -> Submitted:
    """Inside the caller's transaction: the tasks of one submission, or the existing ones."""
    if correlation_id is None and store.one(COUNT_TASKS)["n"]:
        raise JobError(workload_held(store, ctx.data_dir))
    if correlation_id is not None:
        existing = correlation.claim(store, correlation_id, len(records))
        if existing is not None:  # a redelivery: keep the tasks and their checkpoints
            return Submitted(existing, added=False)
    now, ids, size = time.time(), [], ctx.settings.task_size
    initial = CHECKPOINT.dumps(job.INITIAL_STATE)
    for n, first in enumerate(range(0, len(records), size)):
        chunk = records[first:first + size]
        if correlation_id is None:
            task_id, corr = f"{prefix}-{n:05d}", f"{prefix}:{first}-{first + len(chunk) - 1}"
        else:
            # The submissions table finds these tasks again; the column stays unique.
            task_id = f"{prefix}-{uuid.uuid4().hex[:12]}"
            corr = task_id
        payload = PAYLOAD.dumps({"records": chunk, "work_ms": work_ms})
        store.execute(INSERT_TASK, (task_id, corr, payload, len(chunk), initial, now, now))
        ids.append(task_id)
    if correlation_id is not None:
        correlation.record(store, correlation_id, ids)
    return Submitted(ids)


# -------------------------------------------------------------------------- run
class Worker:
    def __init__(self, ctx: Context, store: Store, external: ExternalService, shutdown: Shutdown) -> None:
        self.ctx, self.store, self.external, self.shutdown = ctx, store, external, shutdown
        self.settings = ctx.settings
        self.effects = effects.Effects(external, ctx.data_dir, ctx.settings)
        self.instance_id = uuid.uuid4().hex
        self.owner = owner_id()
        self.processed = 0
        self.outage: TransientError | None = None  # set when retries run out mid-batch

    def log(self, message: str) -> None:
        print(f"[{self.owner} {self.instance_id[:8]}] {message}", file=sys.stderr, flush=True)

    # ---- claiming
    def claim(self) -> dict[str, Any] | None:
        with self.store.transaction():
            now = time.time()
            for row in self.store.all(SELECT_CLAIMABLE):
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
                    return task
        return None

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

    def process_task(self, task: dict[str, Any], limit: int | None) -> None:
        try:
            payload = PAYLOAD.loads(task["payload"])
            records, work_ms = payload["records"], float(payload.get("work_ms", 0.0))
            if not isinstance(records, list) or len(records) != task["total"]:
                raise CorruptStateError("payload 'records' does not match the task's total")
            state = CHECKPOINT.loads(task["checkpoint_data"] or CHECKPOINT.dumps(job.INITIAL_STATE))
        except (CorruptStateError, StateVersionError, KeyError, TypeError, ValueError) as exc:
            self.fail(task, f"unreadable payload or checkpoint: {exc}")
            return
        task_id, offset, total = task["task_id"], task["processed_offset"], task["total"]
        # Intents another (killed) instance prepared and never confirmed, read once per
        # claim: only an instance holding the task writes its intents, and that is us now.
        foreign = {row["seq"] for row in self.store.all(SELECT_PREPARED, (task_id, offset, total, self.instance_id))}
        # The intents of the batch about to run: None = not prepared yet (the first batch
        # after a claim); else the seqs of that batch another instance had prepared.
        prepared: set[int] | None = None
        while offset < total:
            if self.shutdown.requested or (limit is not None and self.processed >= limit):
                self.release(task_id, offset, total)
                return
            end = min(offset + self.settings.batch_size, total)
            if prepared is None:
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

    def release(self, task_id: str, offset: int, total: int) -> None:
        """Hand the task back at its committed offset, dropping our intents of calls never made."""
        with self.store.transaction():
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
            with self.store.transaction():
                prepared = self.prepare_intents(task_id, records, offset, end)
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
        prepared = ({seq for seq in foreign if offset <= seq < end} if foreign is not None else
                    {row["seq"] for row in self.store.all(SELECT_PREPARED, (task_id, offset, end, self.instance_id))})
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
                self.store.execute(DELETE_BATCH_INTENTS, (task_id, offset, new_offset))
                if new_offset < end:
                    self.store.execute(DROP_UNUSED_INTENTS, (task_id, new_offset, end, self.instance_id))
                if new_offset >= total:
                    self.store.execute(DELETE_DONE_INTENTS, (task_id,))
                if next_end is not None:
                    self.prepare_intents(task_id, records, new_offset, next_end, foreign=foreign)
        except _LostRace:
            return False
        faults.window("after_commit_before_next_batch")
        state.update(new_state)
        return True


class _LostRace(Exception):
    """The optimistic lock failed: roll the batch back."""


def run(ctx: Context, shutdown: Shutdown, *, limit: int | None = None, store: Store | None = None,
        external: ExternalService | None = None) -> int:
    """Work until nothing is left (strategy.run_worker: ``store``/``external`` lent by the queue consumer)."""
    return run_worker(ctx, lambda s, e: Worker(ctx, s, e, shutdown), open_store, limit=limit, store=store,
                      external=external)


# ----------------------------------------------------------------------- status
def status(ctx: Context) -> dict[str, Any]:
    store = open_store(ctx)
    try:
        rows = store.all(SELECT_STATUS)
    finally:
        store.close()
    now, tasks = time.time(), []
    for row in rows:
        claimed = row["claimed_at"]
        elapsed = (row["updated_at"] - claimed) if claimed else 0
        moved = row["processed_offset"] - (row["claimed_offset"] or 0)
        tasks.append({
            "task_id": row["task_id"], "status": row["status"],
            "done": row["processed_offset"], "total": row["total"],
            "percent": round(percent(row["processed_offset"], row["total"]), 1),
            "last_checkpoint_id": row["last_checkpoint_id"],
            "last_checkpoint_age_s": round(now - row["updated_at"], 3) if row["last_checkpoint_id"] else None,
            "rate_per_s": round(moved / elapsed, 1) if elapsed > 0 and moved > 0 else None,
            "attempts": row["attempts"], "error": row["error"],
        })
    done, total = sum(t["done"] for t in tasks), sum(t["total"] for t in tasks)
    return {"strategy": NAME, "total": total, "done": done, "percent": round(percent(done, total), 1),
            "failed": sum(t["status"] == "failed" for t in tasks), "tasks": tasks}


def expected_effects(records: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(str(r["record_id"]), step) for r in records for step in job.STEPS}


# ------------------------------------------------- what the run stored (read-only)
SELECT_RESULTS = "SELECT record_id, output FROM results ORDER BY task_id, seq"
SELECT_FINAL_STATES = "SELECT task_id, payload, checkpoint_data FROM tasks ORDER BY created_at, task_id"


def stored_results(ctx: Context) -> list[tuple[str, Any]]:
    """Every results row: (record_id, output)."""
    store = open_store(ctx)
    try:
        return [(row["record_id"], json.loads(row["output"])) for row in store.all(SELECT_RESULTS)]
    finally:
        store.close()


def stored_final_states(ctx: Context) -> list[dict[str, Any]]:
    """Per task: its input's record ids and the running state saved at its offset."""
    store = open_store(ctx)
    try:
        rows = store.all(SELECT_FINAL_STATES)
    finally:
        store.close()
    return [{"task_id": row["task_id"],
             "record_ids": [str(r.get("record_id")) for r in PAYLOAD.loads(row["payload"])["records"]],
             "state": CHECKPOINT.loads(row["checkpoint_data"]) if row["checkpoint_data"] else None}
            for row in rows]


# ------------------------------------------------------------------ queue input
# input_source=rabbitmq: `run` consumes a queue whose messages feed submit (amqp_input.py);
# its critical windows join this strategy's, and the drill publishes its input there.
if INPUT_SOURCE == "rabbitmq":
    from ..runtime import amqp_input

    WINDOWS = {**WINDOWS, **amqp_input.WINDOWS}
    drill_submit, drill_report = amqp_input.drill_submit, amqp_input.drill_report
