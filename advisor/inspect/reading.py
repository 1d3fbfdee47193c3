"""What one strategy reader finds in a data directory, and the phrases they share."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from advisor.inspect.owners import holder
from advisor.inspect.sources import Source

#: Steps of the demo job as each strategy's generated job.py declares them ('' = one effect per record).
STEPS = {"state-machine": ("reserve", "charge", "notify")}
DEFAULT_STEPS = ("",)
#: Rows listed one by one before the rest is only counted (a 2,000-order run stays readable).
LIST_LIMIT = 8
#: What the calls a killed worker may have made become on restart, by the project's effect_kind.
REDONE = {
    "idempotent": "re-sent with the same keys (the service answers duplicate)",
    "queryable": "looked up by key before any is sent again",
    "plain": "in doubt (plain calls: settled by `reconcile`, never claimed exactly once)",
}


def redone_by(effect_kind: str) -> str:
    return REDONE.get(effect_kind, "recovered by the project's effect_kind (re-sent with their keys, "
                                   "looked up, or held in doubt)")


@dataclass
class Point:
    """One recovery point: a task, an order, a stream, a subscriber or a checkpoint file."""

    id: str
    kind: str  # task | order | stream | subscriber | file
    status: str
    text: str  # in the strategy's own words
    done: int | None = None
    total: int | None = None
    highlight: bool = False
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "status": self.status, "done": self.done, "total": self.total,
                "highlight": self.highlight, "text": self.text, "detail": self.detail}


@dataclass
class Reading:
    strategy: str
    variant: str | None
    schema_version: int | None
    tables: list[dict[str, Any]]
    points: list[Point]
    summary: dict[str, Any]
    #: Calls recorded as prepared but not done: {"key", "record_id", "step", "where"}.
    in_doubt: list[dict[str, str]]
    resume: str
    #: (record_id, step) the input calls for, or None when the input is unknown.
    expected: set[tuple[str, str]] | None
    complete: bool
    more_points: int = 0


def steps_of(strategy: str) -> tuple[str, ...]:
    return STEPS.get(strategy, DEFAULT_STEPS)


def table_counts(source: Source, names: list[str]) -> list[dict[str, Any]]:
    present = set(source.tables())
    return [{"name": n, "rows": source.count(n)} for n in names if n in present]


def schema_version(source: Source) -> int | None:
    if "schema_version" not in source.tables():
        return None
    rows = source.rows("SELECT version FROM schema_version")
    return int(rows[0]["version"]) if rows else None


def ago(ts: float | None, now: float | None = None) -> str:
    if not ts:
        return "never"
    seconds = max(0.0, (now or time.time()) - float(ts))
    if seconds < 120:
        return f"{seconds:.1f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def owner_phrase(owner: str | None, heartbeat: float | None, lease_s: float, now: float | None = None,
                 *, here: str) -> str:
    """Who holds the row and whether another worker may take it: what a restart will do.
    ``here`` is this machine's host id as the project writes it (owners.host_id)."""
    if not owner:
        return "no owner"
    now = now or time.time()
    held = holder(owner, here)
    host, pid = held.host, held.pid
    beat = f"heartbeat {ago(heartbeat, now)}"
    if held.dead:
        return f"owner pid {pid} on host {host} is gone ({beat}): the next worker takes it over at once"
    if heartbeat is None or float(heartbeat) < now - lease_s:
        return f"owner pid {pid} on host {host} is silent ({beat}, lease {lease_s:g} s expired): any worker takes it over"
    until = time.strftime("%H:%M:%S", time.localtime(float(heartbeat) + lease_s))
    return f"owner pid {pid} on host {host}, lease until {until} ({beat})"


def record_of_key(key: str) -> str:
    """The record id inside an idempotency key such as ``demo-00000/r0000300/charge``."""
    parts = [p for p in key.split("/") if p]
    return next((p for p in reversed(parts) if p.startswith("r") and p[1:].isdigit()), parts[-1] if parts else key)


#: Ids named in a line that stands for many rows (the rest is counted).
IDS_SHOWN = 3


def collapse(points: list[Point], matches: Callable[[Point], bool], words: str, keep: int = 1) -> list[Point]:
    """The points ``matches`` picks folded into one counted line when more than ``keep`` of them:
    thousands of not-started tasks read as one line, not thousands. ``words`` follows the count and
    the first few ids (e.g. "not started: each resumes at record 0"); the sums of done/total stay."""
    same = [p for p in points if matches(p)]
    if len(same) <= keep:
        return points
    ids = ", ".join(p.id for p in same[:IDS_SHOWN]) + (", …" if len(same) > IDS_SHOWN else "")
    kind = same[0].kind
    folded = Point(f"{len(same)} {kind}s", kind, same[0].status, f"{len(same)} {kind}s ({ids}) {words}",
                   sum(p.done or 0 for p in same), sum(p.total or 0 for p in same),
                   highlight=any(p.highlight for p in same),
                   detail={"count": len(same), "ids": [p.id for p in same[:IDS_SHOWN]]})
    at = points.index(same[0])
    rest = [p for p in points if not matches(p)]
    return rest[:at] + [folded] + rest[at:]
