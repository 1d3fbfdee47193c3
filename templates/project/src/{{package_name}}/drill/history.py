"""The drill's history: what happened, in order, as JSON lines (``drill-history.jsonl``).

Jepsen's shape (docs/generated-project.md): the nemesis (runner.py, nemesis.py) injects
the faults of the schedule and writes here what it did and what it saw; the checks read
this file and the stores, and never know how a fault was made. One object per line,
each with ``t`` (seconds since the drill started), ``op`` and ``done`` (effects applied
so far, when the runner knew it). The ops:

    start    seed, records, workers, schedule (its file)
    spawn    slot, pid, host, armed (the armed event's n, or null)
    ready    slot, pid: the worker's signal handlers are installed
    exit     slot, pid, code (a negative code: killed by that signal), by ("drill", "self"
             for an armed kill, "worker" for its own exit), event (n, or null),
             exit_s (seconds from the signal, for a SIGTERM)
    fault    event (n), kind, and what it did: calls (service), hold_s (outage),
             skipped (why it could not be injected)
    submit   event (n, or null for the input), correlation_id, records, outcome
             ("added", "repeat": answered with the earlier tasks, "refused"), message
    key      event (n), key, outcome ("refused", "accepted"), message
    extend   records: more work submitted so that every planned kill lands
    end      wall_s
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

HISTORY_FILE = "drill-history.jsonl"


class History:
    """Appends ops to the history file; each line is flushed at once (a killed drill leaves
    a readable history up to its last op)."""

    def __init__(self, data_dir: Path, t0: float | None = None) -> None:
        self.path = Path(data_dir) / HISTORY_FILE
        self.t0 = time.monotonic() if t0 is None else t0
        self._file = open(self.path, "a", encoding="utf-8")
        self.ops: list[dict[str, Any]] = []

    def t(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def add(self, op: str, **fields: Any) -> dict[str, Any]:
        entry = {"t": self.t(), "op": op, **fields}
        self.ops.append(entry)
        self._file.write(json.dumps(entry, sort_keys=True, default=str) + "\n")
        self._file.flush()
        return entry

    def close(self) -> None:
        self._file.close()


def read(path: Path) -> list[dict[str, Any]]:
    """Every op of a history file (a torn last line, from a killed drill, is left out)."""
    ops = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            ops.append(json.loads(line))
        except ValueError:
            continue
    return ops


def of(ops: list[dict[str, Any]], op: str) -> list[dict[str, Any]]:
    return [o for o in ops if o.get("op") == op]


def stopped(op: dict[str, Any]) -> bool:
    """An exit the drill caused (a kill, a stop, an armed kill) or a crash: the worker may have left
    a unit in flight for another to take over."""
    return op.get("by") in ("drill", "self") or bool(op.get("code"))


#: Effects either side of a store outage (the runner reads ``done`` around it) that it still covers.
OUTAGE_SLACK = 5


def outages_between(ops: list[dict[str, Any]], first: int, second: int) -> bool:
    """Did a store outage of the run come between two moments (effects applied, as ``done`` counts
    them)? A worker cut off from its store may lose its claim: what it sent may be sent again."""
    faults = [o for o in of(ops, "fault") if o.get("kind") == "store-outage"]
    ends = {o.get("event"): o.get("done", 2 ** 62) for o in faults if o.get("phase") == "end"}
    return any(o.get("done", 0) - OUTAGE_SLACK <= second and first <= ends.get(o.get("event"), 2 ** 62) + OUTAGE_SLACK
               for o in faults if o.get("phase") == "start")


#: The runner reads ``done`` just before it stops a worker; a re-send this many effects earlier may
#: still have come after the stop.
STOP_SLACK = 3


def takeovers(ops: list[dict[str, Any]], resent_from: dict[int, dict[int, int]]) -> dict[int, int]:
    """For each worker process, how many workers of OTHER slots it took units over from besides its
    predecessor (several workers at once: --workers, scale-out): stopped workers whose calls it sent
    again once they were stopped (``resent_from``: from the service's log, with the effects applied
    by then). A unit taken from a worker not yet stopped counts for nothing: that is a living
    holder's unit. A worker that killed itself (armed) or crashed is seen only once the drill
    notices: any re-send of its calls counts. One worker at a time: none."""
    slots = {o["pid"]: o["slot"] for o in of(ops, "spawn")}
    stopped_at = {o["pid"]: (o.get("done", 0) if o.get("by") == "drill" else 0) for o in of(ops, "exit") if stopped(o)}
    stopped_at |= {o["pid"]: o.get("done", 0) for o in of(ops, "hung")}  # hung: stopped long before it was killed

    def took_over(worker: int, applied: int) -> bool:
        return worker in stopped_at and stopped_at[worker] <= applied + STOP_SLACK

    return {pid: sum(1 for w, applied in resent_from.get(pid, {}).items() if slots.get(w) != slot and took_over(w, applied))
            for pid, slot in slots.items()}
