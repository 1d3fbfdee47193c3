"""State machine: each record is an order carried through declared steps to its end.

The recovery point (the three questions):

* **Where** — the order's ``state`` (declared once, in :class:`OrderFlow`), its
  ``transitions`` log (every transition with the context id of the orchestrator
  start that made it, and the time) and the ``step_log`` of external calls, all
  in the state database (schema.sql).
* **How often** — at every transition: one commit per step.
* **No duplicates, no omissions** — a state says where the flow is, not that the
  work got done (pitfall: "paid" written, gateway never answered). So each
  external call is paired with an operation-log entry: its intent is committed
  as ``prepared`` BEFORE the call, and ``confirmed`` in the same transaction as
  the state transition AFTER it. On recovery, a ``prepared`` step follows the
  rule of the service's kind (effects.py): re-sent with its idempotency key,
  looked up by it before calling again, or held in doubt for a plain call.

An orchestrator killed mid-flow just stops; a restarted one (or another worker)
finds the order held by a dead owner, takes it over and carries it to ``done``.

This module is the interface ``strategy.load()`` imports (submit, run, status, `history`,
what the run stored); ``flow.py`` declares the states and legal transitions,
``orchestrator.py`` drives an order step by step, ``tables.py`` holds the schema version,
an order's stored input and the SQL.
"""

from __future__ import annotations

import argparse
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
from .flow import ACTIVE_STATES, INITIAL_STATE, LEGAL_MOVES, STEPS, OrderFlow
from .orchestrator import STEP_ATTEMPTS, Orchestrator
from .tables import (COUNT_ORDERS, INSERT_ORDER, ORDER_INPUT, SELECT_ALL_STEPS, SELECT_ALL_TRANSITIONS, SELECT_COUNTS, SELECT_FAILED,
                     SELECT_HELD_ORDERS, SELECT_HISTORY, SELECT_ORDER, SELECT_RESULTS, SELECT_STEPS, SELECT_VERSIONS,
                     open_store)

NAME = "state-machine"
#: Orders are claimed one at a time (compare-and-set on their holder), so several
#: `run` processes (on PostgreSQL: several machines) share the orders.
MULTI_WORKER = True
#: A killed orchestrator's prepared step is re-sent with its key when the service is
#: idempotent (one call per kill, deduped); otherwise none (effects.py).
#: A call refused this many times in a row fails its unit (the drill's long refusal burst stays below).
CALL_ATTEMPTS = STEP_ATTEMPTS
REDONE_CALLS_PER_KILL = effects.promise(1)
#: The critical windows (drill --aim): name -> what a kill there proves.
WINDOWS = {
    "after_call_before_transition": "a step's external call went through, the transition that confirms it is not "
                                    "committed: the restarted orchestrator finds the step's intent and treats the "
                                    "call by the service's kind (re-send with the key, look up, or hold in doubt)",
    "between_steps": "a step is confirmed and the order moved on (the next step's intent committed with it), the "
                     "next step is not called yet: the flow resumes at the next step, no step is lost or repeated",
}
#: A record already an order here, submitted again under a new correlation id (drill/schedule.py,
#: docs/generated-project.md): the whole submission is refused, nothing queued.
RESUBMITTED_RECORD = "refused"

#: What `reset` drops in the state store (strategy.py): every table schema.sql creates.
STORE_TABLES = ("orders", "transitions", "step_log", "schema_version")

# ----------------------------------------------------------------------- submit
def submit(ctx: Context, records: list[dict[str, Any]], *, work_ms: float = 0.0,
           correlation_id: str | None = None) -> Submitted:
    """One order per record, in state 'new'. Without a correlation id (the demo) refuses a
    data directory that already holds orders; with one, adds them unless that id was seen.
    An order is its record id: a record id already in the store refuses the whole submission."""
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
        added = {}
        for n in correlation.in_lock_order(submissions):
            cid, records, work_ms = submissions[n]
            added[n] = _add(ctx, store, records, work_ms, cid)
        return [added[n] for n in range(len(submissions))]


def _add(ctx: Context, store: Store, records: list[dict[str, Any]], work_ms: float,
         correlation_id: str | None) -> Submitted:
    """Inside the caller's transaction: the orders of one submission, or the existing ones."""
    if correlation_id is None:
        if store.one(COUNT_ORDERS)["n"]:
            raise JobError(workload_held(store, ctx.data_dir))
    else:
        existing = correlation.claim(store, correlation_id, len(records))
        if existing is not None:  # a redelivery: its orders exist already
            return Submitted(existing, added=False)
    now, ids = time.time(), []
    for record in records:
        order_id = str(record["record_id"])
        if store.execute(INSERT_ORDER, (order_id, ORDER_INPUT.dumps({"record": record, "work_ms": work_ms}),
                                        now, now)).rowcount != 1:
            # Raised inside the transaction: nothing of this submission is kept.
            raise JobError(f"record_id {order_id!r} is already an order in {ctx.data_dir} "
                           "(submitted before under another correlation id); nothing queued")
        ids.append(order_id)
    if correlation_id is not None:
        correlation.record(store, correlation_id, ids)
    return Submitted(ids)


def run(ctx: Context, shutdown: Shutdown, *, limit: int | None = None, store: Store | None = None,
        external: ExternalService | None = None) -> int:
    """Work until nothing is left (strategy.run_worker: ``store``/``external`` lent by the queue consumer)."""
    return run_worker(ctx, lambda s, e: Orchestrator(ctx, s, e, shutdown), open_store, limit=limit, store=store,
                      external=external)


# ----------------------------------------------------------------------- status
def status(ctx: Context) -> dict[str, Any]:
    store = open_store(ctx)
    try:
        groups = {row["state"]: row for row in store.all(SELECT_COUNTS)}
        failed = store.all(SELECT_FAILED)
    finally:
        store.close()
    now = time.time()
    total = sum(int(g["n"]) for g in groups.values())
    done = int(groups["done"]["n"]) if "done" in groups else 0
    first_claim = min((g["first_claim"] for g in groups.values() if g["first_claim"]), default=None)
    last = max((g["last"] for g in groups.values()), default=None)
    elapsed = (groups["done"]["last"] - first_claim) if "done" in groups and first_claim else 0
    # One row per state of the flow (how many orders are where), then the failed orders.
    tasks = []
    for state in (s.value for s in OrderFlow.states):
        n = int(groups[state]["n"]) if state in groups else 0
        tasks.append({"task_id": f"state:{state}", "status": state, "done": n, "total": total,
                      "percent": round(percent(n, total), 1),
                      "last_checkpoint_age_s": round(now - last, 3) if last and first_claim else None,
                      "rate_per_s": round(done / elapsed, 1) if state == "done" and elapsed > 0 else None,
                      "attempts": int(groups[state]["transitions"] or 0) if state in groups else 0,
                      "error": None})
    for row in failed:
        tasks.append({"task_id": row["order_id"], "status": "failed", "done": 0, "total": 1, "percent": 0.0,
                      "last_checkpoint_age_s": None, "rate_per_s": None, "attempts": row["version"],
                      "error": row["error"]})
    return {"strategy": NAME, "total": total, "done": done, "percent": round(percent(done, total), 1),
            "failed": int(groups["failed"]["n"]) if "failed" in groups else 0, "tasks": tasks}


def expected_effects(records: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """Every order applies each step once: (record_id, step) for reserve, charge, notify."""
    return {(str(r["record_id"]), step) for r in records for step in STEPS}


# ------------------------------------------------------------- extra commands


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("history", parents=[common], help="an order's state, transitions and step log",
                       epilog="example: history --order r0000001")
    p.add_argument("--order", required=True, help="the order id (a demo record id, e.g. r0000001)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_history)


def _cmd_history(args: argparse.Namespace, ctx: Context) -> int:
    store = open_store(ctx)
    try:
        order = store.one(SELECT_ORDER, (args.order,))
        if order is None:
            raise JobError(f"no order {args.order!r} in the state database {store.where}")
        history = {"order_id": order["order_id"], "state": order["state"], "version": order["version"],
                   "error": order["error"], "transitions": store.all(SELECT_HISTORY, (args.order,)),
                   "steps": store.all(SELECT_STEPS, (args.order,))}
    finally:
        store.close()
    if args.json:
        print(json.dumps(history, indent=2))
        return 0
    print(f"order {history['order_id']}: {history['state']} after {history['version']} transition(s)"
          + (f"; error: {history['error']}" if history["error"] else ""))
    for t in history["transitions"]:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t["at"]))
        print(f"  {t['seq']:>2} {when} {t['event']:<8} {t['from_state']:>9} -> {t['to_state']:<9} "
              f"context {t['context_id']}")
    for step in history["steps"]:
        print(f"     step {step['step']:<8} {step['status']:<9} key {step['idempotency_key']}")
    return 0


# ------------------------------------------------- what the run stored (read-only)


def stored_results(ctx: Context) -> list[tuple[str, Any]]:
    """The job's output per order, as its confirmed record step stored it."""
    store = open_store(ctx)
    try:
        rows = store.all(SELECT_RESULTS, (job.RECORD_STEP,))
    finally:
        store.close()
    return [(row["order_id"], (json.loads(row["response"]) or {}).get("output")) for row in rows]


def stored_final_states(ctx: Context) -> None:
    """None: an order is one record, so no running state is carried across records."""
    return None


def stored_history(ctx: Context) -> dict[str, Any]:
    """Read-only, for the drill (drill/checks/history.py): every order's state and version with
    its transition rows, and the flow's legal moves: the history must be complete and in order."""
    store = open_store(ctx)
    try:
        orders, rows = store.all(SELECT_VERSIONS), store.all(SELECT_ALL_TRANSITIONS)
        logged = store.all(SELECT_ALL_STEPS)
    finally:
        store.close()
    entries: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        entries.setdefault(row["order_id"], []).append(
            {"seq": row["seq"], "event": row["event"], "from": row["from_state"], "to": row["to_state"]})
    steps: dict[str, dict[str, str]] = {}
    for row in logged:  # the step log: a step's transition needs its call confirmed
        steps.setdefault(row["order_id"], {})[row["step"]] = row["status"]
    return {"unit": "order", "entry": "transition", "initial": INITIAL_STATE, "operations": list(STEPS),
            "moves": [[source, event, target] for (source, event), target in LEGAL_MOVES.items()],
            "streams": [{"id": o["order_id"], "state": o["state"], "version": o["version"],
                         "entries": entries.get(o["order_id"], []), "operations": steps.get(o["order_id"], {})}
                        for o in orders]}


def held_claims(ctx: Context, store: Any = None) -> list[dict[str, Any]]:
    """Read-only, for the drill: every order held right now, ``{"what", "owner"}`` (a worker
    that stopped must hold none: drill/witness.py reads this after each run ends)."""
    return held_rows(ctx, open_store, SELECT_HELD_ORDERS, "order", ACTIVE_STATES, store=store)


# ------------------------------------------------------------------ queue input
# input_source=rabbitmq: `run` consumes a queue whose messages feed submit (runtime/amqp_input/);
# its critical windows join this strategy's, and the drill publishes its input there.
if INPUT_SOURCE == "rabbitmq":
    from ..runtime import amqp_input

    WINDOWS = {**WINDOWS, **amqp_input.WINDOWS}
    drill_submit, drill_report = amqp_input.drill_submit, amqp_input.drill_report
    drill_republish = amqp_input.drill_republish
