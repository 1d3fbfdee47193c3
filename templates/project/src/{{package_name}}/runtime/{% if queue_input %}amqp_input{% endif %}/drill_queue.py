"""How the drill feeds a queue project: its input published to a throwaway queue of its own
(``drill_submit``), and the queue's figures added to its report (``drill_report``).

The strategy modules hand these to the drill (strategy.py: ``drill_submit``, ``drill_report``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pika
from pika import exceptions as amqp_errors

from ..errors import JobError, TransientError
from ..store import create_table
from ..strategy import Context
from .broker import COUNT_EVENTS, DRILL_QUEUE_EXPIRES_S, DRILL_QUEUE_FILE, LOG_TABLE, connect, declare, queue_of, where, why


def records_per_message(ctx: Context) -> int:
    """The drill's messages: for checkpoint a task's worth of records, at most a batch (a drill
    needs many messages: each one passes the consumer's windows once); one record otherwise."""
    if ctx.strategy is None or ctx.strategy.NAME != "checkpoint":
        return 1
    return max(1, min(ctx.settings.task_size, ctx.settings.batch_size))


def drill_submit(ctx: Context, records: list[dict[str, Any]], *, work_ms: float = 0.0,
                 more: str | None = None) -> list[str]:
    """The drill's input: the demo records published as persistent messages (each with a
    correlation id) to a queue of its own, pinned to the drill's data directory, confirmed
    by the broker before the workers start. ``more`` (a tag): records added to the pinned
    queue later (the drill extends its work), under correlation ids of their own."""
    if ctx.strategy is None:
        raise JobError("no strategy loaded")
    if not more:  # later the store exists, and may be away (the drill's idle outage publishes during one)
        ctx.strategy.open_store(ctx, create=True).close()
    pinned = ctx.data_dir / DRILL_QUEUE_FILE
    earlier = json.loads(pinned.read_text(encoding="utf-8")) if more and pinned.is_file() else None
    queue = earlier["queue"] if earlier else f"{ctx.settings.amqp_queue}.drill-{uuid.uuid4().hex[:10]}"
    prefix = f"drill-{more}-" if more else "drill-"
    per = records_per_message(ctx)
    ids = []
    if more:  # mid-run (the drill may have restarted the broker): the drill tries again later
        connection = _connect_mid_run(ctx)
    else:
        try:
            connection = connect(ctx)
        except amqp_errors.AMQPConnectionError as exc:
            raise JobError(f"the drill needs the broker at {where(ctx)} (set AMQP_URL): {why(exc)}") from None
    try:
        channel = connection.channel()
        declare(channel, queue, DRILL_QUEUE_EXPIRES_S * 1000)
        # A transaction per chunk: tx_commit returns once the broker has the persistent messages
        # (safely stored), without a round trip per message as publisher confirms would need.
        channel.tx_select()
        for n, first in enumerate(range(0, len(records), per)):
            cid = f"{prefix}{n:06d}"
            channel.basic_publish("", queue, json.dumps({"records": records[first:first + per], "work_ms": work_ms}),
                                  pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent,
                                                       correlation_id=cid, content_type="application/json",
                                                       timestamp=int(time.time())))  # metrics: queue lag
            ids.append(cid)
            if len(ids) % 500 == 0:
                channel.tx_commit()
        channel.tx_commit()
    except amqp_errors.AMQPError as exc:
        if more:  # nothing of this chunk was committed: the drill tries again later
            raise TransientError(f"the broker at {where(ctx)} failed while the drill published more input "
                                 f"({why(exc)})") from None
        raise JobError(f"the broker at {where(ctx)} failed while the drill published its input "
                       f"({why(exc)}); run the drill again") from None
    finally:
        if connection.is_open:
            connection.close()
    _pin(pinned, {"queue": queue, "expires_s": DRILL_QUEUE_EXPIRES_S,
                  "messages": len(ids) + (earlier or {}).get("messages", 0), "records_per_message": per})
    return ids


def _pin(pinned: Path, doc: dict[str, Any]) -> None:
    """The pinned queue's file, written whole and synced before it is renamed into place (and the rename
    synced): every worker finds the drill's queue after a power cut, not an empty file."""
    tmp = pinned.with_name(pinned.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(doc))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, pinned)
    directory = os.open(pinned.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def drill_republish(ctx: Context, records: list[dict[str, Any]], first: int, count: int,
                    work_ms: float = 0.0) -> list[str]:
    """The drill's resubmit-same fault on a queue (drill/schedule.py): the messages holding
    ``records[first:first + count]`` published again, with their correlation ids and bodies (a
    producer retrying): the consumer must find them submitted already and queue nothing twice."""
    per = records_per_message(ctx)
    numbers = range(first // per, (first + count - 1) // per + 1)
    ids = [f"drill-{n:06d}" for n in numbers]
    _publish_mid_run(ctx, [(json.dumps({"records": records[n * per:(n + 1) * per], "work_ms": work_ms}).encode(),
                            pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent, correlation_id=cid,
                                                 content_type="application/json"))
                           for n, cid in zip(numbers, ids)], "published again")
    return ids


#: The header that marks the drill's malformed messages (drill/bad_input.py): each is told apart in
#: the dead-letter queue by it, also one without a correlation id.
POISON_HEADER = "x-drill-malformed"


def drill_publish_raw(ctx: Context, messages: list[tuple[bytes, str | None, str]]) -> None:
    """The drill's malformed-input fault on a queue (drill/bad_input.py): each ``(body, correlation id or
    None, name)`` published as it is, persistent, marked with POISON_HEADER = name."""
    _publish_mid_run(ctx, [(body, pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent, correlation_id=cid,
                                                       content_type="application/json", headers={POISON_HEADER: name}))
                           for body, cid, name in messages], "published malformed input")


def _publish_mid_run(ctx: Context, messages: list[tuple[bytes, Any]], what: str) -> None:
    """``(body, properties)`` published in one transaction on the drill's queue while the workers run.
    TransientError when the broker is away (a drill may restart it): nothing was published (the
    transaction was not committed), and the drill tries again later."""
    queue, _ = queue_of(ctx)
    connection = _connect_mid_run(ctx)
    try:
        channel = connection.channel()
        channel.tx_select()
        for body, properties in messages:
            channel.basic_publish("", queue, body, properties)
        channel.tx_commit()
    except amqp_errors.AMQPError as exc:
        raise TransientError(f"the broker at {where(ctx)} failed while the drill {what} ({why(exc)})") from None
    finally:
        if connection.is_open:
            connection.close()


def _dead_letters(channel: Any, queue: str) -> dict[str, Any]:
    """What ``<queue>.rejected`` holds: the drill's malformed messages by name (how many copies of
    each) and how many others. Read without an ack: closing the channel puts every one back."""
    poison: dict[str, int] = {}
    other: list[str] = []
    while True:
        method, props, _ = channel.basic_get(f"{queue}.rejected", auto_ack=False)
        if method is None:
            return {"malformed": poison, "other": len(other), "other_ids": other[:5]}
        name = (props.headers or {}).get(POISON_HEADER)
        if name:
            poison[str(name)] = poison.get(str(name), 0) + 1
        else:
            other.append(str(props.correlation_id))


def drill_report(ctx: Context) -> dict[str, Any]:
    """The queue's figures for the drill report: messages seen again (redelivered), found already
    submitted (deduped), rejected, and what is left in the queue (0 when every message was acked)."""
    store = ctx.strategy.open_store(ctx) if ctx.strategy is not None else None
    counts: dict[str, int] = {}
    if store is not None:
        try:
            create_table(store, LOG_TABLE)
            counts = {row["event"]: int(row["n"]) for row in store.all(COUNT_EVENTS)}
        finally:
            store.close()
    queue, _ = queue_of(ctx)
    left: int | None = None
    dead: dict[str, Any] | None = None
    try:
        connection = connect(ctx)
        try:
            channel = connection.channel()
            left = int(channel.queue_declare(queue, passive=True).method.message_count)
            dead = _dead_letters(channel, queue)
        finally:
            connection.close()
    except (amqp_errors.AMQPError, JobError):
        pass
    pinned = ctx.data_dir / DRILL_QUEUE_FILE
    messages = json.loads(pinned.read_text(encoding="utf-8")).get("messages") if pinned.is_file() else None
    return {"input_source": "rabbitmq", "queue": queue, "messages": messages,
            "redelivered": counts.get("redelivered", 0), "deduped": counts.get("deduped", 0),
            "rejected": counts.get("rejected", 0), "queue_left": left, "dead_lettered": dead}


def data_dir_queue(data_dir: Path) -> str | None:
    """The drill queue pinned to a data directory, if any (for tests and tools)."""
    pinned = data_dir / DRILL_QUEUE_FILE
    return str(json.loads(pinned.read_text(encoding="utf-8"))["queue"]) if pinned.is_file() else None


def _connect_mid_run(ctx: Context) -> Any:
    """A connection for the drill's publishes while the workers run. TransientError when the broker is
    away, or refuses a login it took at the start (it is starting again): the drill tries again later."""
    try:
        return connect(ctx)
    except amqp_errors.AMQPConnectionError as exc:
        raise TransientError(f"the broker at {where(ctx)} is away ({why(exc)})") from None
    except JobError as exc:
        raise TransientError(str(exc)) from None
