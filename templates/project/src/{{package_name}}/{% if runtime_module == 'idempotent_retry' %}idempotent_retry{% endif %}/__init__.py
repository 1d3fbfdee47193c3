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
task with exponential backoff and jitter, a bounded number of times (``RETRY``
below, declared once); a permanent error (``BadRecord``) fails the task at once
with its reason. The task row carries an optimistic ``version``: a worker
commits only if nobody took the task over since it claimed it
(``UPDATE ... WHERE version = ?``; 0 rows → the attempt is rolled back).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenacity import (RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, stop_any,
                      wait_random_exponential)

from ..runtime import correlation, effects, faults
from .. import job
from ..runtime.errors import BadRecord, CorruptStateError, JobError, StateVersionError, TransientError
from ..runtime.external import ExternalService
from ..runtime.owners import owner_gone, owner_id
from ..runtime.shutdown import Shutdown
from ..runtime.state import StateCodec
from ..settings import INPUT_SOURCE
from ..runtime.store import Store, apply_schema, connect, workload_held
from ..runtime.strategy import Context, Submitted, percent, run_worker

NAME = "idempotent-retry"
#: Tasks are claimed one at a time with a compare-and-set on their version, so
#: any number of `run` processes (on PostgreSQL: on any number of machines) share them.
MULTI_WORKER = True
#: A task is re-run whole after a kill: the one call in flight may be sent again (with the
#: same business key, so an idempotent service answers 'duplicate'), never more; a queryable
#: service is asked first and a plain call is in doubt instead (effects.py).
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

#: What `reset` drops in the state store (strategy.py): every table schema.sql creates.
STORE_TABLES = ("tasks", "processed", "results", "schema_version")

SCHEMA_FILE = Path(__file__).parent.with_name("schema.sql")  # src/<package>/schema.sql
SCHEMA_VERSION = 2
#: MIGRATIONS[v] turns schema version v - 1 into v.
MIGRATIONS: dict[int, str] = {
    2: correlation.TABLE,  # submissions by correlation id
}

#: A task's input, stored with the task: recovery never depends on a queue.
TASK_INPUT = StateCodec("task-input", 1)

# ======================================================================= policy
# The retry policy, declared once. Only transient errors are retried; the wait
# before retry n is uniform in [0, min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2**(n-1))]
# ("full jitter"): exponential, so a struggling service gets room to recover,
# and random, so many workers that failed together do not retry together.
MAX_ATTEMPTS = 10        # bounded: then the task fails with the last error as its reason
BACKOFF_FIRST_S = 0.005  # demo values; a real remote API wants e.g. 0.2 s ... 30 s
BACKOFF_MAX_S = 1.0


def retry_policy(*, stop_early: Callable[[], bool] = lambda: False,
                 sleep: Callable[[float], None] = time.sleep,
                 on_retry: Callable[[RetryCallState], None] | None = None) -> Retrying:
    """The tenacity policy for one task. ``stop_early`` (a shutdown) ends the retries."""
    return Retrying(
        retry=retry_if_exception_type(TransientError),
        stop=stop_any(stop_after_attempt(MAX_ATTEMPTS), lambda state: stop_early()),
        wait=wait_random_exponential(multiplier=BACKOFF_FIRST_S, max=BACKOFF_MAX_S),
        sleep=sleep,
        before_sleep=on_retry,
        reraise=True,  # the caller sees the TransientError itself, not a RetryError
    )


class VersionConflict(Exception):
    """The task's version moved since we claimed it: another worker owns it now."""


# -------------------------------------------------------------------------- SQL
INSERT_TASK = """
INSERT INTO tasks (task_id, business_key, input, status, version, attempts, created_at, updated_at)
VALUES (?, ?, ?, 'pending', 0, 0, ?, ?)"""

COUNT_TASKS = "SELECT COUNT(*) AS n FROM tasks"

# Running tasks: their holder may be dead (kill -9) and the task must be re-run.
SELECT_RUNNING = "SELECT task_id, version, owner, instance_id, updated_at FROM tasks WHERE status = 'running'"

SELECT_NEXT_PENDING = """
SELECT task_id, version FROM tasks WHERE status = 'pending' ORDER BY task_id LIMIT 1"""

# Optimistic claim: of two workers that read the same version, exactly one changes the row.
CLAIM_TASK = """
UPDATE tasks SET status = 'running', version = version + 1, owner = ?, instance_id = ?,
                 attempts = attempts + 1, claimed_at = ?, updated_at = ?
WHERE task_id = ? AND version = ?"""

SELECT_TASK = "SELECT * FROM tasks WHERE task_id = ?"

# The dedupe record of a business key that already took effect.
SELECT_PROCESSED = "SELECT task_id, result FROM processed WHERE business_key = ?"

# ON CONFLICT DO NOTHING + rowcount: portable "was this key new?" (0 rows = a
# concurrent task with the same key committed first).
INSERT_PROCESSED = """
INSERT INTO processed (business_key, task_id, result, processed_at) VALUES (?, ?, ?, ?)
ON CONFLICT (business_key) DO NOTHING"""

INSERT_RESULT = "INSERT INTO results (task_id, business_key, output, created_at) VALUES (?, ?, ?, ?)"

# The optimistic-version update: the task is ours only if its version is still
# the one our claim wrote. 0 rows → someone took it over → roll everything back.
COMPLETE_TASK = """
UPDATE tasks SET status = 'done', version = version + 1, attempts = attempts + ?, error = NULL, updated_at = ?
WHERE task_id = ? AND version = ?"""

FAIL_TASK = """
UPDATE tasks SET status = 'failed', version = version + 1, attempts = attempts + ?, error = ?, updated_at = ?
WHERE task_id = ? AND version = ?"""

# Graceful stop while a task waits for a retry: hand it back untouched.
RELEASE_TASK = """
UPDATE tasks SET status = 'pending', version = version + 1, owner = NULL, updated_at = ?
WHERE task_id = ? AND version = ?"""

SELECT_COUNTS = """
SELECT status, COUNT(*) AS n, SUM(attempts) AS attempts, MIN(claimed_at) AS first_claim, MAX(updated_at) AS last
FROM tasks GROUP BY status"""

SELECT_UNFINISHED = """
SELECT task_id, status, attempts, error, updated_at FROM tasks
WHERE status IN ('running', 'failed') ORDER BY task_id LIMIT 20"""


# ---------------------------------------------------------------------- storage
def open_store(ctx: Context, *, create: bool = False) -> Store:
    store = connect(ctx.data_dir, ctx.settings, create=create)
    apply_schema(store, SCHEMA_FILE.read_text(encoding="utf-8"), SCHEMA_VERSION, MIGRATIONS)
    return store


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
        return [_add(ctx, store, records, work_ms, cid) for cid, records, work_ms in submissions]


def _add(ctx: Context, store: Store, records: list[dict[str, Any]], work_ms: float,
         correlation_id: str | None) -> Submitted:
    """Inside the caller's transaction: the tasks of one submission, or the existing ones."""
    if correlation_id is None:
        if store.one(COUNT_TASKS)["n"]:
            raise JobError(workload_held(store, ctx.data_dir))
        prefix = "task"
    else:
        existing = correlation.claim(store, correlation_id, len(records))
        if existing is not None:  # a redelivery: its tasks exist already
            return Submitted(existing, added=False)
        # Unique per submission; claims go by task id, so a submission's tasks stay in order.
        prefix = f"sub-{uuid.uuid4().hex[:12]}"
    now, ids = time.time(), []
    for n, record in enumerate(records):
        task_id = f"{prefix}-{n:07d}"
        store.execute(INSERT_TASK, (task_id, business_key(record),
                                    TASK_INPUT.dumps({"record": record, "work_ms": work_ms}), now, now))
        ids.append(task_id)
    if correlation_id is not None:
        correlation.record(store, correlation_id, ids)
    return Submitted(ids)


# -------------------------------------------------------------------------- run
class Worker:
    def __init__(self, ctx: Context, store: Store, external: ExternalService, shutdown: Shutdown, *,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.ctx, self.store, self.external, self.shutdown = ctx, store, external, shutdown
        self.effects = effects.Effects(external, ctx.data_dir, ctx.settings)
        self.sleep = sleep
        self.instance_id = uuid.uuid4().hex
        self.owner = owner_id()
        self.processed = 0
        #: Claim the next task in the transaction that completes this one (one commit per task).
        self.claim_next = False
        #: The task so claimed, if any: run next.
        self.next_task: dict[str, Any] | None = None

    def log(self, message: str) -> None:
        print(f"[{self.owner} {self.instance_id[:8]}] {message}", file=sys.stderr, flush=True)

    def run(self, limit: int | None = None) -> int:
        while not self.shutdown.requested and (limit is None or self.processed < limit):
            task, self.next_task = self.next_task or self.claim(), None
            if task is None:
                return 0
            self.claim_next = limit is None or self.processed + 1 < limit
            self.process(task)
            self.processed += 1
        if self.next_task is not None:  # claimed with the last completion, never started
            self.release(self.next_task)
            self.next_task = None
        if self.shutdown.requested:
            self.log(f"{self.shutdown.signal_name}: the task in hand is committed, exiting 0")
        return 0

    # ---- claiming
    def claim(self) -> dict[str, Any] | None:
        """A task whose holder died (re-run whole), else the next pending one."""
        with self.store.transaction():
            return self._claim_in_transaction()

    def _claim_in_transaction(self, tries: int = 5) -> dict[str, Any] | None:
        now = time.time()
        candidates = [row for row in self.store.all(SELECT_RUNNING)
                      if (row["owner"] == self.owner and row["instance_id"] != self.instance_id)  # pid reused
                      or owner_gone(row["owner"], row["updated_at"], lease_s=self.ctx.settings.lease_s, now=now)]
        pending = self.store.one(SELECT_NEXT_PENDING)
        if pending is not None:
            candidates.append(pending)
        for row in candidates:
            if self.store.execute(CLAIM_TASK, (self.owner, self.instance_id, now, now,
                                               row["task_id"], row["version"])).rowcount == 1:
                if "owner" in row:
                    self.log(f"re-running {row['task_id']} whole: its holder {row['owner']} is gone")
                return self.store.one(SELECT_TASK, (row["task_id"],))
        if pending is not None and tries > 1:
            # Another worker claimed that one between our read and our update (PostgreSQL lets
            # both read it): look again, instead of leaving as if no work were left.
            return self._claim_in_transaction(tries - 1)
        return None

    # ---- one task
    def process(self, task: dict[str, Any]) -> None:
        """Run the task under the retry policy; record success, failure or hand-back."""
        retries = 0

        def on_retry(state: RetryCallState) -> None:
            nonlocal retries
            retries += 1
            self.log(f"{task['task_id']}: attempt {state.attempt_number} failed "
                     f"({state.outcome.exception()}); retrying in {state.upcoming_sleep:.3f} s")

        try:
            data = TASK_INPUT.loads(task["input"])
            record, work_ms = data["record"], float(data.get("work_ms", 0.0))
        except (CorruptStateError, StateVersionError, KeyError, TypeError, ValueError) as exc:
            self.fail(task, f"unreadable task input: {exc}", retries)
            return
        try:
            for attempt in retry_policy(stop_early=lambda: self.shutdown.requested, sleep=self.sleep,
                                        on_retry=on_retry):
                with attempt:
                    self.attempt(task, record, work_ms, retries)
        except TransientError as exc:
            if self.shutdown.requested:  # stopping between retries: another start re-runs it
                self.release(task)
            else:
                self.fail(task, f"gave up after {retries + 1} attempts: {exc}", retries)
        except BadRecord as exc:  # permanent: retrying cannot help
            self.fail(task, str(exc), retries)
        except VersionConflict:
            self.log(f"{task['task_id']} was taken over by another worker; our attempt was rolled back")

    def attempt(self, task: dict[str, Any], record: dict[str, Any], work_ms: float, retries: int) -> None:
        """One whole run of the task: the same key every time, so a rerun is harmless."""
        key = task["business_key"]
        # Dedupe first: if this business key already took effect (an earlier task
        # with the same key), do not even call out.
        seen = self.store.one(SELECT_PROCESSED, (key,))
        if seen is not None:
            self.complete(task, key, None, retries, duplicate_of=seen["task_id"])
            return

        def effect(payload: Any, step: str = "") -> dict[str, Any]:
            # The external call carries the business key. A task claimed more than once was
            # re-run (its claim, committed before the call, is the intent): its call may have
            # got through, and effects.py applies the rule of the service's kind.
            return self.effects.call(str(record.get("record_id")), step, key + (f"/{step}" if step else ""),
                                     payload, recovering=task["attempts"] > 1)

        output = job.process_record(record, effect, work_ms=work_ms)
        faults.window("after_call_before_commit")
        self.complete(task, key, output, retries)

    def complete(self, task: dict[str, Any], key: str, output: dict[str, Any] | None, retries: int, *,
                 duplicate_of: str | None = None) -> None:
        """The effect, its dedupe record and the task's status: one transaction, or nothing."""
        with self.store.transaction():
            now = time.time()
            if duplicate_of is None:
                result = json.dumps(output)
                if self.store.execute(INSERT_PROCESSED, (key, task["task_id"], result, now)).rowcount == 1:
                    self.store.execute(INSERT_RESULT, (task["task_id"], key, result, now))
            if self.store.execute(COMPLETE_TASK, (retries, now, task["task_id"], task["version"])).rowcount != 1:
                raise VersionConflict(task["task_id"])  # rolls back the dedupe record and the result
            # The next task is claimed in this same commit: one fsync per task, not two.
            # (The claim needs no commit of its own before the call: after a kill the task
            # is re-run whole either way, and the business key makes the rerun harmless.)
            claimed = self._claim_in_transaction() if self.claim_next and not self.shutdown.requested else None
        faults.window("after_commit_before_next_task")
        self.next_task = claimed

    def fail(self, task: dict[str, Any], reason: str, retries: int) -> None:
        self.log(f"{task['task_id']} failed: {reason}")
        with self.store.transaction():
            self.store.execute(FAIL_TASK, (retries, reason, time.time(), task["task_id"], task["version"]))

    def release(self, task: dict[str, Any]) -> None:
        with self.store.transaction():
            self.store.execute(RELEASE_TASK, (time.time(), task["task_id"], task["version"]))


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
SELECT_RESULTS = """
SELECT t.input, r.output FROM results r JOIN tasks t ON t.task_id = r.task_id ORDER BY r.task_id"""


def stored_results(ctx: Context) -> list[tuple[str, Any]]:
    """Every results row, named by the record of its task's input."""
    store = open_store(ctx)
    try:
        rows = store.all(SELECT_RESULTS)
    finally:
        store.close()
    return [(str(TASK_INPUT.loads(row["input"])["record"].get("record_id")), json.loads(row["output"]))
            for row in rows]


def stored_final_states(ctx: Context) -> None:
    """None: one record per task, so no running state is carried across records."""
    return None


# ------------------------------------------------------------------ queue input
# input_source=rabbitmq: `run` consumes a queue whose messages feed submit (amqp_input.py);
# its critical windows join this strategy's, and the drill publishes its input there.
if INPUT_SOURCE == "rabbitmq":
    from ..runtime import amqp_input

    WINDOWS = {**WINDOWS, **amqp_input.WINDOWS}
    drill_submit, drill_report = amqp_input.drill_submit, amqp_input.drill_report
