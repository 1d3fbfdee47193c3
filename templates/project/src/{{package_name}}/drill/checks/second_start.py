"""The job started twice on one data directory (check ``second_start``).

A design that runs one worker per data directory (the file variant: a lock file) must refuse a
second `run` while one works, or make it wait: two would both call the service for the same
records and overwrite each other's checkpoint. The drill's second-start fault (nemesis.py)
starts one and records, in the history, the calls it made before it exited (or was stopped).
"""

from __future__ import annotations

import signal
from typing import Any

from ..verdict import Failure, failure


#: How the second start may end while the first runs: refused (exit 2), or stopped by the drill while it waited.
REFUSED_OR_WAITING = (2, -signal.SIGKILL, -signal.SIGTERM)


def check(ops: list[dict[str, Any]]) -> list[Failure]:
    found = []
    for o in ops:
        if o.get("op") != "fault" or o.get("kind") != "second-start" or o.get("first_ended"):
            continue
        if o.get("calls"):
            found.append(failure("second_start", f"the job started again on the data directory of a running worker "
                                                 f"(pid {o['alongside']}) was not refused: pid {o['pid']} made "
                                                 f"{o['calls']} call(s) alongside it (one worker per data directory: "
                                                 "its lock must refuse the second, or make it wait)"))
        elif o.get("code") not in REFUSED_OR_WAITING:
            # Not refused, and no call yet: it ran into the first one's files (a crash on its checkpoint, or an
            # exit as if there were nothing to do) instead of meeting the lock.
            found.append(failure("second_start", f"the job started again on the data directory of a running worker "
                                                 f"(pid {o['alongside']}) was not refused: pid {o['pid']} exited with "
                                                 f"code {o.get('code')} beside it, where a refusal is exit 2 (one "
                                                 "worker per data directory: its lock must refuse the second, or make "
                                                 "it wait)"))
    return found
