"""A hung holder's unit is taken over once its lease ran out (check ``hung_holder``).

The hung-worker fault (hung_worker.py) stopped a worker (SIGSTOP) while it held a unit, waited out
the short lease it ran with, and started another worker on the same host. A hung process renews
nothing and its pid is alive: only the lease can free its unit, and it must. A unit the second
worker left with the hung one means a rule trusted over the lease (a live pid, a heartbeat read
from the wrong column, a lease read in the wrong unit): in production that unit waits until
someone kills the hung process by hand.
"""

from __future__ import annotations

from typing import Any

from ..verdict import Failure, failure


def check(ops: list[dict[str, Any]]) -> list[Failure]:
    found = []
    for o in ops:
        if o.get("op") != "fault" or o.get("kind") != "hung-worker" or not o.get("not_taken"):
            continue
        units = ", ".join(o["not_taken"])
        found.append(failure("hung_holder", f"a worker hung (SIGSTOP, pid {o['pid']} alive) while holding {units}, "
                                            f"with lease_s={o['lease_s']:g}; the worker started on the same host "
                                            f"once that lease had run out (pid {o['taker']}) did not take it over "
                                            f"within {o['frozen_s']:g} s: the lease must be the bound on how long "
                                            "a silent holder keeps its unit, whatever its pid says"))
    return found
