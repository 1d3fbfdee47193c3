"""The drill's watch over the claims while the workers run (check ``heartbeat_kept``).

A claimed unit (a task, an order, a subscriber's lease) carries its holder's heartbeat; another
worker takes the unit over once the heartbeat is older than the lease. A holder that moves its
unit on (a checkpoint's offset, an order's next transition, a subscriber's position) without
renewing the heartbeat looks silent while it works: the first unit that outlasts the lease is
taken from a living worker, and both send its calls. A drill's units are short (kills come every
few seconds), so that takeover rarely happens here; the missing renewal shows sooner (a unit
that ends between two readings cannot show it: the ``service-slow`` fault slows every call for a
while, so units of several steps are read mid-flight). Several
times a second the watch reads the strategy's ``held_claims`` (runtime/strategy.py) on a
connection of its own and compares each claim with the reading before: the same holder, more
progress, the very same heartbeat is a move without a renewal. A design may renew the heartbeat in
a write of its own rather than in the one that moves the unit on, so one such move proves nothing;
MIN_MOVES of them in a row under one heartbeat is a holder whose heartbeat stays where its claim put
it however long it works. The history gets one ``claim`` op per such unit; the check reads them
(checks/claims.py).

Nothing is read while the nemesis holds the store (an outage), and a reading that fails (the store
busy or not created yet) is skipped. The watch never holds up the runner's loop for long: a reading
waits for a lock READ_TIMEOUT_MS at most, and the next one comes after at least COST_RATIO times as
long as this one took (a loaded machine or a server store reads less often), so the loop that times
the kills spends a small share of its time here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..runtime.store import connect
from ..runtime.strategy import Context
from .history import History

#: Seconds between two readings: a checkpoint moves on every batch, an order every step.
WATCH_S = 0.1
#: Moves on under one unchanged heartbeat before the watch calls it a holder that never renews it.
MIN_MOVES = 2
#: A reading waits this long for a lock at most (ms): the runner's loop must not stall.
READ_TIMEOUT_MS = 100
#: The pause after a reading is at least this many times what the reading took.
COST_RATIO = 9


class ClaimsWatch:
    def __init__(self, ctx: Context, history: History, busy: Callable[[], bool]) -> None:
        self.ctx, self.history, self.busy = ctx, history, busy
        self.read = getattr(ctx.strategy, "held_claims", None)
        self.store: Any = None
        self.last: dict[str, dict[str, Any]] = {}
        self.reported: set[str] = set()
        # (unit, holder, heartbeat) -> the progress readings of its moves without a renewal
        self.silent: dict[tuple[str, str, Any], list[Any]] = {}
        self.readings = 0
        self._next = 0.0

    def tick(self) -> None:
        now = time.monotonic()
        if self.read is None or now < self._next or self.busy():
            return
        try:
            claims = self.read(self.ctx, store=self._open())
        except Exception:  # busy, between a restart's schema steps, not created yet: next time
            self.close()
            return
        finally:
            took = time.monotonic() - now
            self._next = now + took + max(WATCH_S, COST_RATIO * took)
        self.readings += 1
        current = {c["what"]: c for c in claims}
        for what, claim in current.items():
            before = self.last.get(what)
            if before is None or what in self.reported or not _moved_on_silently(before, claim):
                continue
            seen = self.silent.setdefault((what, claim["owner"], claim["heartbeat"]), [before["progress"]])
            seen.append(claim["progress"])
            if len(seen) > MIN_MOVES:
                self.reported.add(what)
                self.history.add("claim", what=what, owner=claim["owner"], heartbeat=claim["heartbeat"],
                                 progress=[seen[0], seen[-1]], moves=len(seen) - 1)
        self.last = current

    def holding(self) -> bool:
        """Some unit was held at the last reading (always True where nothing is read: no claims)."""
        return self.read is None or bool(self.last)

    def _open(self) -> Any:
        if self.store is None:
            store = connect(self.ctx.data_dir, self.ctx.settings)
            store.execute(f"PRAGMA busy_timeout = {READ_TIMEOUT_MS}" if store.dialect == "sqlite"
                          else f"SET statement_timeout = {READ_TIMEOUT_MS * 5}")
            self.store = store
        return self.store

    def close(self) -> None:
        if self.store is not None:
            try:
                self.store.close()
            except Exception:
                pass
            self.store = None


def _moved_on_silently(before: dict[str, Any], now: dict[str, Any]) -> bool:
    """One holder, further on, the same heartbeat (claims without heartbeat or progress: never)."""
    if before.get("owner") != now.get("owner") or now.get("owner") is None:
        return False
    if None in (before.get("progress"), now.get("progress"), now.get("heartbeat")):
        return False
    return bool(now["progress"] > before["progress"] and now["heartbeat"] == before.get("heartbeat"))
