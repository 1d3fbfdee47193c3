"""The queue input: ``run`` consumes a RabbitMQ queue; a message is acked only after its work is done.

A message carries records (a JSON list, or ``{"records": [...], "work_ms": 0}``) and
a ``correlation_id`` property (its id, the same on every redelivery). The messages
in hand (up to the prefetch) are submitted together, in one transaction on the
consumer's own store connection (``strategy.submit_many``; one
``strategy.submit(ctx, records, correlation_id=...)`` each if the strategy refuses
one of them): for each message the work is added to the state store, or, when its
id was submitted before (a redelivery after a crash or a broker restart), the
existing work is found and nothing is added, in that same transaction. Then the
strategy's own ``run`` does the work, with every guarantee it has without a queue,
and only when every task of a message is finished (done, or failed for good) in the
state store is the message acked (one frame for a run of finished messages). So a kill at any moment leaves each unacked message either not submitted
(it is submitted when it comes back) or submitted (its redelivery finds the work,
done or not): nothing lost, nothing added twice.

* **Prefetch** (``basic_qos``, ``amqp_prefetch``): at most that many unacked
  messages per consumer; it bounds memory and what one crash hands back.
* **Broker restart**: a lost connection is retried with bounded backoff (up to
  ``amqp_reconnect_max_s`` of outage, then an error); the unacked messages come
  back to a consumer and are deduped as above.
* **Bad messages** (no usable correlation id, not JSON, records that ``submit --file``
  would refuse) are rejected without requeue and dead-lettered to ``<queue>.rejected`` with the reason logged.
* ``run`` exits 0 once the queue is drained and the work is done; ``run --follow``
  keeps consuming. SIGTERM: the work in hand is finished and committed, what is
  finished is acked, the rest goes back to the queue; exit 0.

``broker.py`` connects, declares the queues and reads a message; ``consumer.py`` is the
consumer; ``drill_queue.py`` feeds the drill's input through a queue of its own.
"""

from __future__ import annotations

from .broker import BadMessage, connect, declare, parse
from .consumer import FINISHED, Consumer, run
from .drill_queue import POISON_HEADER, data_dir_queue, drill_publish_raw, drill_report, drill_republish, drill_submit

__all__ = ["FINISHED", "POISON_HEADER", "WINDOWS", "BadMessage", "Consumer", "connect", "data_dir_queue", "declare",
           "drill_publish_raw", "drill_report", "drill_republish", "drill_submit", "parse", "run"]

#: The consumer's critical windows (added to the strategy's WINDOWS; drill --aim).
WINDOWS = {
    "after_submit_before_work": "a message's records are committed as work and none of it is done, the message is "
                                "not acked: the broker redelivers it and the redelivery must find that work (by "
                                "its correlation id), not add it again",
    "after_commit_before_ack": "a message's work is committed as finished, its ack is not sent: the redelivered "
                               "message must be acked without its work being added or done again",
}
