"""Event sourcing, the consumers of the notification log: the *effects
subscriber*, the ONLY caller of the external service, and the *projection*
(``es_results``), which never calls out. Each keeps its position in
``es_subscribers``, committed in one transaction with its own rows.

Before the subscriber calls out it records how far it is about to go
(``prepared_upto``), so after a kill the calls of those events follow the rule
of the service's kind (effects.py): re-sent with their idempotency keys, looked
up by them before calling again, or held in doubt for a plain call.

Two commits per batch, not four: the page's intent rides in the previous page's
position commit (which reads the next page first), and the projection's rows and
position ride in that same commit when the projection is where the effects
subscriber was. So the subscriber calls a page one pass after it was appended; a
page is prepared in a commit of its own only when nothing was prepared (the first
page, a catch-up after a stop). Measured on PostgreSQL with one worker, 2026-12-02:
4 writing commits and one read-only transaction per batch before, 2 after
(benchmarks/bench_event_sourcing_pg.py counts them from the server).
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
SELECT_POSITIONS = "SELECT name, position FROM es_subscribers"
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
# A clean stop takes back an intent it never acted on (nothing for the next worker to look up).
WITHDRAW_INTENT = """
UPDATE es_subscribers SET prepared_upto = position WHERE name = ? AND owner = ? AND position = ? AND prepared_upto = ?"""
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
    #: (position, prepared_upto, the page's notifications) of the intent this worker committed
    #: and has not acted on yet; None when there is none or it is no longer trusted.
    own_intent: tuple[int, int, Any] | None

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
    def _lease(self) -> dict[str, Any] | None:
        """The subscriber's row when this worker holds its lease (taking it if it is free or
        its holder is gone), else None."""
        row = self.store.one(SELECT_SUBSCRIBER, (EFFECTS,))
        if row["owner"] == self.owner:  # ours already: one read, no transaction
            return row
        # Taken (again): an intent this worker remembers as its own may have been acted on
        # by another holder since, so it is no longer trusted as "not called yet".
        self.own_intent = None
        with self.store.transaction():
            row = self.store.one(SELECT_SUBSCRIBER, (EFFECTS,))
            if row["owner"] == self.owner:
                return row
            if row["owner"] and not owner_gone(row["owner"], row["heartbeat"] or 0,
                                               lease_s=self.settings.lease_s, now=time.time()):
                return None
            taken = self.store.execute(TAKE_LEASE, (self.owner, time.time(), EFFECTS, row["owner"] or "")).rowcount
            if taken == 1 and row["owner"]:
                self.log(f"took over the effects subscriber from {row['owner']} at position {row['position']}")
            return row if taken == 1 else None

    def effects_batch(self) -> int:
        sub = self._lease()
        if sub is None:
            return 0
        position, prepared_upto = sub["position"], sub["prepared_upto"]
        # Notification ids are the rowids of stored_events (PostgreSQL: a sequence, with the
        # table locked EXCLUSIVE by each append). One appender at a time, so ids become
        # visible in commit order: reading "after my position" never skips an event that
        # commits later with a smaller id.
        if prepared_upto <= position:
            # 1. Nothing prepared: the intent for the next page, committed before any of its
            #    calls. They are made on the next pass, whose position commit then carries the
            #    intent of the page after (step 3): one commit per page instead of two.
            notes = self.app.recorder.select_notifications(position, self.settings.batch_size,
                                                           inclusive_of_start=False)
            if not notes:
                if (sub["heartbeat"] or 0) < time.time() - self.settings.lease_s / 3:
                    with self.store.transaction():
                        self.store.execute(PREPARE, (prepared_upto, time.time(), EFFECTS, self.owner))
                return 0
            with self.store.transaction():
                if self.store.execute(PREPARE, (notes[-1].id, time.time(), EFFECTS, self.owner)).rowcount != 1:
                    return 0  # the lease was taken over
            self.own_intent = (position, notes[-1].id, notes)
            return len(notes)
        # 2. The calls of the prepared page. An intent this worker committed itself and has not
        #    acted on yet (own_intent: same position, same page, the lease held throughout) had
        #    no call made; any other was left by a killed subscriber, so the calls of its events
        #    may have gone through: they are looked up first (recovering).
        own = self.own_intent
        self.own_intent = None
        if own is not None and own[:2] == (position, prepared_upto):
            recovering_upto, notes = position, own[2]
        else:
            recovering_upto = prepared_upto
            notes = self.app.recorder.select_notifications(position, self.settings.batch_size, stop=prepared_upto,
                                                           inclusive_of_start=False)
        started, sent, reached, in_doubt_upto = time.monotonic(), [], position, position
        if not notes:  # no event in the prepared range (ids are not dense): nothing to call
            reached = prepared_upto
        events = []
        for note in notes:
            domain_event = self.app.mapper.to_domain_event(note)
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
            events.append((note, domain_event))
            reached = note.id
            if self.shutdown.requested:
                break
            if time.monotonic() - started >= self.settings.checkpoint_interval_s:
                break
        # The next page's intent rides in this commit when the whole prepared page was called
        # (not when stopping: a graceful stop leaves nothing to look up).
        upto = max(recovering_upto, reached, in_doubt_upto)
        ahead = []
        if upto == reached and reached == prepared_upto and not self.shutdown.requested:
            ahead = self.app.recorder.select_notifications(reached, self.settings.batch_size,
                                                           inclusive_of_start=False)
            if ahead:
                upto = ahead[-1].id
        # 3. Our rows and the new position: one transaction. Not reached = not called, so
        #    the intent shrinks back to the next page (or to nothing). The projection moves
        #    with it when it was where this subscriber was (else project_batch catches it up).
        with self.store.transaction():
            now = time.time()
            moved = self.store.execute(ADVANCE, (reached, upto, now, now, EFFECTS, position)).rowcount
            if moved != 1:
                raise StoreError("the effects subscriber's position moved under its lease")
            self.store.executemany(INSERT_SENT, [(*row, now) for row in sent])
            projected = self.store.execute(ADVANCE, (reached, 0, now, now, RESULTS, position)).rowcount == 1
            if projected:
                write_results(self.store, result_rows(events, self._task_of, now))
        if ahead:
            self.own_intent = (reached, upto, ahead)
        if projected and events:
            faults.window("after_projection_commit")
        return max(len(notes), 1)

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
        """The projection, when it is behind the effects subscriber (a rebuild, another
        worker's lease): never ahead of it, so that in the steady state its rows ride in
        the effects subscriber's position commit instead of a commit of their own."""
        positions = {r["name"]: r["position"] for r in self.store.all(SELECT_POSITIONS)}
        if positions.get(RESULTS, 0) >= positions.get(EFFECTS, 0):
            return 0
        try:
            return project(self.store, self.app, self._task_of, self.settings.batch_size, upto=positions[EFFECTS])
        except ProjectionMoved:
            return 1  # another worker projected these events first: look again


def result_rows(events: list[tuple[Any, Any]], task_of: Any, now: float) -> list[tuple]:
    """es_results rows of (notification, decoded event) pairs: one per processed record."""
    rows = []
    for note, ev in events:
        if isinstance(ev, Task.RecordProcessed):
            rows.append((ev.record_id, task_of(ev.originator_id), ev.seq,
                         json.dumps(ev.output, sort_keys=True), note.id, now))
    return rows


def write_results(store: Store, rows: list[tuple]) -> None:
    """The projection's rows, inside the transaction that moves its position."""
    store.executemany(INSERT_RESULT, rows)


def project(store: Store, app: Events, task_of: Any, limit: int, upto: int | None = None) -> int:
    """Apply up to ``limit`` events (up to notification ``upto``) to es_results; rows and
    position in one transaction."""
    sub = store.one(SELECT_SUBSCRIBER, (RESULTS,))
    notes = app.recorder.select_notifications(sub["position"], limit, stop=upto, inclusive_of_start=False)
    if not notes:
        return 0
    with store.transaction():
        now = time.time()
        if store.execute(ADVANCE, (notes[-1].id, 0, now, now, RESULTS, sub["position"])).rowcount != 1:
            raise ProjectionMoved  # another worker projected these events first
        write_results(store, result_rows([(note, app.mapper.to_domain_event(note)) for note in notes], task_of, now))
    faults.window("after_projection_commit")
    return len(notes)


class ProjectionMoved(Exception):
    """Another worker moved the projection's position first."""
