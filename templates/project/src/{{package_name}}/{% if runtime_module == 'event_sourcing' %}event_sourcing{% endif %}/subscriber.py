"""Event sourcing, the consumers of the notification log: the *effects
subscriber*, the ONLY caller of the external service, and the *projection*
(``es_results``), which never calls out. Each keeps its position in
``es_subscribers``, committed in one transaction with its own rows.

Before the subscriber calls out it records how far it is about to go
(``prepared_upto``), so after a kill the calls of those events follow the rule
of the service's kind (effects.py): re-sent with their idempotency keys, looked
up by them before calling again, or held in doubt for a plain call.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any
from uuid import UUID

from ..runtime import effects, faults
from ..runtime.errors import StoreError, TransientError
from ..runtime.external import ExternalService
from ..runtime.owners import owner_gone
from ..runtime.shutdown import Shutdown
from ..runtime.store import Store
from ..settings import Settings
from .domain import Task
from .event_store import Events

EFFECTS, RESULTS = "effects", "results"

# --------------------------------------------------------------------------- SQL
SELECT_SUBSCRIBER = "SELECT * FROM es_subscribers WHERE name = ?"
# Compare-and-set on the owner: of two workers taking a free lease, one wins.
TAKE_LEASE = """
UPDATE es_subscribers SET owner = ?, heartbeat = ? WHERE name = ? AND COALESCE(owner, '') = ?"""
RELEASE_LEASE = "UPDATE es_subscribers SET owner = NULL WHERE name = ? AND owner = ?"
# The intent, written before any call for events up to prepared_upto. WHERE owner
# = ? fences off a worker whose lease was taken over.
PREPARE = """
UPDATE es_subscribers SET prepared_upto = ?, heartbeat = ? WHERE name = ? AND owner = ?"""
# The subscriber's position: WHERE position = ? is the optimistic lock (another
# consumer that moved it first makes this 0 rows: the transaction is rolled back).
ADVANCE = """
UPDATE es_subscribers SET position = ?, prepared_upto = ?, heartbeat = ?, updated_at = ?
WHERE name = ? AND position = ?"""
RESET_POSITION = "UPDATE es_subscribers SET position = 0, prepared_upto = 0, updated_at = ? WHERE name = ?"
INSERT_SENT = """
INSERT INTO es_sent (idempotency_key, notification_id, task_id, record_id, step, outcome, sent_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (idempotency_key) DO NOTHING"""
INSERT_RESULT = """
INSERT INTO es_results (record_id, task_id, seq, output, notification_id, created_at)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (record_id) DO NOTHING"""
DELETE_RESULTS = "DELETE FROM es_results"
RESULTS_BY_TASK = """
SELECT task_id, COUNT(*) AS done, MIN(created_at) AS first_at, MAX(created_at) AS last_at
FROM es_results GROUP BY task_id"""


def effect_key(task_id: str, event: Any, step: str) -> str:
    """The external idempotency key, derived from the event: a redelivered event
    (after a kill between the call and the position commit) sends the same key.
    Ledger variant: the command's own idempotency key, end to end."""
    base = event.key if getattr(event, "key", None) else f"{task_id}/{event.record_id}"
    return base + (f"/{step}" if step else "")


class EffectsSubscriber:
    """The effects subscriber and the projection, as run by a worker (``worker.Worker``)."""

    store: Store
    app: Events
    external: ExternalService
    shutdown: Shutdown
    settings: Settings
    owner: str
    task_ids: dict[UUID, str]
    #: Events the effects subscriber decoded, by notification id, for the projection that
    #: follows it in the same worker (an event is decoded once, not twice).
    decoded: dict[int, Any]

    def log(self, message: str) -> None:
        print(f"[{self.owner}] {message}", file=sys.stderr, flush=True)

    @property
    def calls(self) -> effects.Effects:
        """The one way this subscriber calls out (effects.py), made on first use."""
        made = self.__dict__.get("_calls")
        if made is None:
            made = self.__dict__["_calls"] = effects.Effects(self.external, self.ctx.data_dir, self.settings)
        return made

    # ---- the effects subscriber: the ONLY caller of the external service
    def _lease(self) -> bool:
        with self.store.transaction():
            row = self.store.one(SELECT_SUBSCRIBER, (EFFECTS,))
            if row["owner"] == self.owner:
                return True
            if row["owner"] and not owner_gone(row["owner"], row["heartbeat"] or 0,
                                               lease_s=self.settings.lease_s, now=time.time()):
                return False
            taken = self.store.execute(TAKE_LEASE, (self.owner, time.time(), EFFECTS, row["owner"] or "")).rowcount
            if taken == 1 and row["owner"]:
                self.log(f"took over the effects subscriber from {row['owner']} at position {row['position']}")
            return taken == 1

    def effects_batch(self) -> int:
        if not self._lease():
            return 0
        sub = self.store.one(SELECT_SUBSCRIBER, (EFFECTS,))
        position, recovering_upto = sub["position"], sub["prepared_upto"]
        # Notification ids are the rowids of stored_events (PostgreSQL: a sequence, with the
        # table locked EXCLUSIVE by each append). One appender at a time, so ids become
        # visible in commit order: reading "after my position" never skips an event that
        # commits later with a smaller id.
        notes = self.app.recorder.select_notifications(position, self.settings.batch_size,
                                                       inclusive_of_start=False)
        if not notes:
            if (sub["heartbeat"] or 0) < time.time() - self.settings.lease_s / 3:
                with self.store.transaction():
                    self.store.execute(PREPARE, (sub["prepared_upto"], time.time(), EFFECTS, self.owner))
            return 0
        # 1. The intent, committed before the first call.
        with self.store.transaction():
            if self.store.execute(PREPARE, (max(recovering_upto, notes[-1].id), time.time(),
                                            EFFECTS, self.owner)).rowcount != 1:
                return 0  # the lease was taken over
        # 2. The calls. Events a killed subscriber had prepared are looked up first.
        started, sent, reached, in_doubt_upto = time.monotonic(), [], position, position
        if len(self.decoded) > 10 * self.settings.batch_size:  # the projection runs elsewhere
            self.decoded.clear()
        for note in notes:
            domain_event = self.app.mapper.to_domain_event(note)
            self.decoded[note.id] = domain_event
            if isinstance(domain_event, Task.RecordProcessed):
                mark = len(sent)
                try:
                    for eff in domain_event.effects:
                        sent.append(self._send(note.id, domain_event, eff, recovering=note.id <= recovering_upto))
                        faults.window("after_call_before_position")
                except TransientError as refused:
                    # The service keeps refusing: this event is not reached, the next pass sends its
                    # calls again. Any of them that went out stays prepared, so they are looked up
                    # first then; the worker goes on instead of dying with the batch in hand.
                    if len(sent) > mark:
                        in_doubt_upto = note.id
                    del sent[mark:]
                    self.log(f"effects paused at event {note.id}: {refused}; retried on the next pass")
                    break
            reached = note.id
            if self.shutdown.requested:
                break
            if time.monotonic() - started >= self.settings.checkpoint_interval_s:
                break
        # 3. Our rows and the new position: one transaction. Not reached = not called,
        #    so the intent shrinks back (a graceful stop leaves nothing to look up).
        with self.store.transaction():
            now = time.time()
            moved = self.store.execute(ADVANCE, (reached, max(recovering_upto, reached, in_doubt_upto), now, now,
                                                 EFFECTS, position)).rowcount
            if moved != 1:
                raise StoreError("the effects subscriber's position moved under its lease")
            self.store.executemany(INSERT_SENT, [(*row, now) for row in sent])
        return len(notes)

    def _send(self, notification_id: int, ev: Any, eff: dict[str, Any], *, recovering: bool) -> tuple:
        step = eff.get("step", "")
        task_id = self._task_of(ev.originator_id)
        key = effect_key(task_id, ev, step)
        # recovering: a killed subscriber had prepared this event, so the call may have got through.
        for attempt in range(6):
            try:
                answer = self.calls.call(ev.record_id, step, key, eff.get("payload"), recovering=recovering)
                break
            except TransientError:
                if attempt == 5:
                    raise
                time.sleep(min(0.5, 0.01 * 2 ** attempt))
        return (key, notification_id, task_id, ev.record_id, step, answer["status"])

    def _task_of(self, originator_id: UUID) -> str:
        if originator_id not in self.task_ids:  # a stream started after we looked (`charge`)
            for row in self.store.all("SELECT task_id, stream_id FROM es_tasks"):
                self.task_ids[UUID(row["stream_id"])] = row["task_id"]
        return self.task_ids.get(originator_id, str(originator_id))

    # ---- the projection: never calls out
    def project_batch(self) -> int:
        try:
            return project(self.store, self.app, self._task_of, self.settings.batch_size, self.decoded)
        except ProjectionMoved:
            return 1  # another worker projected these events first: look again


def project(store: Store, app: Events, task_of: Any, limit: int, decoded: dict[int, Any] | None = None) -> int:
    """Apply up to ``limit`` events to es_results; rows and position in one transaction.

    ``decoded``: events already decoded by the effects subscriber (taken out as used).
    """
    sub = store.one(SELECT_SUBSCRIBER, (RESULTS,))
    notes = app.recorder.select_notifications(sub["position"], limit, inclusive_of_start=False)
    if not notes:
        return 0
    with store.transaction():
        now = time.time()
        if store.execute(ADVANCE, (notes[-1].id, 0, now, now, RESULTS, sub["position"])).rowcount != 1:
            raise ProjectionMoved  # another worker projected these events first
        rows = []
        for note in notes:
            ev = decoded.pop(note.id, None) if decoded is not None else None
            if ev is None:
                ev = app.mapper.to_domain_event(note)
            if isinstance(ev, Task.RecordProcessed):
                rows.append((ev.record_id, task_of(ev.originator_id), ev.seq,
                             json.dumps(ev.output, sort_keys=True), note.id, now))
        store.executemany(INSERT_RESULT, rows)
    faults.window("after_projection_commit")
    return len(notes)


class ProjectionMoved(Exception):
    """Another worker moved the projection's position first."""
