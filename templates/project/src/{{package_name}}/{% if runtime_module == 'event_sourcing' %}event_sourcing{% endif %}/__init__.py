"""Event sourcing: every change is an event; state is rebuilt by replay.

The recovery point (the three questions):

* **Where** — the event streams in ``state.db``, or in the PostgreSQL database
  ``DATABASE_URL`` names (the ``eventsourcing`` library's ``stored_events``): one stream per task, an append-only list of
  ``RecordProcessed`` events. A stream's state (how far it got, job.fold's running state)
  is rebuilt from its latest snapshot plus the events after it.
* **How often** — the worker appends a batch of events per transaction
  (``batch_size`` records, or ``checkpoint_interval_s``); a snapshot is taken
  every ``snapshot_every`` events of a stream.
* **No duplicates, no omissions** — appending version v of a stream twice is
  impossible (unique ``(originator_id, originator_version)``: optimistic
  concurrency), so two workers that computed the same batch cannot both record
  it. The command side NEVER calls the external service: ``job.process_record``'s
  ``effect()`` only records the requested effect inside the event. The effects
  are performed by the *effects subscriber*, which follows the notification log
  and commits its position in the same transaction as its own rows; before it
  calls out it records how far it is about to go (``prepared_upto``), so after a
  kill those events are looked up by idempotency key instead of being called
  again (pitfall 4.1). Rebuilding or replaying state reads events only and never
  calls out (pitfall 4.3): ``rebuild`` proves it.

Idempotent variant (``event-sourcing-idempotent``, a ledger of payments): every
command carries an idempotency key. The key is its own stream (a ``Payment``
aggregate whose id is derived from the key), appended in the same transaction as
the ledger event: a repeated command finds it and returns the first result,
appending nothing; a reused key with a different request is rejected.

Why the subscriber is ours and not the library's ``ProcessApplication`` /
``ProjectionRunner``: the library's SQLite recorder does not support
``subscribe()`` (its runners follow an upstream application in-process; the same
subscriber then serves both stores), and its
tracking record can only be written atomically with *events*, not with our own
tables through a public API. The subscriber here reads the library's notification
log (``select_notifications``) and keeps its position in ``es_subscribers``, in
one transaction with its rows, through the shared ``store`` module.

This module is the interface ``strategy.load()`` imports (submit, run, status, what
the run stored); the rest is split by role:

* ``domain.py`` — the streams: ``Task`` and ``Payment`` (mutators compute from the event only);
* ``event_store.py`` — the event store: ``Events``, ``open_events`` / ``open_store``,
  store outages raised as ``StoreUnavailable``, ``STORE_TABLES``;
* ``recorders.py`` — the library's persistence made durable: the SQLite and the
  PostgreSQL factories, snapshots in the events' transaction;
* ``subscriber.py`` — the effects subscriber (the only caller of the external
  service) and the projection (never calls out);
* ``worker.py`` — the command side (``load_task``, ``charge``) and the ``Worker``;
* ``commands.py`` — ``rebuild`` and ``charge`` (the extra commands).
"""

from __future__ import annotations

import json
import time
from typing import Any
from uuid import uuid4

from eventsourcing.application import AggregateNotFoundError, project_aggregate
from eventsourcing.persistence import IntegrityError

from .. import job
from .. import settings as settings_module
from ..runtime import correlation, effects
from ..runtime.errors import JobError
from ..runtime.shutdown import Shutdown
from ..runtime.store import workload_held
from ..runtime.strategy import Context, Submitted, percent
from .commands import add_commands, rebuild, reuse_key
from .domain import Payment, Task, stream_id
from .event_store import (COUNT_TASKS, IDEMPOTENT, INSERT_INPUT, INSERT_TASK, SELECT_TASKS, STORE_TABLES, Events,
                          open_events, open_store, outages_unavailable, store_outages)
from .recorders import DurableSQLiteFactory
from .subscriber import ADVANCE, EFFECTS, RELEASE_LEASE, RESULTS, RESULTS_BY_TASK, SELECT_SUBSCRIBER, effect_key, project
from .worker import APPEND_WINDOW, IdempotencyConflict, Worker, charge, load_task, payment_key, run_job

# Re-exported: tests and benchmarks reach the whole strategy through this module.
__all__ = ["ADVANCE", "EFFECTS", "IDEMPOTENT", "MULTI_WORKER", "NAME", "RELEASE_LEASE", "RESULTS",
           "SELECT_SUBSCRIBER", "STORE_TABLES", "DurableSQLiteFactory", "Events", "IdempotencyConflict", "Payment", "Task",
           "REDONE_CALLS_PER_KILL", "Worker", "add_commands", "charge", "effect_key", "expected_effects",
           "load_task", "open_events", "open_store", "payment_key", "project", "project_aggregate", "rebuild", "run",
           "run_job", "status", "stored_final_states", "stored_results", "stream_id", "submit"]

NAME = settings_module.STRATEGY
#: Several `run` processes may share a data dir: the command side is guarded by
#: optimistic concurrency per stream, the effects subscriber by a lease.
MULTI_WORKER = True
#: After a kill, the effects subscriber re-sends the prepared page's calls with their keys when
#: the service is idempotent (it dedupes them); otherwise none: looked up or in doubt (effects.py).
REDONE_CALLS_PER_KILL = effects.promise(settings_module.Settings.from_env().batch_size * len(job.STEPS))
#: The command side only records an effect (the subscriber sends it later): job.py's effect()
#: answers "recorded", never the service's answer, and the drill's oracle answers the same.
EFFECT_ANSWERS = "recorded"
#: The critical windows (drill --aim): name -> what a kill there proves.
WINDOWS = {
    APPEND_WINDOW: ("a batch of commands is appended as events (one transaction), the client has not acknowledged "
                    "them and the effects subscriber has not read them: the re-sent commands must come back as "
                    "their first results, appending nothing, and every appended event's effect is still made once"
                    if IDEMPOTENT else
                    "a batch of events is appended (one transaction), the effects subscriber has not read them: "
                    "every appended event's effect is made after the restart, once"),
    "after_call_before_position": "the effects subscriber's call for an event went through, its position commit has "
                                  "not happened: the prepared page's calls are treated by the service's kind (re-sent "
                                  "with their keys, looked up, or held in doubt)",
    "after_projection_commit": "the projection committed a page (rows and position in one transaction), the next "
                               "page is not read: no row is lost or written twice",
}
#: A record already queued here, submitted again under a new correlation id (drill/schedule.py,
#: docs/generated-project.md): the whole submission is refused, nothing queued.
RESUBMITTED_RECORD = "refused"
if IDEMPOTENT:  # the drill's key-reuse fault: a recorded payment's key sent with another request
    drill_reuse_key = reuse_key


# ----------------------------------------------------------------------- submit
def submit(ctx: Context, records: list[dict[str, Any]], *, work_ms: float = 0.0,
           correlation_id: str | None = None) -> Submitted:
    """Store the input and start one stream per task of ``task_size`` records.

    Without a correlation id (the demo) a data directory that holds a workload is
    refused; with one, the records are added unless that id was submitted before.
    A record id is one row of the projection: one already in the store refuses the
    whole submission."""
    store = open_store(ctx, create=True)
    app = open_events(ctx, create=True)
    try:
        with store.transaction():
            if correlation_id is None:
                if store.one(COUNT_TASKS)["n"]:
                    raise JobError(workload_held(store, ctx.data_dir))
                prefix = "demo"
            else:
                existing = correlation.claim(store, correlation_id, len(records))
                if existing is not None:  # a redelivery: its streams exist already
                    return Submitted(existing, added=False)
                _refuse_known_record_ids(ctx, store, records)
                prefix = f"sub-{uuid4().hex[:12]}"
            now, ids, size = time.time(), [], ctx.settings.task_size
            for n, first in enumerate(range(0, len(records), size)):
                chunk, task_id = records[first:first + size], f"{prefix}-{n:05d}"
                store.execute(INSERT_TASK, (task_id, str(stream_id(task_id)), len(chunk), work_ms, now))
                for seq, record in enumerate(chunk):
                    store.execute(INSERT_INPUT, (task_id, seq, json.dumps(record, sort_keys=True)))
                ids.append(task_id)
            if correlation_id is not None:
                correlation.record(store, correlation_id, ids)
        # The streams' first events. If a kill lands between the two commits, the
        # worker starts a missing stream itself (Task.Started is derived from es_tasks);
        # a running worker may do so first (a submit while `run` works): then this save
        # conflicts, and the streams it did not start are started by the workers the same way.
        try:
            app.save(*[Task(task_id=t, total=len(records[i * size:(i + 1) * size])) for i, t in enumerate(ids)])
        except IntegrityError:
            pass
        return Submitted(ids)
    finally:
        app.close()
        store.close()


def _refuse_known_record_ids(ctx: Context, store: Any, records: list[dict[str, Any]]) -> None:
    """A JobError if a record id is already queued here (read from the stored inputs:
    a scan, paid once per submission, not per record processed)."""
    new = {str(r["record_id"]) for r in records}
    for row in store.all("SELECT record FROM es_inputs"):
        known = str(json.loads(row["record"]).get("record_id"))
        if known in new:
            raise JobError(f"record_id {known!r} is already queued in {ctx.data_dir} "
                           "(submitted before under another correlation id); nothing queued")


def run(ctx: Context, shutdown: Shutdown, *, limit: int | None = None) -> int:
    """One worker until the work is done. A store outage (PostgreSQL restarting, SQLite
    busy beyond busy_timeout) raises StoreUnavailable; calling run again in the same
    process starts over with a fresh Application, recorders and connections, and takes
    back what this process held (the effects lease: its owner is this process)."""
    with store_outages(ctx):
        store = open_store(ctx)
        try:
            app = open_events(ctx)
        except BaseException:
            store.close()
            raise
        external = ctx.external()
        worker = Worker(ctx, store, app, external, shutdown)
        try:
            worker.calls.send_released(worker.log)  # calls a person answered "not applied" (reconcile)
            result = worker.run(limit)
        except BaseException:
            _close_quietly(worker.calls, external, app, store)
            raise
        worker.calls.close()
        external.close()
        app.close()
        store.close()
        return result


def _close_quietly(*resources: Any) -> None:
    """Close everything while an error is on its way out: closing a connection to a
    server that went away can fail too, and must not hide the outage being raised."""
    for resource in resources:
        try:
            resource.close()
        except Exception:  # noqa: BLE001 - the outage (or the result) is what matters
            pass


# ----------------------------------------------------------------------- status
@outages_unavailable
def status(ctx: Context) -> dict[str, Any]:
    store = open_store(ctx)
    try:
        rows = store.all(SELECT_TASKS)
        done_by = {r["task_id"]: r for r in store.all(RESULTS_BY_TASK)}
        subs = {r["name"]: r for r in store.all("SELECT * FROM es_subscribers")}
    finally:
        store.close()
    now, tasks = time.time(), []
    for row in rows:
        d = done_by.get(row["task_id"], {})
        done = int(d.get("done") or 0)
        total = max(row["total"], done) if row["task_id"].startswith("account:") else row["total"]
        span = (d["last_at"] - d["first_at"]) if d else 0
        tasks.append({
            "task_id": row["task_id"],
            # A ledger's charges are recorded by `charge` and sent (then projected) by `run`.
            "status": ("recorded" if row["task_id"].startswith("account:") and done < total else
                       row["status"] if row["status"] != "open" or done else "pending"),
            "done": done, "total": total, "percent": round(percent(done, total), 1),
            "last_checkpoint_age_s": round(now - d["last_at"], 3) if d else None,
            "rate_per_s": round(done / span, 1) if span > 0 else None,
            "attempts": row["replayed"], "error": row["error"],
        })
    done, total = sum(t["done"] for t in tasks), sum(t["total"] for t in tasks)
    return {"strategy": NAME, "total": total, "done": done, "percent": round(percent(done, total), 1),
            "failed": sum(t["status"] == "failed" for t in tasks), "tasks": tasks,
            "subscribers": {n: {"position": s["position"], "owner": s["owner"]} for n, s in subs.items()},
            "replayed_commands": sum(r["replayed"] for r in rows)}


def expected_effects(records: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(str(r["record_id"]), step) for r in records for step in job.STEPS}


# ------------------------------------------------- what the run stored (read-only)
SELECT_RESULTS = "SELECT record_id, output FROM es_results ORDER BY task_id, seq"
SELECT_INPUT_IDS = "SELECT task_id, record FROM es_inputs ORDER BY task_id, seq"


@outages_unavailable
def stored_results(ctx: Context) -> list[tuple[str, Any]]:
    """The projection's rows: (record_id, output)."""
    store = open_store(ctx)
    try:
        return [(row["record_id"], json.loads(row["output"])) for row in store.all(SELECT_RESULTS)]
    finally:
        store.close()


@outages_unavailable
def stored_final_states(ctx: Context) -> list[dict[str, Any]]:
    """Per stream: its input's record ids and the running state rebuilt from its events."""
    store = open_store(ctx)
    app = open_events(ctx)
    try:
        inputs: dict[str, list[str]] = {}
        for row in store.all(SELECT_INPUT_IDS):
            inputs.setdefault(row["task_id"], []).append(str(json.loads(row["record"]).get("record_id")))
        states = []
        for row in store.all(SELECT_TASKS):
            try:
                running = app.repository.get(stream_id(row["task_id"])).running
            except AggregateNotFoundError:
                running = None
            states.append({"task_id": row["task_id"], "record_ids": inputs.get(row["task_id"], []),
                           "state": running})
        return states
    finally:
        app.close()
        store.close()


@outages_unavailable
def stored_history(ctx: Context) -> dict[str, Any]:
    """Read-only, for the drill (drill/checks/history.py): each task stream's events (version,
    kind, the record seq of a RecordProcessed) and each subscriber's position against the head
    of the notification log: versions contiguous from 1, records in order, positions caught up."""
    store = open_store(ctx)
    app = open_events(ctx)
    try:
        streams = []
        for row in store.all(SELECT_TASKS):
            entries = []
            for stored in app.recorder.select_events(stream_id(row["task_id"])):
                event = app.mapper.to_domain_event(stored)
                entries.append({"seq": stored.originator_version, "event": type(event).__name__,
                                **({"item": event.seq} if isinstance(event, Task.RecordProcessed) else {})})
            streams.append({"id": row["task_id"], "entries": entries})
        head = app.recorder.max_notification_id() or 0
        positions = [{"name": r["name"], "position": r["position"], "head": head}
                     for r in store.all("SELECT name, position FROM es_subscribers ORDER BY name")]
    finally:
        app.close()
        store.close()
    return {"unit": "stream", "entry": "event", "streams": streams, "positions": positions}


@outages_unavailable
def held_claims(ctx: Context, store: Any = None) -> list[dict[str, Any]]:
    """Read-only, for the drill: the subscribers' leases held right now, ``{"what", "owner",
    "heartbeat", "progress"}`` (its position), read on ``store`` or a connection of its own (a
    worker that stopped must hold none: drill/witness.py reads this after each run ends)."""
    own = store is None
    store = open_store(ctx) if own else store
    try:
        return [{"what": f"the {row['name']} subscriber's lease", "owner": row["owner"],
                 "heartbeat": row["heartbeat"], "progress": row["position"]}
                for row in store.all("SELECT name, owner, heartbeat, position FROM es_subscribers"
                                     " WHERE owner IS NOT NULL ORDER BY name")]
    finally:
        if own:
            store.close()
