"""The nemesis's resubmissions (schedule.py's resubmit-same and resubmit-new): part of the input
submitted again, as a producer, a user or a client retrying would, and what it was answered. A
part of the Nemesis (nemesis.py), apart because it is a responsibility of its own: what to submit
again, and when it can tell the strategy's promise apart from luck."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..runtime import submission
from ..runtime.errors import JobError, StoreUnavailable, TransientError
from ..runtime.external import ExternalService
from ..runtime.service_log import calls_by
from ..runtime.strategy import Context
from .history import History
from .progress import Progress
from .workers import Pool

#: The first call of a record that came again before it was done is answered this late (resubmit-new
#: pending): long beside a call's few milliseconds, short beside any lease.
SLOW_ANSWER_S = 0.5


class Resubmitting:
    """Mixed into Nemesis, whose state it reads (set in Nemesis.__init__)."""

    ctx: Context
    pool: Pool
    progress: Progress
    history: History
    strategy: Any
    records: list[dict[str, Any]]
    input_id: str | None
    work_ms: float
    last_queued: tuple[float, int] | None
    done_at_outage_end: int
    done_at_first_call: dict[int, int]
    expected: Callable[[], int]

    # --------------------------------------------------------------- resubmitting
    def _resubmit_same(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        chunk = self.records[event["first"]:event["first"] + event["count"]]
        republish = getattr(self.strategy, "drill_republish", None)
        if republish is not None:  # a queue: the same message published again
            try:
                published = republish(self.ctx, self.records, event["first"], event["count"], self.work_ms)
            except TransientError:
                return None  # the broker is away (restarting): later
            self.history.add("submit", event=event["n"], correlation_id=",".join(published), records=len(chunk),
                             outcome="published", same=True, message=None, done=done,
                             same_ids=[str(r["record_id"]) for r in chunk])
            self.last_queued = (time.monotonic(), len(chunk))
            return {"outcome": "published"}
        return self._submit(event, chunk, self.input_id, done, same=True)

    def _resubmit_new(self, event: dict[str, Any], done: int) -> dict[str, Any] | None:
        try:
            stored = self.strategy.stored_results(self.ctx) or []
        except JobError:
            return None  # the store is busy or away: later
        finished = {rid for rid, _ in stored}
        if event.get("pending"):
            # Records not done yet, the last queued first. Where they are refused (a record the store
            # holds), they must be refused although not done. Where a business key dedupes them: the
            # first of them is the input's last, so its second task is next in the queue once a worker
            # takes the first (two workers then hold one business key at once unless the claim keeps a
            # second task waiting).
            refused = getattr(self.strategy, "RESUBMITTED_RECORD", "new-work") == "refused"
            if not refused and len(self.pool.alive()) < 2:
                return None  # the point is two live workers: later
            chunk = [r for r in reversed(self.records) if str(r["record_id"]) not in finished][:event["count"]]
            if not chunk:
                return None  # everything done: later (the runner extends the work)
            if refused:
                return self._submit(event, chunk, f"drill-resubmit-{event['n']}", done, same=False, pending=True)
            # Its first call is answered late, as a loaded service answers: the first task is in flight
            # a while when the second is next in the queue, and a claim that lets the second run then
            # sends the call a second time (a correct one keeps the second waiting: no harm, a pause).
            service = ExternalService(self.ctx.data_dir)
            try:
                service.answer_slowly(str(chunk[0]["record_id"]), SLOW_ANSWER_S)
            finally:
                service.close()
            return self._submit(event, chunk, f"drill-resubmit-{event['n']}", done, same=False, pending=True)
        chunk = [r for r in self.records if str(r["record_id"]) in finished]
        if event.get("latest"):
            # Only records done since the newest worker made its first call (and since the store came
            # back): answered by a worker that did them itself, or saw them done after it started. Its
            # first call, not its spawn: a worker loads what it loads at start before it calls, and a
            # fast run does many records while an interpreter starts. With no worker left, later: the
            # runner extends the work, and its workers answer it.
            started = self._newest_called()
            if started is None:
                return None  # nobody alive, or the newest one still starting up: later
            done = self.progress.applied()  # now, not the loop's reading: the records below are drawn from it
            since = max(started, self.done_at_outage_end)
            by_id = {str(r["record_id"]): r for r in chunk}
            chunk = [by_id[rid] for rid in self.progress.latest_records(since) if rid in by_id]
        chunk = chunk[:event["count"]]
        if not chunk:
            return None  # nothing done yet (since the newest worker started): later
        return self._submit(event, chunk, f"drill-resubmit-{event['n']}", done, same=False)

    def _newest_called(self) -> int | None:
        """The effects applied when the newest live worker was first seen calling; None while it has
        not called yet (or no worker is alive)."""
        alive = self.pool.alive()
        if not alive:
            return None
        pid = self.pool.procs[max(alive, key=lambda slot: self.pool.spawned_at[slot])].pid  # type: ignore[union-attr]
        if pid not in self.done_at_first_call:
            if not calls_by(self.ctx.data_dir, pid):
                return None
            self.done_at_first_call[pid] = self.progress.applied()
        return self.done_at_first_call[pid]

    def _submit(self, event: dict[str, Any], chunk: list[dict[str, Any]], correlation_id: str | None, done: int,
                *, same: bool, pending: bool = False) -> dict[str, Any] | None:
        message = None
        calls_before = self.progress.calls()  # what the service was asked before the records came again
        try:
            answer = submission.queue(self.ctx, chunk, correlation_id=correlation_id, work_ms=self.work_ms)
            outcome = "added" if answer.added else "repeat"
            if answer.added:
                self.last_queued = (time.monotonic(), len(chunk))
        except StoreUnavailable:
            return None  # not an answer: the store is away (an outage); later
        except JobError as exc:
            outcome, message = "refused", str(exc)
        # A same-id resubmission's records are named apart (same_ids): the resubmission's figures read
        # record_ids only for a new correlation id; claims.py leaves both kinds to `resubmission`.
        done_again = {"same_ids": [str(r["record_id"]) for r in chunk]} if same else {
            "record_ids": [str(r["record_id"]) for r in chunk], "calls_before": calls_before,
            **({"pending": True} if pending else {})}
        self.history.add("submit", event=event["n"], correlation_id=correlation_id, records=len(chunk),
                         first=str(chunk[0]["record_id"]), same=same, outcome=outcome, message=message, done=done,
                         **done_again)
        return {"outcome": outcome}
