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
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from statemachine import State, StateMachine
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

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

NAME = "state-machine"
#: Orders are claimed one at a time (compare-and-set on their holder), so several
#: `run` processes (on PostgreSQL: several machines) share the orders.
MULTI_WORKER = True
#: A killed orchestrator's prepared step is re-sent with its key when the service is
#: idempotent (one call per kill, deduped); otherwise none (effects.py).
REDONE_CALLS_PER_KILL = effects.promise(1)
#: The critical windows (drill --aim): name -> what a kill there proves.
WINDOWS = {
    "after_call_before_transition": "a step's external call went through, the transition that confirms it is not "
                                    "committed: the restarted orchestrator finds the step's intent and treats the "
                                    "call by the service's kind (re-send with the key, look up, or hold in doubt)",
    "between_steps": "a step is confirmed and the order moved on (the next step's intent committed with it), the "
                     "next step is not called yet: the flow resumes at the next step, no step is lost or repeated",
}

#: What `reset` drops in the state store (strategy.py): every table schema.sql creates.
STORE_TABLES = ("orders", "transitions", "step_log", "schema_version")

SCHEMA_FILE = Path(__file__).parent.with_name("schema.sql")  # src/<package>/schema.sql
SCHEMA_VERSION = 2
#: MIGRATIONS[v] turns schema version v - 1 into v.
MIGRATIONS: dict[int, str] = {
    2: correlation.TABLE,  # submissions by correlation id
}

#: An order's input, stored with the order (versioned JSON, never pickle).
ORDER_INPUT = StateCodec("order-input", 1)


# ======================================================================== flow
class OrderFlow(StateMachine):
    """Every state of an order and every legal transition, declared in one place.

    Each event but ``fail`` is also a STEP: an external call whose success moves
    the order on. Keep states few: a state says where the flow is; whether a
    call really happened is the ``step_log``'s job.
    """

    new = State(initial=True)
    reserved = State()
    charged = State()
    done = State(final=True)
    failed = State(final=True)

    reserve = new.to(reserved)
    charge = reserved.to(charged)
    notify = charged.to(done)
    fail = new.to(failed) | reserved.to(failed) | charged.to(failed)


#: The external steps, in flow order: the ``step`` column of external.db's effects.
#: Declared in job.py, with their payloads, so the drill's oracle knows them
#: without this module; the flow above must have exactly these (checked below).
STEPS: tuple[str, ...] = job.STEPS
FINAL_STATES: tuple[str, ...] = tuple(s.value for s in OrderFlow.final_states)
ACTIVE_STATES: tuple[str, ...] = tuple(s.value for s in OrderFlow.states if not s.final)


class IllegalTransition(JobError):
    """An event the flow does not allow in the order's current state."""


#: The legal moves, read once from OrderFlow's declaration: (state, event) -> next state.
#: The orchestrator checks every transition against this table (a dict lookup):
#: building a python-statemachine instance per order costs ~0.1 ms, as much as
#: the transition's own commit. Guards or actions added to OrderFlow (``cond=``,
#: ``on_<event>``) would need the machine itself: see ``machine_for``.
LEGAL_MOVES: dict[tuple[str, str], str] = {
    (state.value, event.id): transition.target.value
    for state in OrderFlow.states for transition in state.transitions for event in transition.events
}
_FLOW_STEPS = {event for (_, event) in LEGAL_MOVES} - {"fail"}
if _FLOW_STEPS != set(STEPS):
    raise ImportError(f"OrderFlow's steps {sorted(_FLOW_STEPS)} differ from job.STEPS {sorted(STEPS)}; "
                      "declare the same steps in both")


class _Holder:
    """A model python-statemachine reads and writes the current state on."""

    def __init__(self, state: str) -> None:
        self.state = state


def machine_for(state: str) -> OrderFlow:
    """The declared machine, restored to ``state`` (for guards, actions, diagrams)."""
    return OrderFlow(model=_Holder(state))


def allowed_events(state: str) -> list[str]:
    return [event for (source, event) in LEGAL_MOVES if source == state]


def next_step(state: str) -> str:
    """The step that moves an order on from ``state`` (the one allowed event that is not ``fail``)."""
    steps = [event for event in allowed_events(state) if event in STEPS]
    if len(steps) != 1:
        raise IllegalTransition(f"state {state!r} has no next step")
    return steps[0]


def check_transition(order_id: str, state: str, event: str) -> str:
    """The state ``event`` leads to from ``state``; an illegal event is a clear error."""
    target = LEGAL_MOVES.get((state, event))
    if target is None:
        allowed = ", ".join(allowed_events(state)) or "none: the order is finished"
        raise IllegalTransition(f"order {order_id}: {event!r} is not allowed in state {state!r} "
                                f"(allowed: {allowed})")
    return target


# ==================================================================== policies
# Transient errors of a step's call are retried here, with exponential backoff
# and full jitter, a bounded number of times (declared once). The intent stays
# 'prepared' meanwhile, and every attempt carries the same idempotency key.
STEP_ATTEMPTS = 8
BACKOFF_FIRST_S = 0.005  # demo values; a real remote API wants e.g. 0.2 s ... 30 s
BACKOFF_MAX_S = 1.0


def step_retry(sleep: Callable[[float], None] = time.sleep) -> Retrying:
    return Retrying(retry=retry_if_exception_type(TransientError), stop=stop_after_attempt(STEP_ATTEMPTS),
                    wait=wait_random_exponential(multiplier=BACKOFF_FIRST_S, max=BACKOFF_MAX_S),
                    sleep=sleep, reraise=True)


# What each step sends to the outside world is declared in job.py (step_payload;
# job.RECORD_STEP is process_record's own effect): edit it there.


# -------------------------------------------------------------------------- SQL
INSERT_ORDER = """
INSERT INTO orders (order_id, input, state, version, created_at, updated_at)
VALUES (?, ?, 'new', 0, ?, ?) ON CONFLICT (order_id) DO NOTHING"""

COUNT_ORDERS = "SELECT COUNT(*) AS n FROM orders"

# Orders in mid-flow with a holder: the holder may be dead (kill -9).
SELECT_HELD = f"""
SELECT order_id, owner, instance_id, updated_at FROM orders
WHERE owner IS NOT NULL AND state IN ({", ".join("?" * len(ACTIVE_STATES))})"""

SELECT_NEXT_FREE = f"""
SELECT order_id, owner, instance_id, updated_at FROM orders
WHERE owner IS NULL AND state IN ({", ".join("?" * len(ACTIVE_STATES))}) ORDER BY order_id LIMIT 1"""

# Compare-and-set on the holder: of two workers taking the same order, one wins.
CLAIM_ORDER = """
UPDATE orders SET owner = ?, instance_id = ?, claimed_at = ?, updated_at = ?
WHERE order_id = ? AND COALESCE(instance_id, '') = ?"""

SELECT_ORDER = "SELECT * FROM orders WHERE order_id = ?"

SELECT_STEP = "SELECT status, idempotency_key, context_id FROM step_log WHERE order_id = ? AND step = ?"

# The intent, committed BEFORE the call. ON CONFLICT DO NOTHING: an intent a
# killed orchestrator left 'prepared' stays as it is (and is looked up).
PREPARE_STEP = """
INSERT INTO step_log (order_id, step, idempotency_key, status, context_id, prepared_at)
VALUES (?, ?, ?, 'prepared', ?, ?) ON CONFLICT (order_id, step) DO NOTHING"""

CONFIRM_STEP = """
UPDATE step_log SET status = 'confirmed', response = ?, confirmed_at = ?
WHERE order_id = ? AND step = ? AND status = 'prepared'"""

# The transition: optimistic on (state, version) and on our hold of the order.
MOVE_ORDER = """
UPDATE orders SET state = ?, version = version + 1, error = ?, updated_at = ?,
                  owner = CASE WHEN ? = 1 THEN NULL ELSE owner END
WHERE order_id = ? AND state = ? AND version = ? AND instance_id = ?"""

LOG_TRANSITION = """
INSERT INTO transitions (order_id, seq, event, from_state, to_state, context_id, at)
VALUES (?, ?, ?, ?, ?, ?, ?)"""

RELEASE_ORDER = "UPDATE orders SET owner = NULL, updated_at = ? WHERE order_id = ? AND instance_id = ?"

# An order claimed but never started: our intent of its first step was never called.
DROP_UNCALLED_STEPS = "DELETE FROM step_log WHERE order_id = ? AND status = 'prepared' AND context_id = ?"

SELECT_COUNTS = """
SELECT state, COUNT(*) AS n, SUM(version) AS transitions, MIN(claimed_at) AS first_claim, MAX(updated_at) AS last
FROM orders GROUP BY state"""

SELECT_FAILED = "SELECT order_id, state, version, error FROM orders WHERE state = 'failed' ORDER BY order_id LIMIT 20"


class StaleOrder(Exception):
    """The order moved under us (another worker took it over): stop driving it."""


# ---------------------------------------------------------------------- storage
def open_store(ctx: Context, *, create: bool = False) -> Store:
    store = connect(ctx.data_dir, ctx.settings, create=create)
    apply_schema(store, SCHEMA_FILE.read_text(encoding="utf-8"), SCHEMA_VERSION, MIGRATIONS)
    return store


def idempotency_key(order_id: str, step: str) -> str:
    """One key per (order, step): every attempt and every recovery of a step sends the same key."""
    return f"{order_id}/{step}"


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
        return [_add(ctx, store, records, work_ms, cid) for cid, records, work_ms in submissions]


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


# ------------------------------------------------------------------ orchestrator
class Orchestrator:
    def __init__(self, ctx: Context, store: Store, external: ExternalService, shutdown: Shutdown, *,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.ctx, self.store, self.external, self.shutdown, self.sleep = ctx, store, external, shutdown, sleep
        self.effects = effects.Effects(external, ctx.data_dir, ctx.settings)
        #: The context id of this start: written with every transition and intent it makes.
        self.instance_id = uuid.uuid4().hex
        self.owner = owner_id()
        self.finished = 0
        #: Claim the next order in the transaction that finishes this one (see transition()).
        self.claim_next = False
        #: The order so claimed, if any: driven next.
        self.next_order: dict[str, Any] | None = None

    def log(self, message: str) -> None:
        print(f"[{self.owner} {self.instance_id[:8]}] {message}", file=sys.stderr, flush=True)

    def run(self, limit: int | None = None) -> int:
        # Safe point = between orders: an order in hand is carried to its end first
        # (a few external calls), so a graceful stop leaves no step half done.
        while not self.shutdown.requested and (limit is None or self.finished < limit):
            order, self.next_order = self.next_order or self.claim(), None
            if order is None:
                return 0
            self.claim_next = limit is None or self.finished + 1 < limit
            try:
                self.drive(order)
            except StaleOrder:
                self.log(f"order {order['order_id']} was taken over by another worker; left to it")
            self.finished += 1
        if self.next_order is not None:  # claimed with the last transition, never started
            self.release(self.next_order)
            self.next_order = None
        if self.shutdown.requested:
            self.log(f"{self.shutdown.signal_name}: the order in hand reached its end, exiting 0")
        return 0

    # ---- claiming
    def claim(self) -> dict[str, Any] | None:
        """An order whose holder died mid-flow (carried on), else the next free one."""
        with self.store.transaction():
            return self._claim_in_transaction()

    def _claim_in_transaction(self, tries: int = 5) -> dict[str, Any] | None:
        """The claim, and the intent of the order's next step in the same commit (the intent
        must be durable before the call; it needs no commit of its own)."""
        now = time.time()
        lease_s = self.ctx.settings.lease_s
        candidates = [row for row in self.store.all(SELECT_HELD, ACTIVE_STATES)
                      if (row["owner"] == self.owner and row["instance_id"] != self.instance_id)  # pid reused
                      or owner_gone(row["owner"], row["updated_at"], lease_s=lease_s, now=now)]
        free = self.store.one(SELECT_NEXT_FREE, ACTIVE_STATES)
        if free is not None:
            candidates.append(free)
        for row in candidates:
            if self.store.execute(CLAIM_ORDER, (self.owner, self.instance_id, now, now, row["order_id"],
                                                row["instance_id"] or "")).rowcount == 1:
                order = self.store.one(SELECT_ORDER, (row["order_id"],))
                assert order is not None
                if row["owner"] is not None:
                    self.log(f"carrying on order {row['order_id']} in state {order['state']!r}: "
                             f"its orchestrator {row['owner']} is gone")
                self._prepare_next_step(order["order_id"], order["state"], now)
                return order
        if free is not None and tries > 1:
            # Another worker claimed that one between our read and our update (PostgreSQL lets
            # both read it): look again, instead of leaving as if no work were left.
            return self._claim_in_transaction(tries - 1)
        return None

    def _prepare_next_step(self, order_id: str, state: str, now: float) -> None:
        """Inside a transaction: the intent of the step that moves the order on from ``state``.
        ON CONFLICT DO NOTHING: an intent a killed orchestrator left stays its own (and is looked up)."""
        if state not in FINAL_STATES:
            step = next_step(state)
            self.store.execute(PREPARE_STEP, (order_id, step, idempotency_key(order_id, step), self.instance_id, now))

    def release(self, order: dict[str, Any]) -> None:
        """Hand back an order claimed but never started (and drop its intent, never called)."""
        with self.store.transaction():
            self.store.execute(DROP_UNCALLED_STEPS, (order["order_id"], self.instance_id))
            self.store.execute(RELEASE_ORDER, (time.time(), order["order_id"], self.instance_id))

    # ---- one order
    def drive(self, order: dict[str, Any]) -> None:
        """Carry the order from its current state to a final one, step by step."""
        order_id = order["order_id"]
        try:
            data = ORDER_INPUT.loads(order["input"])
            record, work_ms = data["record"], float(data.get("work_ms", 0.0))
        except (CorruptStateError, StateVersionError, KeyError, TypeError, ValueError) as exc:
            self.transition(order, "fail", error=f"unreadable order input: {exc}")
            return
        while order["state"] not in FINAL_STATES:
            step = next_step(order["state"])
            try:
                response = self.perform(order_id, step, record, work_ms)
            except BadRecord as exc:  # permanent: the order cannot go on
                self.transition(order, "fail", error=str(exc))
                return
            except TransientError as exc:  # retries exhausted: the order fails with its reason
                self.transition(order, "fail", error=f"{step} gave up after {STEP_ATTEMPTS} attempts: {exc}")
                return
            faults.window("after_call_before_transition")
            self.transition(order, step, step=step, response=response)
            if order["state"] not in FINAL_STATES:
                faults.window("between_steps")

    def perform(self, order_id: str, step: str, record: dict[str, Any], work_ms: float) -> dict[str, Any]:
        """One step's external call: intent before; on recovery the rule of the service's kind."""
        key = idempotency_key(order_id, step)
        logged = self.store.one(SELECT_STEP, (order_id, step))
        # Prepared by an orchestrator that died before confirming: its call may have got through.
        recovering = logged is not None and logged["context_id"] != self.instance_id
        if logged is None:
            with self.store.transaction():  # the intent is durable BEFORE the call
                self.store.execute(PREPARE_STEP, (order_id, step, key, self.instance_id, time.time()))

        def call(payload: Any, step_: str = "") -> dict[str, Any]:
            for attempt in step_retry(self.sleep):
                with attempt:
                    return self.effects.call(order_id, step, key, payload, recovering=recovering)
            raise AssertionError("unreachable: tenacity re-raises the last error")

        if step == job.RECORD_STEP:
            # The job's own computation and effect (job.py). Recomputed on recovery too
            # (the job is a pure function of its record), so the confirmed step stores
            # the output even when the call itself is only looked up.
            output = job.process_record(record, call, work_ms=work_ms)
            return {"status": "applied", "output": output}
        return call(job.step_payload(step, record))

    def transition(self, order: dict[str, Any], event: str, *, step: str | None = None,
                   response: dict[str, Any] | None = None, error: str | None = None) -> None:
        """Confirm the step (if any), move the state and log the transition: one transaction.

        The same commit prepares the intent of the next step (durable before its call, no
        commit of its own) or, when the order is finished, claims the next order: one
        commit per step.
        """
        order_id, source = order["order_id"], order["state"]
        target = check_transition(order_id, source, event)  # an illegal event is a clear error
        final = target in FINAL_STATES
        with self.store.transaction():
            now = time.time()
            if step is not None:
                self.store.execute(CONFIRM_STEP, (json.dumps(response), now, order_id, step))
            moved = self.store.execute(MOVE_ORDER, (target, error, now, 1 if final else 0, order_id, source,
                                                    order["version"], self.instance_id)).rowcount
            if moved != 1:
                raise StaleOrder(order_id)  # rolls the confirmation back too
            self.store.execute(LOG_TRANSITION, (order_id, order["version"] + 1, event, source, target,
                                                self.instance_id, now))
            claimed = None
            if not final and step is not None:
                self._prepare_next_step(order_id, target, now)
            elif final and self.claim_next and not self.shutdown.requested:
                claimed = self._claim_in_transaction()
        self.next_order = claimed
        order.update(state=target, version=order["version"] + 1, error=error)
        if error:
            self.log(f"order {order_id} failed in {source!r}: {error}")


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
SELECT_HISTORY = """
SELECT seq, event, from_state, to_state, context_id, at FROM transitions WHERE order_id = ? ORDER BY seq"""

SELECT_STEPS = """
SELECT step, status, idempotency_key, context_id, prepared_at, confirmed_at FROM step_log
WHERE order_id = ? ORDER BY prepared_at"""


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
SELECT_RESULTS = """
SELECT order_id, response FROM step_log WHERE step = ? AND status = 'confirmed' ORDER BY order_id"""


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


# ------------------------------------------------------------------ queue input
# input_source=rabbitmq: `run` consumes a queue whose messages feed submit (amqp_input.py);
# its critical windows join this strategy's, and the drill publishes its input there.
if INPUT_SOURCE == "rabbitmq":
    from ..runtime import amqp_input

    WINDOWS = {**WINDOWS, **amqp_input.WINDOWS}
    drill_submit, drill_report = amqp_input.drill_submit, amqp_input.drill_report
