"""Checkpoint strategy: a task/state table, results + offset in one transaction.

The recovery point (the three questions):

* **Where** — the ``tasks`` row: ``processed_offset`` plus versioned JSON
  ``checkpoint_data``, in the state database (schema.sql). The task's input is in
  ``task_inputs``, written once: the row updated per batch stays small.
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

This module is the interface ``strategy.load()`` imports (submit, run, status, what
the run stored); ``worker.py`` holds the batch loop, ``tables.py`` the schema version,
the JSON of the columns and the SQL.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .. import job
from ..runtime import correlation, effects
from ..runtime.errors import JobError
from ..runtime.external import ExternalService
from ..runtime.shutdown import Shutdown
from ..runtime.store import Store, workload_held
from ..runtime.strategy import Context, Submitted, held_rows, percent, run_worker
from ..settings import INPUT_SOURCE, Settings
from .tables import (CHECKPOINT, COUNT_TASKS, INSERT_INPUT, INSERT_TASK, PAYLOAD, SELECT_FINAL_STATES,
                     SELECT_HELD, SELECT_RESULTS, SELECT_STATUS, open_store)
from .worker import Worker

NAME = "checkpoint"
MULTI_WORKER = True
#: After a kill, the calls of the uncommitted batch are re-sent with their keys when the
#: service is idempotent (the service dedupes them); otherwise none (effects.py).
REDONE_CALLS_PER_KILL = effects.promise(Settings.from_env().batch_size * len(job.STEPS))
#: The critical windows (drill --aim): name -> what a kill there proves.
WINDOWS = {
    "after_effect_before_commit": "a record's external call went through, the batch commit that records it has "
                                  "not happened: the restarted worker must follow the rule of the service's kind "
                                  "for that call (re-send with the key, look it up, or hold it in doubt)",
    "after_commit_before_next_batch": "the batch's results and offset are committed (with the next batch's "
                                      "intents, for a queryable service), no call of the next batch is made yet: "
                                      "nothing may be lost or redone, and the prepared intents of calls never made "
                                      "must not block the next run",
}
#: A record already queued here, submitted again under a new correlation id (drill/schedule.py,
#: docs/generated-project.md): new work, processed again under new keys. Resubmit under the SAME
#: correlation id to have it queued once.
RESUBMITTED_RECORD = "new-work"

#: What `reset` drops in the state store (strategy.py): every table schema.sql creates.
STORE_TABLES = ("tasks", "task_inputs", "results", "intents", "schema_version")


# ----------------------------------------------------------------------- submit
def submit(ctx: Context, records: list[dict[str, Any]], *, work_ms: float = 0.0,
           correlation_id: str | None = None) -> Submitted:
    """Queue records as tasks of ``task_size`` (strategy.py: without a correlation id,
    the demo, refused on a data dir that has work; with one, new work unless redelivered)."""
    if correlation_id is None:
        return _insert_tasks(ctx, records, work_ms=work_ms, prefix="demo", correlation_id=None)
    return _insert_tasks(ctx, records, work_ms=work_ms, prefix=f"task-{correlation.arrival_stamp()}-00000",
                         correlation_id=correlation_id)


def submit_many(ctx: Context, store: Store, submissions: list[tuple[str, list[dict[str, Any]], float]]
                ) -> list[Submitted]:
    """Several submissions (correlation id, records, work_ms) in ONE transaction on ``store``
    (strategy.py): each deduped by its own id, all kept or none."""
    with store.transaction():
        # One created_at for the batch: claims go by (created_at, task_id), and the task ids
        # follow the order the submissions arrived in (correlation.arrival_stamp).
        stamp, now, added = correlation.arrival_stamp(), time.time(), {}
        for n in correlation.in_lock_order(submissions):
            cid, records, work_ms = submissions[n]
            added[n] = _add(ctx, store, records, work_ms=work_ms, prefix=f"task-{stamp}-{n:05d}",
                            correlation_id=cid, now=now)
        return [added[n] for n in range(len(submissions))]


def _insert_tasks(ctx: Context, records: list[dict[str, Any]], *, work_ms: float, prefix: str,
                  correlation_id: str | None) -> Submitted:
    """Split records into tasks; each task's input (the payload) is stored beside it, once."""
    store = open_store(ctx, create=True)
    try:
        with store.transaction():
            return _add(ctx, store, records, work_ms=work_ms, prefix=prefix, correlation_id=correlation_id)
    finally:
        store.close()


def _add(ctx: Context, store: Store, records: list[dict[str, Any]], *, work_ms: float, prefix: str,
         correlation_id: str | None, now: float | None = None) -> Submitted:
    """Inside the caller's transaction: the tasks of one submission, or the existing ones."""
    if correlation_id is None and store.one(COUNT_TASKS)["n"]:
        raise JobError(workload_held(store, ctx.data_dir))
    if correlation_id is not None:
        existing = correlation.claim(store, correlation_id, len(records))
        if existing is not None:  # a redelivery: keep the tasks and their checkpoints
            return Submitted(existing, added=False)
    now, ids, size = now or time.time(), [], ctx.settings.task_size
    initial = CHECKPOINT.dumps(job.INITIAL_STATE)
    for n, first in enumerate(range(0, len(records), size)):
        chunk = records[first:first + size]
        if correlation_id is None:
            task_id, corr = f"{prefix}-{n:05d}", f"{prefix}:{first}-{first + len(chunk) - 1}"
        else:
            # Unique (the prefix is the submission's arrival stamp), in arrival order; the
            # submissions table finds these tasks again, and the column stays unique.
            task_id = f"{prefix}-{n:05d}"
            corr = task_id
        payload = PAYLOAD.dumps({"records": chunk, "work_ms": work_ms})
        store.execute(INSERT_TASK, (task_id, corr, len(chunk), initial, now, now))
        store.execute(INSERT_INPUT, (task_id, payload))
        ids.append(task_id)
    if correlation_id is not None:
        correlation.record(store, correlation_id, ids)
    return Submitted(ids)


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


def stored_results(ctx: Context) -> list[tuple[str, Any]]:
    """Every results row: (record_id, output)."""
    store = open_store(ctx)
    try:
        return [(row["record_id"], json.loads(row["output"])) for row in store.all(SELECT_RESULTS)]
    finally:
        store.close()


def held_claims(ctx: Context, store: Any = None) -> list[dict[str, Any]]:
    """Read-only, for the drill: every claim held right now, ``{"what", "owner"}`` (a worker
    that stopped must hold none: drill/witness.py reads this after each run ends)."""
    return held_rows(ctx, open_store, SELECT_HELD, "task", store=store)


def stored_final_states(ctx: Context) -> list[dict[str, Any]]:
    """Per task: its input's record ids and the running state saved at its offset."""
    store = open_store(ctx)
    try:
        rows = store.all(SELECT_FINAL_STATES)
    finally:
        store.close()
    return [{"task_id": row["task_id"],
             "record_ids": ([str(r.get("record_id")) for r in PAYLOAD.loads(row["payload"])["records"]]
                            if row["payload"] is not None else []),  # no input row: the drill reports it
             "state": CHECKPOINT.loads(row["checkpoint_data"]) if row["checkpoint_data"] else None}
            for row in rows]


# ------------------------------------------------------------------ queue input
# input_source=rabbitmq: `run` consumes a queue whose messages feed submit (runtime/amqp_input/);
# its critical windows join this strategy's, and the drill publishes its input there.
if INPUT_SOURCE == "rabbitmq":
    from ..runtime import amqp_input

    WINDOWS = {**WINDOWS, **amqp_input.WINDOWS}
    drill_submit, drill_report = amqp_input.drill_submit, amqp_input.drill_report
    drill_republish = amqp_input.drill_republish
