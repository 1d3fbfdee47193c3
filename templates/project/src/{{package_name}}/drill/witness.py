"""A drilled worker's own account of its run: the history the drill's checks read.

The drill's checks know nothing of how a fault was made (Jepsen's shape: faults, a
history, checkers). Part of that history can only be written from inside the worker,
so its probe (durability.py) keeps an :class:`Account` and writes it into its report
(``<drill dir>/drill-durability/<pid>.json``) as things happen:

* ``owner``: ``owners.owner_id()``, the id this process writes on every claim;
* ``started_at``: when its ``run`` began, written at once: by then its SIGTERM handler is
  installed (a runner that waits for it never signals a worker still starting up);
* ``ended``: how its ``run`` ended, told by cli.py (``probe_hook``): ``{"signal":
  "SIGTERM" or null, "code": 0, "held": [...], "at": time.time()}``, where ``held`` is what the strategy's
  ``held_claims(ctx)`` still shows under this process's owner id AFTER its run returned
  (a worker that stops, gracefully or because the work is done, must hold nothing).
  A worker killed by SIGKILL never writes it: that is how the checks tell the two apart;
* ``acks`` (queue input): every message ack, seen at pika's ``basic_ack`` (wrapped here:
  whatever code path acks is seen; with ``auto_ack`` each delivery is an ack), and ``acked_uncommitted``: the correlation ids whose
  work (their ``submissions`` row, runtime/correlation.py) was not committed at the moment
  of the ack, read on a connection of the probe's own, which sees only committed rows.
  A kill right after such an ack loses the message: the broker forgets it, the store never
  had it. Checked on every ack, so the bug is seen on every run, not when a kill lands.

Nothing here runs unless the drill started the process (durability.PROBE_ENV).
"""

from __future__ import annotations

import time
from typing import Any

from ..runtime.correlation import SELECT as SELECT_SUBMISSION
from ..runtime.errors import StoreError
from ..runtime.owners import owner_id
from ..settings import INPUT_SOURCE

#: Correlation ids kept per process for messages (the count is exact, the list an example).
KEEP_IDS = 5


class Account:
    def __init__(self) -> None:
        self.owner = owner_id()
        self.started_at: float | None = None
        self.ended: dict[str, Any] | None = None
        self.acks = 0
        self.uncommitted: list[str] = []
        self.uncommitted_n = 0
        self._ctx: Any = None
        self._reader: Any = None  # the probe's own store connection (queue input only)
        self._unwatch: list[tuple[Any, str, Any]] = []

    # ---- the run, told by cli.py
    def run_started(self, ctx: Any) -> None:
        self._ctx = ctx
        self.started_at = time.time()  # its SIGTERM handler is installed by now (cli.py)

    def run_ended(self, ctx: Any, signal_name: str | None, code: int) -> None:
        held: list[dict[str, Any]] | str = []
        read = getattr(ctx.strategy, "held_claims", None)
        if read is not None:
            try:
                held = [claim for claim in read(ctx) if claim.get("owner") == self.owner]
            except Exception as exc:  # an unreachable store (the run gave up on an outage): say so
                held = f"unreadable: {type(exc).__name__}: {exc}"
        self.ended = {"signal": signal_name, "code": int(code), "held": held, "at": time.time()}
        self._close_reader()

    # ---- acks (queue input)
    def watch_acks(self, probe: Any) -> None:
        """Wrap pika's blocking channel: which correlation id each delivery tag carries
        (basic_consume's callback), and every ack (basic_ack) as it is sent."""
        if INPUT_SOURCE != "rabbitmq":
            return  # no queue: nothing to watch, pika not even imported
        from pika.adapters.blocking_connection import BlockingChannel

        tags: dict[int, dict[int, str]] = {}  # channel -> outstanding delivery tag -> correlation id
        real_consume, real_ack = BlockingChannel.basic_consume, BlockingChannel.basic_ack
        real_reject, real_nack = BlockingChannel.basic_reject, BlockingChannel.basic_nack

        def basic_consume(channel: Any, queue: str, on_message_callback: Any, *args: Any, **kwargs: Any) -> Any:
            seen = tags.setdefault(id(channel), {})
            auto_ack = bool(kwargs.get("auto_ack", args[0] if args else False))

            def noted(ch: Any, method: Any, props: Any, body: bytes) -> Any:
                if auto_ack:  # the broker counts it acked as it is delivered: before any work
                    probe.saw_acks([str(props.correlation_id)])
                else:
                    seen[method.delivery_tag] = str(props.correlation_id)
                return on_message_callback(ch, method, props, body)

            return real_consume(channel, queue, noted, *args, **kwargs)

        def settled(channel: Any, delivery_tag: int, multiple: bool) -> list[str]:
            """The correlation ids an ack, reject or nack settles (no longer outstanding after it)."""
            seen = tags.get(id(channel), {})
            done = [t for t in sorted(seen) if t <= delivery_tag] if multiple else [delivery_tag]
            return [seen.pop(t) for t in done if t in seen]

        def basic_ack(channel: Any, delivery_tag: int = 0, multiple: bool = False) -> Any:
            ids = settled(channel, delivery_tag, multiple)
            if ids:
                probe.saw_acks(ids)  # before the ack leaves: is the work committed now?
            return real_ack(channel, delivery_tag, multiple)

        def basic_reject(channel: Any, delivery_tag: int = 0, requeue: bool = True) -> Any:
            settled(channel, delivery_tag, False)  # rejected, not acked: no work to have
            return real_reject(channel, delivery_tag, requeue)

        def basic_nack(channel: Any, delivery_tag: int = 0, multiple: bool = False, requeue: bool = True) -> Any:
            settled(channel, delivery_tag, multiple)
            return real_nack(channel, delivery_tag, multiple, requeue)

        patched = {"basic_consume": basic_consume, "basic_ack": basic_ack, "basic_reject": basic_reject,
                   "basic_nack": basic_nack}
        self._unwatch = [(BlockingChannel, name, getattr(BlockingChannel, name)) for name in patched]
        for name, wrapper in patched.items():
            setattr(BlockingChannel, name, wrapper)

    def unwatch_acks(self) -> None:
        for owner, name, real in self._unwatch:
            setattr(owner, name, real)
        self._unwatch = []
        self._close_reader()

    def acked(self, correlation_ids: list[str]) -> bool:
        """Count the acks; True when one of them had no committed work (the probe writes at once)."""
        self.acks += len(correlation_ids)
        missing = [cid for cid in correlation_ids if not self._committed(cid)]
        if not missing:
            return False
        self.uncommitted_n += len(missing)
        self.uncommitted += missing[:max(0, KEEP_IDS - len(self.uncommitted))]
        return True

    def _committed(self, correlation_id: str) -> bool:
        if self._ctx is None:
            return False  # an ack before run started: nothing can have been committed by it
        if self._reader is None:
            self._reader = self._ctx.strategy.open_store(self._ctx)
        try:
            return self._reader.one(SELECT_SUBMISSION, (correlation_id,)) is not None
        except StoreError:
            # The store went away (an outage cut this connection): the ack fails as the worker's
            # own would, and the next one reads on a connection opened anew.
            self._close_reader()
            raise

    def _close_reader(self) -> None:
        if self._reader is not None:
            try:
                self._reader.close()
            except Exception:  # noqa: BLE001 - a store gone away: nothing to close
                pass
            self._reader = None

    def report(self) -> dict[str, Any]:
        return {"owner": self.owner, "started_at": self.started_at, "ended": self.ended, "acks": self.acks,
                "acked_uncommitted": self.uncommitted, "acked_uncommitted_n": self.uncommitted_n}


def worker_entry(doc: dict[str, Any]) -> dict[str, Any]:
    """One process, from its probe report, as the checks read it (drill/checks/exits.py)."""
    return {"pid": int(doc.get("pid", 0)), "owner": doc.get("owner"), "ended": doc.get("ended"),
            "outages": int(doc.get("outages", 0)), "last_outage_at": float(doc.get("last_outage_at") or 0.0),
            "acks": int(doc.get("acks", 0)),
            "acked_uncommitted": list(doc.get("acked_uncommitted") or []),
            "acked_uncommitted_n": int(doc.get("acked_uncommitted_n", 0))}
