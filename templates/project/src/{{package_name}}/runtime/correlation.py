"""Which submissions a state store has taken, by correlation id.

A submission (``submit --file``, a queue message, ``submission.submit_records``) may
arrive twice: the user runs the same command again, a broker redelivers. Its
correlation id is what makes the second delivery harmless: every SQL strategy keeps
a ``submissions`` table (schema.sql; added by a migration to an older store) whose
primary key is that id.

:func:`claim` runs inside the transaction that adds the submission's work, before
anything is added. It inserts the id first (``ON CONFLICT DO NOTHING``): of two
deliveries of one submission exactly one inserts it and adds the work; the other
(on PostgreSQL it waits for the first to commit) finds the row and answers with
the task ids the first one recorded (:func:`record`, same transaction).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from .errors import JobError

#: The longest correlation id accepted (RabbitMQ allows 255 bytes; ids are usually UUIDs).
MAX_LENGTH = 200

#: The table, for a new store's schema.sql and for the migration of an older one.
TABLE = """
CREATE TABLE submissions (
    correlation_id VARCHAR(200) PRIMARY KEY,
    task_ids       TEXT         NOT NULL,
    records        INTEGER      NOT NULL,
    submitted_at   DOUBLE PRECISION NOT NULL
)"""

INSERT = """
INSERT INTO submissions (correlation_id, task_ids, records, submitted_at) VALUES (?, '[]', ?, ?)
ON CONFLICT (correlation_id) DO NOTHING"""

SELECT = "SELECT task_ids FROM submissions WHERE correlation_id = ?"

RECORD = "UPDATE submissions SET task_ids = ? WHERE correlation_id = ?"


def check(correlation_id: Any) -> str:
    """A usable correlation id (printable text, 1 to MAX_LENGTH characters), or JobError."""
    if not isinstance(correlation_id, str) or not correlation_id.strip():
        raise JobError("the correlation id must be a non-empty text")
    if len(correlation_id) > MAX_LENGTH:
        raise JobError(f"the correlation id is longer than {MAX_LENGTH} characters")
    if not correlation_id.isprintable():
        raise JobError("the correlation id holds control characters (a newline, a tab, ...)")
    return correlation_id


def claim(store: Any, correlation_id: str, records: int) -> list[str] | None:
    """Inside the submit transaction: None if the id is new (it is now taken: add the
    work and :func:`record` its task ids), else the task ids of the earlier submission."""
    check(correlation_id)
    if store.execute(INSERT, (correlation_id, records, time.time())).rowcount == 1:
        return None
    row = store.one(SELECT, (correlation_id,))
    return [str(task_id) for task_id in json.loads(row["task_ids"])] if row else []


def record(store: Any, correlation_id: str, task_ids: list[str]) -> None:
    """Inside the same transaction: the task ids a redelivery will be answered with."""
    store.execute(RECORD, (json.dumps(task_ids), correlation_id))


def arrival_stamp() -> str:
    """The start of the task ids of one submission, or of one batch of them, that sorts in the
    order they arrived: claims go by task id, so work is taken first in, first out, and a queue
    consumer's finished messages form a run from the oldest, acked in one frame (acked one by
    one, each ack waited for, they cost a queue consumer a sixth of its time at 0 ms of work).
    The random tail keeps apart two consumers' stamps of the same nanosecond."""
    return f"{time.time_ns():016x}{uuid.uuid4().hex[:6]}"


def in_lock_order(submissions: Sequence[tuple[str, Any, Any]]) -> list[int]:
    """The positions of several submissions (correlation id first), in correlation id order: the
    order their rows are locked in, so that two consumers that both hold some of the same ids (one
    cut off from the broker, its messages redelivered to the other) never wait for each other in
    a cycle. Their task ids still follow the positions (the order they arrived in)."""
    return sorted(range(len(submissions)), key=lambda i: submissions[i][0])
