"""Riding out a state store outage: ``run`` keeps going through a PostgreSQL restart.

A worker whose state store goes away (:class:`StoreUnavailable`: a connection cut, a
server restarting or refusing connections, SQLite locked beyond ``busy_timeout``)
does not exit at once. It

1. logs one line: what is unreachable, why, and for how long it will try (and one
   more at its first commit after the outage: reachable again, after how long);
2. lets the strategy close what it had open (its ``run`` closes its connections on
   the way out) and waits, with exponential backoff capped at a few seconds and
   jittered so that workers cut off together do not all come back in one instant;
3. calls the strategy's ``run`` again, in this process: fresh connections, and
   recovery from the committed state exactly as after a kill (rows this process
   held before are taken back at once, their owner being this very process);
4. past ``store_outage_s`` without reaching the store, exits with
   :data:`EXIT_STORE_UNAVAILABLE` (4) and a message naming the store. SIGTERM or
   SIGINT during a wait ends it at once with exit 0, as a graceful shutdown does:
   nothing is in hand, the committed state stands.

An outage is timed from its first failure. A commit made since (the store answered)
ends it, so a later outage gets the full time again.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable

from . import metrics, probe_hook, store
from .errors import EXIT_OK, EXIT_STORE_UNAVAILABLE, JobError, StoreUnavailable
from ..settings import ENV_PREFIX
from .shutdown import Shutdown

#: The first pause; each failed try doubles it, up to BACKOFF_CAP_S.
BACKOFF_FIRST_S = 0.25
BACKOFF_CAP_S = 4.0
#: A pause is slept in slices this long so that a signal ends it at once.
WAKE_S = 0.05


def backoff_s(retry: int, rng: random.Random) -> float:
    """The pause before retry number ``retry`` (0, 1, ...): BACKOFF_FIRST_S doubled per
    retry up to BACKOFF_CAP_S, of which a random half to all is taken (the jitter)."""
    ceiling = min(BACKOFF_CAP_S, BACKOFF_FIRST_S * 2 ** min(retry, 32))
    return ceiling * (0.5 + 0.5 * rng.random())


class Outage:
    """The clock of one outage: when it began and how many retries it has had."""

    def __init__(self, limit_s: float, began: float, rng: random.Random) -> None:
        self.limit_s, self.began, self.rng = limit_s, began, rng
        self.retries = 0
        #: The store's commit count when the outage began: a commit since ends it.
        self.commits = store.commits()

    def next_pause(self, now: float) -> float | None:
        """Seconds to wait before the next try, or None: the time is up. The last pause
        ends exactly at the limit, so the last try is made then."""
        remaining = self.began + self.limit_s - now
        if remaining <= 0:
            return None
        pause = min(backoff_s(self.retries, self.rng), remaining)
        self.retries += 1
        return pause


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _wait(seconds: float, shutdown: Shutdown, clock: Callable[[], float],
          sleep: Callable[[float], None]) -> bool:
    """Sleep ``seconds`` unless a shutdown is requested; False if it was."""
    until = clock() + seconds
    while not shutdown.requested:
        metrics.beat()  # waiting on purpose: alive (the outage has its own gauge and alert)
        left = until - clock()
        if left <= 0:
            return True
        sleep(min(WAKE_S, left))
    return False


def _tell_probe() -> None:
    """In a drilled worker: an outage restarts the work in flight, as a kill does; the drill
    allows its re-sent calls the same way (probe_hook.py)."""
    if probe_hook.observer is not None:
        probe_hook.observer.saw_outage()


def _back(outage: Outage, log: Callable[[str], None], clock: Callable[[], float]) -> Callable[[], None]:
    def back() -> None:
        metrics.store_unreachable(None)
        log(f"state store reachable again after {clock() - outage.began:.1f} s; "
            f"resumed from the committed state")
    return back


def ride_out(attempt: Callable[[], int], shutdown: Shutdown, limit_s: float, *,
             log: Callable[[str], None] = _log, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> int:
    """``attempt()`` (the strategy's run), again and again while the store is unreachable
    for less than ``limit_s``; its exit code, or EXIT_STORE_UNAVAILABLE."""
    if not limit_s >= 0:  # also NaN
        raise JobError(f"{ENV_PREFIX}STORE_OUTAGE_S={limit_s!r}: must be zero or more seconds")
    rng = rng or random.Random()
    outage: Outage | None = None
    while True:
        try:
            return attempt()
        except StoreUnavailable as exc:
            now = clock()
            _tell_probe()
            metrics.checkpoint_failed(exc)  # once per error (the transaction may have counted it)
            if outage is None or store.commits() != outage.commits:
                outage = Outage(limit_s, now, rng)
                metrics.store_unreachable(now)
                log(f"{str(exc).rstrip('.')}; retrying for up to {limit_s:g} s")
                store.after_next_commit(_back(outage, log, clock))
            pause = None if shutdown.requested else outage.next_pause(now)
            if shutdown.requested or (pause is not None and not _wait(pause, shutdown, clock, sleep)):
                log(f"{shutdown.signal_name} while the state store is unreachable: nothing is in hand, "
                    f"the committed state stands; exiting 0")
                return EXIT_OK
            if pause is None:
                log(f"error: {str(exc).rstrip('.')}; still unreachable after {limit_s:g} s, giving up (exit code "
                    f"{EXIT_STORE_UNAVAILABLE}; {ENV_PREFIX}STORE_OUTAGE_S sets how long to wait)")
                return EXIT_STORE_UNAVAILABLE
