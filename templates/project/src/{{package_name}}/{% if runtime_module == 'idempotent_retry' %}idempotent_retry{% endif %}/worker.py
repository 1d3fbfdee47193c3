"""The idempotent-retry strategy's worker: claim a task, run it whole, commit its effect with its dedupe record.

The retry policy is declared once here (``retry_policy``): transient errors only, exponential
backoff with full jitter, a bounded number of attempts.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from tenacity import (RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, stop_any,
                      wait_random_exponential)

from .. import job
from ..runtime import effects, faults, metrics
from ..runtime.errors import BadRecord, CorruptStateError, StateVersionError, TransientError
from ..runtime.external import ExternalService
from ..runtime.owners import owner_gone, owner_id, ours_first
from ..runtime.shutdown import Shutdown
from ..runtime.store import Store
from ..runtime.strategy import Context
from .tables import (CLAIM_TASK, COMPLETE_TASK, FAIL_TASK, INSERT_PROCESSED, INSERT_RESULT, RELEASE_TASK,
                     SELECT_NEXT_PENDING, SELECT_PROCESSED, SELECT_RUNNING, SELECT_TASK, TASK_INPUT)


#: Any constant: the key of the PostgreSQL advisory lock that lets one worker at a time claim a task.
CLAIM_LOCK_KEY = 7_303_117_042


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
            self._one_claim_at_a_time()
            return self._claim_in_transaction()

    def _one_claim_at_a_time(self) -> None:
        """First in a transaction that claims: claims one at a time, as SQLite's BEGIN IMMEDIATE makes
        them. On PostgreSQL each statement after the lock reads what the claims before it committed
        (READ COMMITTED), so the business-key guard of SELECT_NEXT_PENDING sees a task of the same key
        that another worker has just taken. Taken before any row is written: a claim that waits on a
        row never holds up a transaction that waits for the lock."""
        if self.store.dialect == "postgresql":
            self.store.execute("SELECT pg_advisory_xact_lock(?)", (CLAIM_LOCK_KEY,))

    def _claim_in_transaction(self, tries: int = 5) -> dict[str, Any] | None:
        now = time.time()
        candidates = ours_first([row for row in self.store.all(SELECT_RUNNING)
                                 if (row["owner"] == self.owner and row["instance_id"] != self.instance_id)  # pid reused
                                 or owner_gone(row["owner"], row["updated_at"], lease_s=self.ctx.settings.lease_s,
                                               now=now)], self.owner, self.instance_id)
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
            # Most tasks succeed at once: their one attempt runs outside tenacity (whose loop costs
            # more than a short task). A transient failure enters the policy as its attempt 1,
            # replayed there without calling again, so the numbering, waits and stop are the policy's.
            failed: TransientError | None = None
            try:
                self.attempt(task, record, work_ms, retries)
            except TransientError as first:
                failed = first
            if failed is not None:
                for attempt in retry_policy(stop_early=lambda: self.shutdown.requested, sleep=self.sleep,
                                            on_retry=on_retry):
                    with attempt:
                        if failed is not None:
                            replay, failed = failed, None
                            raise replay
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
        claim_next = self.claim_next and not self.shutdown.requested
        with self.store.transaction():
            if claim_next:
                self._one_claim_at_a_time()
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
            claimed = self._claim_in_transaction() if claim_next else None
        faults.window("after_commit_before_next_task")
        metrics.records_done(1)  # runtime/metrics.py
        self.next_task = claimed

    def fail(self, task: dict[str, Any], reason: str, retries: int) -> None:
        self.log(f"{task['task_id']} failed: {reason}")
        with self.store.transaction():
            self.store.execute(FAIL_TASK, (retries, reason, time.time(), task["task_id"], task["version"]))

    def release(self, task: dict[str, Any]) -> None:
        with self.store.transaction():
            self.store.execute(RELEASE_TASK, (time.time(), task["task_id"], task["version"]))
