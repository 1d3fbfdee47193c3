"""The second-outage fault (a final one): each store outage gets the whole ``store_outage_s``.

A worker rides out an unreachable store for up to ``store_outage_s``, then exits 4
(runtime/outage.py); once it has committed again the outage is over, and the next one starts a
clock of its own. The main run's outages cannot show a clock that never restarts: its workers
ride them out with the default limit, a minute, far longer than the whole drill.

So, once every worker ended, the job runs once more, alone, with a short limit (LIMIT_S) on new
input: it meets an outage held well within the limit, commits again, and meets a second one
more than LIMIT_S after the first began. A worker whose clock kept running from the first
outage (or from its own start) gives up on the second at once: exit 4 while no outage was held
as long as the limit (checks/second_outage.py). A correct worker gives up only on an outage held
past its limit, and the drill measures how long it held each one: a slow machine delays the
release, never makes a correct worker look wrong.

Whatever the worker did, the job then runs as usual on what is left: the records are checked
like every other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .. import settings as settings_module
from ..runtime.errors import StoreError

#: The worker's store_outage_s in this run (seconds).
LIMIT_S = 1.5
#: SQLite: the worker's busy_timeout in this run, so that it meets the held lock (an outage) at once.
BUSY_TIMEOUT_MS = 50
#: Each outage is held this long past the worker's first failed try (its probe counts them) ...
HOLD_S = 0.2
#: ... or released after this long without one (the worker did not touch the store meanwhile; an
#: event store waits for a lock in whole seconds, one at least, before it fails).
SEEN_WAIT_S = 2.5
#: The second outage begins this long after the worker's first failed try in the first (its clock's
#: start), once it committed since the first ended.
APART_S = LIMIT_S + 0.3
#: New input, in batches of BATCH records of WORK_MS each: two at first, then one more whenever no
#: more than one is left, until the second outage begins (the worker must still be working then: it
#: ends once it finds nothing to do).
BATCH, WORK_MS = 200, 3.0
#: The whole fault gives up after this long (a worker that never commits): the job's run then finishes.
DEADLINE_S = 60.0
POLL_S = 0.02
ENV = {settings_module.ENV_PREFIX + "STORE_OUTAGE_S": str(LIMIT_S),
       settings_module.ENV_PREFIX + "BUSY_TIMEOUT_MS": str(BUSY_TIMEOUT_MS)}


class Run:
    """One worker's run through the two outages; ``outcome()`` is what the history records."""

    def __init__(self, proc: Any, probe: Callable[[int], dict[str, Any]], status: Callable[[], dict[str, Any]],
                 take: Callable[[], Any], add_work: Callable[[int, str, float], Any], label: str, *,
                 added: int, done_before: int) -> None:
        """``added``: the records of new input added for it, when ``done_before`` records were done."""
        self.proc, self.probe, self.status, self.take = proc, probe, status, take
        self.add_work, self.label, self.added, self.done_before = add_work, label, added, done_before
        self.began = time.monotonic()
        self.outages: list[dict[str, Any]] = []  # began, held_s, seen_s (when the worker first failed a try)
        self.ended_in: int | None = None  # the outage (1, 2) the worker ended in, if it ended in one
        self.batches = 1

    def play(self) -> dict[str, Any]:
        committed = self._until_committed(since=self.done_before)
        if committed is not None:
            clock_start = self._outage(1)
            if self._until_committed(since=committed, not_before=clock_start + APART_S, top_up=True) is not None:
                self._outage(2)
        self._wait_exit()
        return self.outcome()

    def outcome(self) -> dict[str, Any]:
        return {"pid": self.proc.pid, "code": self.proc.returncode, "limit_s": LIMIT_S, "outages": self.outages,
                "ended_in": self.ended_in, "batches": self.batches,
                "apart_s": round(self.outages[1]["began"] - self.outages[0]["began"], 3) if len(self.outages) > 1
                else None}

    # ---- the store, read only while the drill holds nothing (PostgreSQL: its locks would block the read)
    def _done(self) -> int:
        """The records done; -1 while the store does not answer the drill."""
        try:
            return int(self.status()["done"])
        except StoreError:
            return -1

    def _until_committed(self, *, since: int, not_before: float = 0.0, top_up: bool = False) -> int | None:
        """The records done, once more than ``since`` and not before ``not_before``; None if the worker ended
        first (or the deadline passed)."""
        while self.proc.poll() is None and time.monotonic() - self.began < DEADLINE_S:
            done = self._done()
            if done > since and time.monotonic() >= not_before:
                return done
            # Left of this fault's input: what it added less what was done since (a queue's messages are
            # not in the store until taken, so the store's own count of work left would not tell).
            left = self.added - (done - self.done_before)
            if top_up and done >= 0 and left <= BATCH and self.add_work(BATCH, f"{self.label}-{self.batches}", WORK_MS):
                self.batches, self.added = self.batches + 1, self.added + BATCH
            time.sleep(POLL_S)
        return None

    def _outage(self, number: int) -> float:
        """Hold the store away until the worker failed a try and HOLD_S more; when it first failed (or when the
        store was taken, if it never did)."""
        holder = None
        while holder is None and self.proc.poll() is None:
            holder = self.take()
            if holder is None:
                time.sleep(POLL_S)
        began = time.monotonic()
        if holder is None:  # the worker ended before the store could be taken
            return began
        before, seen_at = self._seen(), None
        try:
            while self.proc.poll() is None:
                holder.sweep()
                now = time.monotonic()
                if seen_at is None and self._seen() > before:
                    seen_at = now
                if (seen_at is not None and now - seen_at >= HOLD_S) or (seen_at is None and now - began >= SEEN_WAIT_S):
                    break
                time.sleep(POLL_S / 4)
        finally:
            if self.proc.poll() is not None:
                self.ended_in = number
            holder.release()
        # seen_s: when the worker first failed a try, from the take; what it could count is held_s - seen_s.
        self.outages.append({"began": round(began - self.began, 3), "held_s": round(time.monotonic() - began, 3),
                             "seen_s": None if seen_at is None else round(seen_at - began, 3)})
        return began if seen_at is None else seen_at

    def _seen(self) -> int:
        """The store outages the worker has met so far, as its probe wrote them (durability.py)."""
        return int(self.probe(self.proc.pid).get("outages", 0))

    def _wait_exit(self) -> None:
        try:
            self.proc.wait(timeout=max(1.0, DEADLINE_S - (time.monotonic() - self.began)))
        except Exception:  # still running: stopped; the job's next run finishes its work
            self.proc.kill()
            self.proc.wait()
