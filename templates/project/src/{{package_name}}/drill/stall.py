"""The drill's watchdog: a run that stops moving is a finding, not a drill that waits forever.

A worker that loops on work it can never finish (a message put back on the queue again
and again, a unit every worker waits for while nobody holds it) never ends on its own,
and a drill that waits for it never gives a verdict. The run moves while the service
sees calls or effects, or a worker starts or ends; the drill's own holds (a store outage
it keeps up) pause the clock. Still for ``limit_s`` with workers running: the drill stops
them, and the ``stalled`` check says what it saw.
"""

from __future__ import annotations

import time
from typing import Any

#: The watchdog waits at least this long: well past the longest pause a correct project makes
#: (the queue's idle check, backoff after an outage, a slow interpreter start) ...
STALL_MIN_S = 120.0
#: ... and this many leases: a unit whose holder died is free again only once its lease ran out.
STALL_LEASES = 4


class Stall:
    def __init__(self, lease_s: float, limit_s: float | None = None) -> None:
        self.limit_s = limit_s if limit_s is not None else max(STALL_MIN_S, STALL_LEASES * float(lease_s))
        self.mark: Any = None
        self.since = time.monotonic()
        #: What the drill saw when it called the run stalled (the report's ``stalled``), else None.
        self.found: dict[str, Any] | None = None

    def still_for(self, mark: Any, *, paused: bool, now: float) -> float | None:
        """Seconds the run has been still, once past the limit (None: it moves, or not for long).
        ``mark``: what moves when the run moves; ``paused``: the drill holds a fault (no clock)."""
        if paused or mark != self.mark:
            self.mark, self.since = mark, now
            return None
        still = now - self.since
        return still if still >= self.limit_s else None

    def stop(self, still_s: float, done: int, total: int, workers: int) -> dict[str, Any]:
        self.found = {"still_s": round(still_s, 1), "limit_s": self.limit_s, "done": done, "total": total,
                      "workers": workers}
        return self.found


def message(found: dict[str, Any]) -> str:
    """The ``stalled`` failure's text."""
    return (f"the run stopped moving: {found['workers']} worker(s) ran {found['still_s']:g} s with no call, no "
            f"effect and no worker starting or ending ({found['done']} of {found['total']} expected effects "
            "applied), so the drill stopped them. A worker that never ends on its own loops on work it can never "
            "finish: a message put back on the queue every time it fails, a unit every worker waits for and "
            "nobody holds; see drill-workers.log (a job.py that really works longer than that on one record without a "
            "call: give the drill --stall-s with more seconds)")
