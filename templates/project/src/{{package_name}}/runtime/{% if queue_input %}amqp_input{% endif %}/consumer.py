"""The queue input's consumer: submit the messages in hand in one transaction, let the strategy
work, ack a message only once its work is finished in the state store.

See the package's docstring (``amqp_input/__init__.py``) for the guarantees.
"""

from __future__ import annotations

import sys
import time
import uuid
from typing import Any

from pika import exceptions as amqp_errors

from .. import faults, metrics
from ..errors import JobError, StoreError, redact
from ..owners import owner_id
from ..shutdown import Shutdown
from ..store import create_table
from ..strategy import Context
from .broker import LOG_EVENT, LOG_TABLE, BadMessage, connect, declare, parse, queue_of, where, why

#: Where each strategy records that a unit of work is finished (done, or failed for good).
FINISHED = {
    "checkpoint": ("tasks", "task_id", "status"),
    "idempotent-retry": ("tasks", "task_id", "status"),
    "state-machine": ("orders", "order_id", "state"),
}
FINAL = ("done", "failed")

#: Work passes for part of the messages in hand once that part holds at least this many records.
STEPWISE_RECORDS = 20
PREFETCH_RANGE = (1, 10_000)
#: Reconnect backoff: first wait, longest wait (seconds).
BACKOFF_S = (0.1, 2.0)


class Consumer:
    def __init__(self, ctx: Context, shutdown: Shutdown, *, follow: bool) -> None:
        low, high = PREFETCH_RANGE
        if not low <= ctx.settings.amqp_prefetch <= high:
            raise JobError(f"amqp_prefetch must be between {low} and {high}, not {ctx.settings.amqp_prefetch}")
        if ctx.strategy is None or ctx.strategy.NAME not in FINISHED:
            raise JobError("the queue input works with the checkpoint (table), idempotent-retry and "
                           "state-machine strategies")
        self.ctx, self.shutdown, self.follow = ctx, shutdown, follow
        self.strategy = ctx.strategy
        self.queue, self.expires_ms = queue_of(ctx)
        self.name = f"{owner_id()} {uuid.uuid4().hex[:8]}"
        self.store = self.strategy.open_store(ctx, create=True)
        create_table(self.store, LOG_TABLE)
        # Held open while consuming and lent to each work pass (one per batch of messages): no
        # connection opened per pass, and no WAL checkpoint (a full sync) that closing the LAST
        # connection to a SQLite file makes.
        self.external = ctx.external()
        #: delivery tag -> (correlation id, task ids, records) of the submitted, not yet acked messages
        self.pending: dict[int, tuple[str, list[str], int]] = {}
        self.outage_since: float | None = None
        self.backoff = BACKOFF_S[0]

    def log(self, message: str) -> None:
        print(f"[amqp {self.name}] {redact(message)}", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.external.close()
        self.store.close()

    def run(self) -> int:
        self.work()  # what the store already holds (submit --file, a predecessor's submitted messages)
        while True:
            try:
                return self._session()
            except (amqp_errors.AMQPConnectionError, amqp_errors.AMQPChannelError, ConnectionError) as exc:
                if isinstance(exc, amqp_errors.ChannelClosedByBroker) and exc.reply_code in (403, 404, 406):
                    raise JobError(f"the broker at {where(self.ctx)} refused queue {self.queue}: "
                                   f"{exc.reply_text} (declared before with other arguments?)") from None
                # The unacked messages go back to the queue with the connection: forget them here.
                self.pending.clear()
                if self.shutdown.requested:
                    return 0
                now = time.monotonic()
                if self.outage_since is None:
                    self.outage_since = now
                if now - self.outage_since > self.ctx.settings.amqp_reconnect_max_s:
                    raise JobError(f"the broker at {where(self.ctx)} stayed unreachable for "
                                   f"{self.ctx.settings.amqp_reconnect_max_s:g} s ({why(exc)}); "
                                   "its unacked messages stay queued") from None
                self.log(f"broker connection lost or refused ({type(exc).__name__}); "
                         f"retrying in {self.backoff:.1f} s")
                self._sleep(self.backoff)
                self.backoff = min(self.backoff * 2, BACKOFF_S[1])

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.shutdown.requested and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def _session(self) -> int:
        connection = connect(self.ctx)
        try:
            channel = connection.channel()
            declare(channel, self.queue, self.expires_ms)
            channel.basic_qos(prefetch_count=self.ctx.settings.amqp_prefetch)
            inbox: list[tuple[Any, Any, bytes]] = []
            channel.basic_consume(self.queue, lambda ch, method, props, body: inbox.append((method, props, body)))
            self.outage_since, self.backoff = None, BACKOFF_S[0]  # connected: the outage (if any) is over
            quiet_since = time.monotonic()
            while not self.shutdown.requested:
                metrics.beat()  # runtime/metrics.py: an idle consumer is alive (the liveness probe)
                connection.process_data_events(time_limit=0 if self.pending else 0.05)
                # Take what has arrived as one batch (up to the prefetch): fewer, larger work passes.
                while inbox and len(inbox) < self.ctx.settings.amqp_prefetch:
                    before = len(inbox)
                    connection.process_data_events(time_limit=0)
                    if len(inbox) == before:
                        break
                if inbox:
                    batch, inbox[:] = list(inbox), []
                    self.take(channel, batch)
                    quiet_since = time.monotonic()
                if self.pending:
                    # A pass for half of the records in hand (the older half of the messages, at least
                    # one), which is acked, and the broker sends the next ones while the other half is
                    # worked on: no wait for them after each pass. Below STEPWISE_RECORDS, one pass for
                    # all (a pass has a fixed cost: its first claim is a commit of its own).
                    sizes = [self.pending[tag][2] for tag in sorted(self.pending)]
                    half = sum(sizes[:max(1, len(sizes) // 2)])
                    self.work(limit=half if half >= STEPWISE_RECORDS else None)
                    if not self.settle(channel) and self.pending:
                        connection.sleep(0.05)  # another worker holds our tasks: give it time
                    quiet_since = time.monotonic()
                    continue
                if not self.follow and time.monotonic() - quiet_since >= self.ctx.settings.amqp_idle_s:
                    if self.drained(channel, time.monotonic() - quiet_since):
                        self.work()  # anything left in the store (another consumer's crash)
                        self.log(f"queue {self.queue} drained and its work done: exiting 0")
                        return 0
            # SIGTERM/SIGINT: the strategy stopped at a safe point; ack what is finished, the rest comes back.
            self.settle(channel)
            self.log(f"{self.shutdown.signal_name}: finished messages acked, the others go back to the queue")
            return 0
        finally:
            try:
                connection.close()
            except Exception:  # already closed or lost: the broker requeues the unacked messages anyway
                pass

    def take(self, channel: Any, batch: list[tuple[Any, Any, bytes]]) -> int:
        """Submit each message's records (deduped by correlation id); reject the bad ones. Returns how
        many were submitted.

        The batch's submissions go in as ONE transaction on the consumer's own connection
        (the strategy's ``submit_many``), each still deduped by its own correlation id: one
        commit per batch, not one per message (the commit, not the SQL, is what costs)."""
        metrics.queue_taken([props.timestamp for _, props, _ in batch])  # the queue lag, when published with one
        good: list[tuple[Any, str, list[dict[str, Any]], float]] = []
        events: list[tuple[str | None, str]] = []
        for method, props, body in batch:
            cid = props.correlation_id
            if method.redelivered:
                events.append((cid, "redelivered"))
            try:
                records, work_ms = parse(body, cid)
            except BadMessage as exc:
                self.reject(channel, method, cid, exc, events)
                continue
            good.append((method, cid, records, work_ms))
        # In the order they arrived: the strategy's submit_many locks their rows in correlation id
        # order (correlation.in_lock_order) and gives their tasks ids in this one.
        answers: list[Any] = []
        if good and hasattr(self.strategy, "submit_many"):
            try:
                answers = self.strategy.submit_many(self.ctx, self.store, [(c, r, w) for _, c, r, w in good])
            except StoreError:
                raise  # the store, not a message: they stay unacked and come back
            except JobError:
                answers = []  # one message the strategy refuses rolled back them all: one by one, below
        submitted = 0
        for n, (method, cid, records, work_ms) in enumerate(good):
            if answers:
                ids = answers[n]
            else:
                try:
                    ids = self.strategy.submit(self.ctx, records, work_ms=work_ms, correlation_id=cid)
                except StoreError:
                    raise
                except JobError as exc:
                    self.reject(channel, method, cid, exc, events)
                    continue
            if getattr(ids, "added", True) is False:
                events.append((cid, "deduped"))
            self.pending[method.delivery_tag] = (cid, [str(i) for i in ids], len(records))
            submitted += 1
        if events:  # rare (redeliveries, rejects): one small transaction for the batch
            with self.store.transaction():
                now = time.time()
                for cid, event in events:
                    self.store.execute(LOG_EVENT, (cid, event, now))
        for _ in range(submitted):
            faults.window("after_submit_before_work")  # once per message: a kill after any of a batch
        return submitted

    def reject(self, channel: Any, method: Any, cid: str | None, exc: Exception,
               events: list[tuple[str | None, str]]) -> None:
        self.log(f"rejected message {cid or '(no correlation_id)'} (delivery {method.delivery_tag}): {exc}")
        channel.basic_reject(method.delivery_tag, requeue=False)
        events.append((cid, "rejected"))

    def work(self, limit: int | None = None) -> None:
        """The strategy's own run: works until nothing it can claim is left (or about ``limit``
        records were done, or a shutdown)."""
        # On the consumer's own connections: a pass per batch opens nothing (strategy.py).
        code = int(self.strategy.run(self.ctx, self.shutdown, limit=limit, store=self.store, external=self.external))
        if code != 0:
            raise JobError(f"the {self.strategy.NAME} worker exited with code {code}; unacked messages stay queued")

    def settle(self, channel: Any) -> int:
        """Ack every pending message whose tasks are all finished in the state store; how many."""
        if not self.pending:
            return 0
        finished = self.finished({i for _, ids, _ in self.pending.values() for i in ids})
        ready = [tag for tag, (_, ids, _) in self.pending.items() if all(i in finished for i in ids)]
        if not ready:
            return 0
        for _ in ready:  # once per message (the drill aims at the N-th pass); no ack is sent before
            faults.window("after_commit_before_ack")
        # One frame (multiple=True) for the longest run of finished messages from the oldest
        # pending one: a multiple ack covers every tag up to its own, so only while none below
        # it is still pending. Those finished after a gap are acked one by one.
        done, tags = set(ready), sorted(self.pending)
        head = 0
        while head < len(tags) and tags[head] in done:
            head += 1
        if head > 1:
            channel.basic_ack(tags[head - 1], multiple=True)
            tags = tags[head:]
        for tag in tags:
            if tag in done:
                channel.basic_ack(tag)
        for tag in ready:
            del self.pending[tag]
        return len(ready)

    def finished(self, task_ids: set[str]) -> set[str]:
        table, key, column = FINISHED[self.strategy.NAME]
        found: set[str] = set()
        ids = sorted(task_ids)
        for first in range(0, len(ids), 500):
            chunk = ids[first:first + 500]
            rows = self.store.all(
                f"SELECT {key} AS id FROM {table} WHERE {column} IN ('done', 'failed') "
                f"AND {key} IN ({', '.join('?' * len(chunk))})", chunk)
            found.update(str(row["id"]) for row in rows)
        return found

    def drained(self, channel: Any, quiet_s: float) -> bool:
        """Nothing ready in the queue, and no other consumer that may hand messages back.

        A consumer killed a moment ago still counts until the broker notices, and its
        unacked messages come back only then: wait for it (but not forever, other live
        consumers count too)."""
        ok = channel.queue_declare(self.queue, passive=True).method
        metrics.queue_ready(ok.message_count)
        return ok.message_count == 0 and (ok.consumer_count <= 1 or quiet_s >= 10 * self.ctx.settings.amqp_idle_s)


def run(ctx: Context, shutdown: Shutdown, *, follow: bool = False) -> int:
    consumer = Consumer(ctx, shutdown, follow=follow)
    try:
        return consumer.run()
    finally:
        consumer.close()


