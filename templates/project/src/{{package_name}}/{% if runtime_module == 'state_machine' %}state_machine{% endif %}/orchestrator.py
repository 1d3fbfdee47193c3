"""The state-machine strategy's orchestrator: claim an order, drive it step by step to its end.

Each step: its intent committed as ``prepared`` BEFORE the call, the call (retried on
transient errors by ``step_retry``, with the same key), then ``confirmed`` in the same
transaction as the transition AFTER it.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from .. import job
from ..runtime import effects, faults, metrics
from ..runtime.errors import BadRecord, CorruptStateError, StateVersionError, TransientError
from ..runtime.external import ExternalService
from ..runtime.owners import owner_gone, owner_id, ours_first
from ..runtime.shutdown import Shutdown
from ..runtime.store import Store
from ..runtime.strategy import Context
from .flow import ACTIVE_STATES, FINAL_STATES, check_transition, next_step
from .tables import (CLAIM_ORDER, CONFIRM_STEP, DROP_UNCALLED_STEPS, LOG_TRANSITION, MOVE_ORDER, ORDER_INPUT,
                     PREPARE_STEP, RELEASE_ORDER, SELECT_HELD, SELECT_NEXT_FREE, SELECT_ORDER, SELECT_STEP)


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


class StaleOrder(Exception):
    """The order moved under us (another worker took it over): stop driving it."""


def idempotency_key(order_id: str, step: str) -> str:
    """One key per (order, step): every attempt and every recovery of a step sends the same key."""
    return f"{order_id}/{step}"


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
        candidates = ours_first([row for row in self.store.all(SELECT_HELD, ACTIVE_STATES)
                                 if (row["owner"] == self.owner and row["instance_id"] != self.instance_id)  # pid reused
                                 or owner_gone(row["owner"], row["updated_at"], lease_s=lease_s, now=now)],
                                self.owner, self.instance_id)
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
        metrics.records_done(1 if final and error is None else 0)  # runtime/metrics.py: an order done
        order.update(state=target, version=order["version"] + 1, error=error)
        if error:
            self.log(f"order {order_id} failed in {source!r}: {error}")
