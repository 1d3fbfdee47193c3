"""Event sourcing, the streams: a ``Task`` per task (its records processed) and, in the
idempotent variant, a ``Payment`` per idempotency key (the first result of a command).

Aggregates' mutators compute from the event only: replaying a stream never calls out.
"""

from __future__ import annotations

import sys
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event
from eventsourcing.utils import register_topic

from .. import job


def stream_id(task_id: str) -> UUID:
    """A stream id derived from the task id: every process finds the same stream."""
    return uuid5(NAMESPACE_URL, f"continuity-task:{task_id}")


class Task(Aggregate):
    """One stream per task. Methods decorated with @event, and RecordProcessed's
    ``apply``, are the mutators: they run when the event is created AND on every
    replay, so they compute from the event only (no I/O, no clock, no external call)."""

    @staticmethod
    def create_id(task_id: str) -> UUID:
        return stream_id(task_id)

    @event("Started")
    def __init__(self, task_id: str, total: int) -> None:
        self.task_id, self.total = task_id, total
        self.next_seq, self.running, self.failed = 0, dict(job.INITIAL_STATE), None

    class RecordProcessed(Aggregate.Event):
        """One record processed. The hot path (one event per record), so this event class is
        written out rather than made by ``@event`` from the method: the decorator's per-call
        work (the call's arguments matched against the method's signature on the way in, the
        event's fields matched against it again to call the body) halved the CPU time of
        making an event (15 -> 7 us, the benchmarks' append workload, 2026-12-02).
        Same topic (``Task.RecordProcessed``) and the same fields IN THE SAME ORDER as the
        class ``@event`` made, so the stored bytes are identical and stores written before
        read unchanged: keep them so.

        `effects`: what job.process_record asked effect() to do, performed later by the
        effects subscriber. `key`: the command's idempotency key (ledger variant)."""

        seq: int
        record_id: str
        output: dict
        effects: list
        key: str | None = None

        def apply(self, task: Task) -> None:  # the mutator, as an @event method's body
            task.next_seq = self.seq + 1
            task.running = job.fold(task.running, self.output)  # the job's running state (job.py's fold: pure)

    def record_processed(self, seq: int, record_id: str, output: dict, effects: list,
                         key: str | None = None) -> None:
        self.trigger_event(self.RecordProcessed, seq=seq, record_id=record_id, output=output, effects=effects,
                           key=key)

    @event("Failed")
    def fail(self, reason: str) -> None:
        self.failed = reason

    def state(self) -> dict[str, Any]:
        """What a rebuild must reproduce (compared by tests and `rebuild`)."""
        return {"task_id": self.task_id, "total": self.total, "next_seq": self.next_seq,
                "running": self.running, "failed": self.failed, "version": self.version}


class Payment(Aggregate):
    """Idempotent variant: one stream per idempotency key, holding the first result."""

    @staticmethod
    def create_id(key: str) -> UUID:
        return uuid5(NAMESPACE_URL, f"continuity-payment:{key}")

    @event("Accepted")
    def __init__(self, key: str, request_hash: str, result: dict, task_id: str, seq: int) -> None:
        self.key, self.request_hash, self.result = key, request_hash, result
        self.task_id, self.seq = task_id, seq


#: Releases before the package was split into folders kept these classes in ``<package>.es_store``,
#: and a stored event or snapshot names its class by that topic: an event store such a release
#: wrote resolves them here (``drill --upgrade-from 1`` continues one).
register_topic(f"{__package__.rpartition('.')[0]}.es_store", sys.modules[__name__])
