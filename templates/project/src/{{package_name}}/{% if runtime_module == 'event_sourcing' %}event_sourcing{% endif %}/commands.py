"""Event sourcing's own commands: ``rebuild`` (the projection from scratch, every stream from its
snapshot and by full replay, compared: reads events only, never calls out) and, in the
idempotent variant, ``charge`` (one payment command with an idempotency key).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, project_aggregate
from eventsourcing.persistence import RecordConflictError

from .. import settings as settings_module
from ..runtime import effects
from ..runtime.errors import BadRecord, JobError
from ..runtime.strategy import Context
from .domain import stream_id
from .event_store import IDEMPOTENT, SELECT_TASKS, open_events, open_store, outages_unavailable
from .subscriber import DELETE_RESULTS, RESET_POSITION, RESULTS, ProjectionMoved, project
from .worker import IdempotencyConflict, charge, load_task, payment_key


# -------------------------------------------------------------------- rebuild
@outages_unavailable
def rebuild(ctx: Context) -> dict[str, Any]:
    """Rebuild the projection from scratch and every stream (snapshot + tail vs full
    replay). Reads events only: the external service is never called."""
    store = open_store(ctx)
    app = open_events(ctx)
    try:
        task_ids = {UUID(r["stream_id"]): r["task_id"] for r in store.all(SELECT_TASKS)}
        started = time.perf_counter()
        events = 0
        with store.transaction():
            store.execute(DELETE_RESULTS)
            store.execute(RESET_POSITION, (time.time(), RESULTS))
        # Pages of 1,000 events, each with its position: a kill mid-rebuild leaves a
        # consistent, shorter projection that `run` (or another `rebuild`) completes.
        while True:
            try:
                n = project(store, app, lambda oid: task_ids.get(oid, str(oid)), 1000)
            except ProjectionMoved:
                raise JobError("a running worker is updating the projection; stop `run` before `rebuild`") from None
            if not n:
                break
            events += n
        projection_ms = (time.perf_counter() - started) * 1000
        snap_ms = full_ms = 0.0
        identical = True
        for oid in task_ids:
            t0 = time.perf_counter()
            try:
                from_snapshot = app.repository.get(oid)
            except AggregateNotFoundError:
                continue
            t1 = time.perf_counter()
            replayed = project_aggregate(None, app.events.get(oid))
            t2 = time.perf_counter()
            snap_ms, full_ms = snap_ms + (t1 - t0) * 1000, full_ms + (t2 - t1) * 1000
            identical = identical and from_snapshot.state() == replayed.state()
        rows = store.one("SELECT COUNT(*) AS n FROM es_results")["n"]
    finally:
        app.close()
        store.close()
    return {"events": events, "projection_rows": rows, "projection_ms": round(projection_ms, 2),
            "streams": len(task_ids), "snapshot_rebuild_ms": round(snap_ms, 2),
            "full_replay_ms": round(full_ms, 2), "identical": identical}


# ------------------------------------------------------------- extra commands
def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("rebuild", parents=[common],
                       help="rebuild the projection from scratch (and every stream from its snapshot); "
                            "prints the time; never calls the external service")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_rebuild)
    if IDEMPOTENT:
        p = sub.add_parser("charge", parents=[common],
                           help="one payment command with an idempotency key; a repeat returns the first result",
                           epilog="example: charge --account acme --record-id inv-1 --value 42 --key inv-1")
        p.add_argument("--account", required=True, help="the ledger (stream) to charge")
        p.add_argument("--record-id", required=True, help="the payment's business id")
        p.add_argument("--value", type=int, required=True, help="the demo job's input value")
        p.add_argument("--key", default=None, help="idempotency key (default: the record id)")
        p.set_defaults(func=_cmd_charge)


def _cmd_rebuild(args: argparse.Namespace, ctx: Context) -> int:
    report = rebuild(ctx)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(f"rebuilt projection from {report['events']} events ({report['projection_rows']} rows) "
              f"in {report['projection_ms']:.1f} ms; {report['streams']} stream(s) from snapshot + tail in "
              f"{report['snapshot_rebuild_ms']:.1f} ms (full replay {report['full_replay_ms']:.1f} ms), "
              f"{'identical' if report['identical'] else 'DIFFERENT'}; external service not called")
    return 0 if report["identical"] else 1


def _cmd_charge(args: argparse.Namespace, ctx: Context) -> int:
    """Charge one payment on the account's ledger; the effects subscriber (`run`) sends it."""
    store = open_store(ctx, create=True)
    app = open_events(ctx, create=True)
    try:
        task_id = f"account:{args.account}"
        record = {"record_id": args.record_id, "value": args.value}
        for _ in range(5):  # optimistic concurrency: a conflicting append is retried on fresh state
            task = load_task(app, task_id, total=0)
            try:
                result, payment = charge(app, task, task.next_seq, record, args.key or args.record_id)
            except BadRecord as exc:
                raise JobError(str(exc)) from None
            if payment is None:
                break
            try:
                app.save(task, payment)
                with store.transaction():
                    # Register the ledger so `run`'s subscriber and projection name it; its total is the
                    # payments recorded, so `status` counts those not yet through `run` as not done.
                    store.execute("INSERT INTO es_tasks (task_id, stream_id, total, work_ms, status, created_at) "
                                  "VALUES (?, ?, ?, 0, 'done', ?) ON CONFLICT (task_id) DO UPDATE SET total = excluded.total "
                                  "WHERE excluded.total > es_tasks.total",
                                  (task_id, str(stream_id(task_id)), int(result["seq"]) + 1, time.time()))
                break
            except RecordConflictError:
                continue
        else:
            raise JobError(f"account {args.account}: too many concurrent writers, try again")
    finally:
        app.close()
        store.close()
    print(json.dumps(result, sort_keys=True))
    # What has happened and what has not: the command is recorded (an event, its result stored);
    # the external charge is sent by the effects subscriber, which only `run` runs.
    key = args.key or args.record_id
    recorded = ("a repeat of key " + repr(key) + ": the first result above, nothing new recorded"
                if result.get("replayed") else
                f"recorded: payment {args.record_id!r} on account {args.account!r} (key {key!r}), result above")
    sent = ("the external charge was already sent (once)" if _charge_sent(ctx, key, args.record_id) else
            f"NOT sent yet: the external charge goes out at the next `python -m {settings_module.PACKAGE} run`")
    print(f"{recorded}; {sent}.", file=sys.stderr)
    return 0


def _charge_sent(ctx: Context, key: str, record_id: str) -> bool:
    """Whether the external service has applied the charge of this key (read-only: no call is logged).
    A plain service keeps no key: there, the payment's record id is what it saw."""
    path = ctx.external_dir / "external.db"
    if not path.is_file():
        return False
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if effects.KIND == "plain":
            row = conn.execute("SELECT 1 FROM effects WHERE record_id = ?", (record_id,)).fetchone()
        else:  # the key, or the key of one of its steps
            row = conn.execute("SELECT 1 FROM effects WHERE idempotency_key = ? OR substr(idempotency_key, 1, ?) = ?",
                               (key, len(key) + 1, key + "/")).fetchone()
        return row is not None
    except sqlite3.Error:
        return False
    finally:
        conn.close()


# ------------------------------------------------------- the drill's key reuse
def _other_requests(record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Requests that differ from ``record``: one value changed (a field other than its id), and
    one field added."""
    found = []
    field = next((name for name in sorted(record) if name != "record_id"), None)
    if field is not None:
        value = record[field]
        changed = (value + 1 if isinstance(value, (int, float)) and not isinstance(value, bool)
                   else f"{value}-changed" if isinstance(value, str) else "changed")
        found.append((f"{field} changed", {**record, field: changed}))
    found.append(("a field added", {**record, "drill_changed": True}))
    return found


def reuse_key(ctx: Context) -> dict[str, Any] | None:
    """The drill's key-reuse fault (drill/schedule.py): the idempotency key of a payment already
    recorded, sent again with different requests: the same record with one value changed (the
    same fields: a request told apart by its field names only would pass it), then with one
    field added. Each must be refused (IdempotencyConflict). Nothing is saved whatever the
    answer, so the probe itself changes nothing; None when no payment is recorded yet."""
    store = open_store(ctx)
    app = open_events(ctx)
    try:
        row = store.one("SELECT r.task_id, r.seq, i.record FROM es_results r JOIN es_inputs i"
                        " ON i.task_id = r.task_id AND i.seq = r.seq ORDER BY r.notification_id LIMIT 1")
        if row is None:
            return None
        record = json.loads(row["record"])
        key = payment_key(row["task_id"], record)
        task = load_task(app, row["task_id"], total=0)
        refusals = []
        for change, request in _other_requests(record):
            try:
                result, _ = charge(app, task, int(row["seq"]), request, key)
            except (IdempotencyConflict, BadRecord) as exc:
                refusals.append(f"{change}: {'' if isinstance(exc, IdempotencyConflict) else 'a bad record: '}{exc}")
                continue
            return {"key": key, "outcome": "accepted",
                    "message": f"{change}: answered {json.dumps(result, sort_keys=True)[:200]}"}
        return {"key": key, "outcome": "refused", "message": "; ".join(refusals)}
    finally:
        app.close()
        store.close()
