"""A failing drill, made smaller: the least work and the fewest faults that still fail the same check.

Delta debugging (Zeller's ddmin) over the schedule (schedule.py), one whole drill per try:
first fewer records (a quarter, then half of them), then fewer fault events (drop a
part of them, keep what still fails, split finer when nothing can go), then earlier
crash points (an aimed kill at its window's first pass, a persistence point halved, a
timed kill earlier in the run). A try "still fails" when its failures hold the first
failing check of the original run. Bounded by MAX_TRIES drills and BUDGET_S seconds,
whichever comes first; the best schedule found is written beside the run
(``drill-schedule-min.json``) and handed back as one command to rerun while fixing.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import settings as settings_module
from ..runtime.strategy import Context
from . import schedule as schedule_module
from . import verdict
from .runner import Drill

MAX_TRIES = 12
BUDGET_S = 150.0
#: Below this many records a drill cannot place its faults apart: shrinking stops there.
MIN_RECORDS = 40
MIN_FILE = "drill-schedule-min.json"


def shrink(ctx: Context, plan: schedule_module.Schedule, report: dict[str, Any],
           emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The smallest schedule found that still fails ``report``'s first failing check."""
    order = {check: i for i, check in enumerate(verdict.CHECKS)}
    check = sorted((f["check"] for f in report["failures"]), key=lambda c: order.get(c, len(order)))[0]
    base = Path(report["data_dir"])
    shrinker = _Shrinker(ctx, check, base / "shrink", emit)
    best = plan
    for fraction in (4, 2):
        records = plan.records // fraction
        if records >= MIN_RECORDS and shrinker.fails(_with_records(best, records)):
            best = _with_records(best, records)
            break
    best = _fewer_events(shrinker, best)
    best = _earlier(shrinker, best)
    path = best.renumbered().write(base / MIN_FILE)
    return {"check": check, "file": str(path), "records": best.records, "events": len(best.events),
            "from_records": plan.records, "from_events": len(plan.events), "tries": shrinker.tries,
            "seconds": round(time.monotonic() - shrinker.started, 1), "command": replay_command(path)}


def replay_command(path: Path) -> str:
    """The one line that reruns a schedule, from any directory of a fresh shell."""
    line = f"{shlex.quote(sys.executable)} -m {settings_module.PACKAGE} drill --replay {shlex.quote(str(path))}"
    if os.environ.get("DATABASE_URL"):
        # A drill submits its input into the database: a rerun needs one that is still empty.
        line += "   (with DATABASE_URL naming an empty database)"
    return line


class _Shrinker:
    def __init__(self, ctx: Context, check: str, where: Path, emit: Callable[[dict[str, Any]], None]) -> None:
        self.ctx, self.check, self.where, self.emit = ctx, check, where, emit
        self.tries = 0
        self.started = time.monotonic()

    @property
    def spent(self) -> bool:
        return self.tries >= MAX_TRIES or time.monotonic() - self.started >= BUDGET_S

    def fails(self, candidate: schedule_module.Schedule) -> bool:
        """Run the candidate (a whole drill, quietly); True if the same check fails."""
        if self.spent:
            return False
        self.tries += 1
        report = Drill(self.ctx, candidate.renumbered(), data_dir=self.where / f"try-{self.tries}",
                       emit=lambda event: None).run()
        failed = any(f["check"] == self.check for f in report["failures"])
        self.emit({"event": "shrink", "try": self.tries, "records": candidate.records,
                   "faults": len(candidate.events), "still_fails": failed})
        return failed


def _with_records(plan: schedule_module.Schedule, records: int) -> schedule_module.Schedule:
    """The plan on fewer records: resubmissions moved inside the smaller input."""
    events = []
    for event in plan.events:
        if "count" in event:
            count = max(1, min(event["count"], records // 20 or 1))
            event = dict(event, count=count)
            if "first" in event:
                event["first"] = min(event["first"], records - count)
        events.append(event)
    return replace(plan, records=records, events=events)


def _fewer_events(shrinker: _Shrinker, plan: schedule_module.Schedule) -> schedule_module.Schedule:
    """ddmin: drop one of ``parts`` parts of the events while the check still fails."""
    events = plan.events
    if events and shrinker.fails(replace(plan, events=[], kills=0)):
        return replace(plan, events=[], kills=0)
    parts = 2
    while len(events) >= 2 and not shrinker.spent:
        size = -(-len(events) // parts)
        chunks = [events[i:i + size] for i in range(0, len(events), size)]
        for chunk in chunks:
            rest = [e for e in events if e not in chunk]
            if shrinker.fails(replace(plan, events=rest)):
                events, parts = rest, max(parts - 1, 2)
                break
        else:
            if parts >= len(events):
                break
            parts = min(len(events), parts * 2)
    return replace(plan, events=events, kills=sum(e["kind"] in ("sigkill", "sigterm") for e in events))


def _earlier(shrinker: _Shrinker, plan: schedule_module.Schedule) -> schedule_module.Schedule:
    """Crash points moved earlier, all at once (one try): kept if the check still fails."""
    moved = []
    for event in plan.events:
        if "pass" in event:
            event = dict(event, **{"pass": 1})
        elif "point" in event:
            event = dict(event, point=max(1, event["point"] // 2))
        elif event["kind"] in ("sigkill", "sigterm") and "at" in event:
            event = dict(event, at=round(max(schedule_module.EARLIEST, event["at"] / 2), 4))
        moved.append(event)
    if moved != plan.events and shrinker.fails(replace(plan, events=moved)):
        return replace(plan, events=moved)
    return plan
