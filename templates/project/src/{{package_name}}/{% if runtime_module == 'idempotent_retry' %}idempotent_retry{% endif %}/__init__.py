"""Idempotent retry: a task is re-run whole; a business unique key makes the rerun harmless.

The recovery point (the three questions):

* **Where** — nowhere but the dedupe record: a row of ``processed`` keyed by the
  task's business unique key, committed in the SAME transaction as the task's
  effect (its ``results`` row) and the task's ``done`` status (schema.sql).
* **How often** — once per task, when its effect commits. A task is short (one
  record here): after a crash or a failure it is simply run again from the start.
* **No duplicates, no omissions** — the external call carries the business key:
  an idempotent service applies it once however often it is repeated; a
  queryable one is asked by that key before a re-run calls again; a plain one
  cannot be asked, so the re-run's call is in doubt (effects.py). The local
  effect commits only together with its dedupe record, so it is written once.

Failures: a transient error (``TransientError``: a timeout, a 503) re-runs the
task with exponential backoff and jitter, a bounded number of times (``retry_policy``
in worker.py, declared once); a permanent error (``BadRecord``) fails the task at once
with its reason. The task row carries an optimistic ``version``: a worker
commits only if nobody took the task over since it claimed it
(``UPDATE ... WHERE version = ?``; 0 rows → the attempt is rolled back).

This module is the interface ``strategy.load()`` imports (submit, run, status, what
the run stored) and ``business_key``; ``worker.py`` holds the retry policy and the
worker, ``tables.py`` the schema version, the JSON of a task and the SQL.
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
from ..settings import INPUT_SOURCE
from .tables import (COUNT_TASKS, INSERT_TASK, SELECT_COUNTS, SELECT_HELD, SELECT_RESULTS, SELECT_UNFINISHED,
                     TASK_INPUT, open_store)
from .worker import MAX_ATTEMPTS, Worker

NAME = "idempotent-retry"
#: Tasks are claimed one at a time with a compare-and-set on their version, so
#: any number of `run` processes (on PostgreSQL: on any number of machines) share them.
MULTI_WORKER = True
#: A task is re-run whole after a kill: the one call in flight may be sent again (with the
#: same business key, so an idempotent service answers 'duplicate'), never more; a queryable
#: service is asked first and a plain call is in doubt instead (effects.py).
#: A call refused this many times in a row fails its unit (the drill's long refusal burst stays below).
CALL_ATTEMPTS = MAX_ATTEMPTS
REDONE_CALLS_PER_KILL = effects.promise(len(job.STEPS))
#: The critical windows (drill --aim): name -> what a kill there proves.
WINDOWS = {
    "after_call_before_commit": "the task's external call went through, the commit that marks it done (dedupe "
                                "record, result, status) has not happened: the task is re-run whole and its call "
                                "treated by the service's kind: re-sent with the SAME business key (idempotent), "
                                "looked up first (queryable), or held in doubt (plain)",
    "after_commit_before_next_task": "the task is committed done (and the next one claimed in that commit), nothing "
                                     "of the next task is called yet: the done task is not re-run, the claimed one is",
}
#: A record already queued here, submitted again under a new correlation id (drill/schedule.py,
#: docs/generated-project.md): queued, but its business key makes the new task a no-op (its
#: effect is not applied again, its result not stored again).
RESUBMITTED_RECORD = "deduped"

#: What `reset` drops in the state store (strategy.py): every table schema.sql creates.
STORE_TABLES = ("tasks", "processed", "results", "schema_version")


def business_key(record: dict[str, Any]) -> str:
    """The task's business unique key (think: order number + payment serial).

    It must come from the business data, never from the attempt: every rerun of
    the task, and a resubmission of the same record, must produce the same key.
    """
    return f"demo-payment/{record.get('record_id')}"


# ----------------------------------------------------------------------- submit
def submit(ctx: Context, records: list[dict[str, Any]], *, work_ms: float = 0.0,
           correlation_id: str | None = None) -> Submitted:
    """One task per record. Without a correlation id (the demo) refuses a data directory
    that already holds a workload; with one, adds the records unless that id was seen."""
    store = open_store(ctx, create=True)
    try:
        with store.transaction():
            return _add(ctx, store, records, work_ms, correlation_id)
    finally:
        store.close()


def submit_many(ctx: Context, store: Store, submissions: list[tuple[str, list[dict[str, Any]], float]]
                ) -> list[Submitted]:
    """Several submissions (correlation id, records, work_ms) in ONE transaction on ``store``
    (strategy.py): each deduped by its own id, all kept or none."""
    with store.transaction():
        stamp, added = correlation.arrival_stamp(), {}
        for n in correlation.in_lock_order(submissions):
            cid, records, work_ms = submissions[n]
            added[n] = _add(ctx, store, records, work_ms, cid, prefix=f"sub-{stamp}-{n:05d}")
        return [added[n] for n in range(len(submissions))]


def _add(ctx: Context, store: Store, records: list[dict[str, Any]], work_ms: float,
         correlation_id: str | None, prefix: str | None = None) -> Submitted:
    """Inside the caller's transaction: the tasks of one submission, or the existing ones."""
    if correlation_id is None:
        if store.one(COUNT_TASKS)["n"]:
            raise JobError(workload_held(store, ctx.data_dir))
        prefix = "task"
    else:
        existing = correlation.claim(store, correlation_id, len(records))
        if existing is not None:  # a redelivery: its tasks exist already
            return Submitted(existing, added=False)
        # Unique per submission and in arrival order (claims go by task id): first in, first out.
        prefix = prefix or f"sub-{correlation.arrival_stamp()}-00000"
    now, ids = time.time(), []
    for n, record in enumerate(records):
        task_id = f"{prefix}-{n:07d}"
        store.execute(INSERT_TASK, (task_id, business_key(record),
                                    TASK_INPUT.dumps({"record": record, "work_ms": work_ms}), now, now))
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
        groups = {row["status"]: row for row in store.all(SELECT_COUNTS)}
        unfinished = store.all(SELECT_UNFINISHED)
    finally:
        store.close()
    count = {s: int(groups[s]["n"]) if s in groups else 0 for s in ("pending", "running", "done", "failed")}
    total, done = sum(count.values()), count["done"]
    now = time.time()
    finished = groups.get("done")
    first_claim = min((g["first_claim"] for g in groups.values() if g["first_claim"]), default=None)
    elapsed = (finished["last"] - first_claim) if finished and first_claim else 0
    # One summary row for all tasks (one task per record), then the running and failed ones.
    tasks = [{
        "task_id": "all", "status": "done" if done == total else "running" if count["running"] else "pending",
        "done": done, "total": total, "percent": round(percent(done, total), 1),
        "last_checkpoint_age_s": round(now - finished["last"], 3) if finished else None,
        "rate_per_s": round(done / elapsed, 1) if elapsed > 0 else None,
        "attempts": sum(int(g["attempts"] or 0) for g in groups.values()), "error": None,
    }]
    for row in unfinished:
        tasks.append({"task_id": row["task_id"], "status": row["status"], "done": 0, "total": 1, "percent": 0.0,
                      "last_checkpoint_age_s": None, "rate_per_s": None,
                      "attempts": row["attempts"], "error": row["error"]})
    return {"strategy": NAME, "total": total, "done": done, "percent": round(percent(done, total), 1),
            "failed": count["failed"], "tasks": tasks}


def expected_effects(records: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(str(r["record_id"]), step) for r in records for step in job.STEPS}


# ------------------------------------------------- what the run stored (read-only)


def stored_results(ctx: Context) -> list[tuple[str, Any]]:
    """Every results row, named by the record of its task's input."""
    store = open_store(ctx)
    try:
        rows = store.all(SELECT_RESULTS)
    finally:
        store.close()
    return [(str(TASK_INPUT.loads(row["input"])["record"].get("record_id")), json.loads(row["output"]))
            for row in rows]


def held_claims(ctx: Context, store: Any = None) -> list[dict[str, Any]]:
    """Read-only, for the drill: every claim held right now, ``{"what", "owner"}`` (a worker
    that stopped must hold none: drill/witness.py reads this after each run ends)."""
    return held_rows(ctx, open_store, SELECT_HELD, "task", store=store)


def stored_final_states(ctx: Context) -> None:
    """None: one record per task, so no running state is carried across records."""
    return None


# ------------------------------------------------------------------ queue input
# input_source=rabbitmq: `run` consumes a queue whose messages feed submit (runtime/amqp_input/);
# its critical windows join this strategy's, and the drill publishes its input there.
if INPUT_SOURCE == "rabbitmq":
    from ..runtime import amqp_input

    WINDOWS = {**WINDOWS, **amqp_input.WINDOWS}
    drill_submit, drill_report = amqp_input.drill_submit, amqp_input.drill_report
    drill_republish = amqp_input.drill_republish
