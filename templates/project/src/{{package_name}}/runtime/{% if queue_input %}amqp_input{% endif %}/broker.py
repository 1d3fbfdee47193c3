"""The queue input's broker side: the connection, the queue and its dead-letter queue, a message read.

The URL's password is never shown (``where``); a message that can never be worked on is a
``BadMessage`` (rejected without requeue, dead-lettered to ``<queue>.rejected``).
"""

from __future__ import annotations

import json
from typing import Any

import pika
from pika import exceptions as amqp_errors

from .. import correlation, submission
from ..errors import JobError, redact
from ..strategy import Context

#: A message body larger than this is rejected (a record list is read into memory whole).
MAX_BODY_BYTES = 16 * 1024 * 1024
#: The drill pins its own throwaway queue to its data directory (drill_submit).
DRILL_QUEUE_FILE = "drill-queue.json"
#: A drill's queue (and its dead-letter queue) is deleted by the broker this long after its last use.
DRILL_QUEUE_EXPIRES_S = 1800
#: How many messages the consumer has seen again, rejected, or found already submitted
#: (the drill reports them). Rare events: one small insert each.
LOG_TABLE = """
CREATE TABLE IF NOT EXISTS queue_input_log (
    correlation_id VARCHAR(255),
    event          VARCHAR(16)      NOT NULL,
    at             DOUBLE PRECISION NOT NULL
)"""
LOG_EVENT = "INSERT INTO queue_input_log (correlation_id, event, at) VALUES (?, ?, ?)"
COUNT_EVENTS = "SELECT event, COUNT(*) AS n FROM queue_input_log GROUP BY event"


class BadMessage(Exception):
    """A message that can never be worked on: rejected (dead-lettered), never retried."""


def connect(ctx: Context) -> pika.BlockingConnection:
    """A connection to the broker, or JobError/AMQPConnectionError (the URL's password is never shown)."""
    if not ctx.settings.amqp_url.startswith(("amqp://", "amqps://")):
        raise JobError(f"AMQP_URL {ctx.settings.amqp_url} is not an amqp:// or amqps:// URL")
    try:
        params = pika.URLParameters(ctx.settings.amqp_url)
    except Exception as exc:  # pika raises ValueError and friends for a malformed URL
        raise JobError(f"AMQP_URL {ctx.settings.amqp_url} is not a valid amqp:// URL: {exc}") from None
    params.heartbeat = ctx.settings.amqp_heartbeat_s
    params.connection_attempts = 1  # our own loop retries, with backoff and a limit
    params.socket_timeout = 5
    params.blocked_connection_timeout = max(60.0, ctx.settings.amqp_reconnect_max_s)
    try:
        return pika.BlockingConnection(params)
    except (amqp_errors.ProbableAuthenticationError, amqp_errors.ProbableAccessDeniedError,
            amqp_errors.AuthenticationError) as exc:
        raise JobError(f"the broker at {where(ctx)} refused the credentials or the vhost: "
                       f"{type(exc).__name__}") from None


def where(ctx: Context) -> str:
    return redact(ctx.settings.amqp_url)


def why(exc: BaseException) -> str:
    """The exception's class and its text, if any (pika's connection errors often have none)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text and text != "()" else type(exc).__name__


def queue_of(ctx: Context) -> tuple[str, int | None]:
    """The queue to consume and its expiry (ms): the drill's own in a drill directory, else the setting."""
    pinned = ctx.data_dir / DRILL_QUEUE_FILE
    if pinned.is_file():
        try:
            data = json.loads(pinned.read_text(encoding="utf-8"))
            return str(data["queue"]), int(data["expires_s"] * 1000)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise JobError(f"{pinned} is unreadable ({exc}); delete it to consume "
                           f"{ctx.settings.amqp_queue}") from None
    return ctx.settings.amqp_queue, None


def declare(channel: Any, queue: str, expires_ms: int | None) -> Any:
    """The durable queue and its dead-letter queue ``<queue>.rejected`` (same arguments every time:
    a queue declared before with other arguments is a clear error, see ``_session``)."""
    extra = {"x-expires": expires_ms} if expires_ms else {}
    channel.queue_declare(f"{queue}.rejected", durable=True, arguments=extra or None)
    return channel.queue_declare(queue, durable=True, arguments={
        "x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"{queue}.rejected", **extra})


def parse(body: bytes, correlation_id: str | None) -> tuple[list[dict[str, Any]], float]:
    """The records and work_ms a message carries; BadMessage says why it cannot be worked on."""
    if not correlation_id:
        raise BadMessage("no correlation_id property (it is what makes a redelivery harmless)")
    if len(body) > MAX_BODY_BYTES:
        raise BadMessage(f"body larger than {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadMessage(f"body is not JSON: {exc}") from None
    work_ms: Any = 0.0
    if isinstance(data, dict):
        data, work_ms = data.get("records"), data.get("work_ms", 0.0)
    if not isinstance(data, list):
        raise BadMessage('body must be a JSON list of records or {"records": [...]}')
    if not isinstance(work_ms, (int, float)) or isinstance(work_ms, bool) or not 0 <= work_ms <= 60_000:
        raise BadMessage("work_ms must be a number of milliseconds between 0 and 60000")
    try:
        correlation.check(correlation_id)
        # The same checks as submit --file (record_id, the fields job.RECORD_FIELDS names).
        records = submission.check_records(enumerate(data), where=lambda n: f"record {n}")
    except JobError as exc:
        raise BadMessage(str(exc)) from None
    return records, float(work_ms)
