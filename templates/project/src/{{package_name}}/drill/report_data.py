"""The drill report's figures, from the run (runner.py) and what the service and the store say.

Every key of the report before the fault schedule existed is kept (the advisor, the TUI,
tests and docs read them); the schedule adds ``schedule``, ``faults``, ``history``,
``resubmissions``, ``key_reuse``, ``extended_records`` and the service's own failures.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..runtime.service_log import applications, calls_sent_after
from . import history as history_module
from . import schedule as schedule_module

KILL_KINDS = ("sigkill", "sigterm")


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (the smallest value with at least q of the values at or below it)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return round(ordered[rank - 1], 1)


def aimed_windows(plan: schedule_module.Schedule) -> list[str]:
    """The windows the plan's kills are aimed at (``--aim``), in order, once each."""
    return list(dict.fromkeys(e["window"] for e in plan.events if "window" in e and e["kind"] == "sigkill"))


def signal_name(plan: schedule_module.Schedule) -> str:
    kinds = {e["kind"] for e in plan.events if e["kind"] in KILL_KINDS}
    if kinds == {"sigterm"}:
        return "SIGTERM"
    return "SIGKILL" if kinds <= {"sigkill"} else "SIGKILL+SIGTERM"


def build_report(drill: Any, plan: schedule_module.Schedule, checked: dict[str, Any], calls: dict[str, Any],
                 state: dict[str, Any], expected: set[tuple[str, str]], wall_s: float, data_dir: Path,
                 schedule_path: Path) -> dict[str, Any]:
    tally = drill.tally
    ops = drill.history.ops
    kill_events = [e for e in plan.events if e["kind"] in KILL_KINDS]
    kills_for_rate = max(tally.kills_landed, 1)
    aims = aimed_windows(plan)
    undelivered = drill.armed + drill.timed
    planned: dict[str, int] = {}
    for event in plan.events:
        planned[event["kind"]] = planned.get(event["kind"], 0) + 1
        if event.get("damage"):  # a SIGKILL that also damages the newest checkpoint generation
            planned["damaged-checkpoint"] = planned.get("damaged-checkpoint", 0) + 1
    new_input = sum(o["records"] for o in history_module.of(ops, "new-input"))
    after_rebuild = sum(o.get("records", 0) for o in history_module.of(ops, "fault") if o.get("kind") == "rebuild")
    return {
        "strategy": plan.strategy,
        "records": len(drill.records),
        "records_requested": plan.records,
        # Records the drill added: to land every fault (the work ran out), and as new work mid-run (a fault).
        "extended_records": len(drill.records) - plan.records - new_input - after_rebuild,
        "after_rebuild_records": after_rebuild,
        "new_input_records": new_input,
        "reruns": drill.reruns,
        # How often the watch read the claims while the workers ran (claims_watch.py; 0: none to read).
        "claims_readings": drill.watch.readings,
        "expected_effects": len(expected),
        "kills": tally.kills_landed,
        "kills_requested": len(kill_events),
        "signal": signal_name(plan),
        "seed": plan.seed,
        "workers": plan.workers,
        "hosts": plan.hosts,
        "work_ms": plan.work_ms,
        "batch_size": drill.ctx.settings.batch_size,
        "fail_rate": plan.fail_rate,
        **checked,
        "effect_kind": calls["effect_kind"],
        "plain_policy": calls["plain_policy"],
        "promise": calls["promise"],
        "in_doubt": calls["in_doubt"],
        "in_doubt_ids": calls["in_doubt_ids"],
        "possible_duplicates": calls["possible_duplicates"],
        "redone_work_per_kill": round(max(0, checked["requests"] - len(expected)) / kills_for_rate, 1),
        "recovery_ms": {"p50": percentile(tally.recovery_ms, 0.5), "p95": percentile(tally.recovery_ms, 0.95),
                        "max": max(tally.recovery_ms) if tally.recovery_ms else None},
        "throughput": round(len(drill.records) / wall_s, 1) if wall_s > 0 else None,
        "wall_s": round(wall_s, 3),
        "graceful_exits": tally.graceful,
        "worker_failures": tally.worker_failures,
        "incomplete_records": state["total"] - state["done"],
        "kills_landed": tally.kills_landed,
        "workers_lost": tally.workers_lost,
        "hung_taken": tally.hung_taken,
        "aim": aims or None,
        "kills_by_window": tally.kills_by_window,
        "windows_not_reached": sorted({e["window"] for e in undelivered if "window" in e}),
        "faults": {kind: {"planned": n, "injected": tally.injected_by_kind.get(kind, 0)}
                   for kind, n in sorted(planned.items())},
        "faults_not_injected": [schedule_module.describe(e) for e in undelivered],
        "schedule": {"file": str(schedule_path), "seed": plan.seed, "kinds": plan.kinds, "skipped": plan.skipped,
                     "events": plan.events},
        "history": str(drill.history.path),
        # Calls a person released (reconcile, after the run: reconciler.py) are theirs, not the resubmission's.
        "resubmissions": [resubmission(o, data_dir, min((p["calls_before"] for p in drill.operator), default=None), ops)
                          for o in history_module.of(ops, "submit") if o.get("event") is not None],
        "key_reuse": [{k: o.get(k) for k in ("event", "key", "outcome", "message")}
                      for o in history_module.of(ops, "key")],
        "data_dir": str(data_dir),
    }


def resubmission(op: dict[str, Any], data_dir: Path, until: int | None = None,
                 ops: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A submission the drill made. For records already done (a new correlation id): the calls
    the service was asked to apply for them afterwards, ``sent_again`` (how many) and the first
    such record (``sent_again_example``). For records not done yet (``pending``): those applied
    twice with nothing to excuse it, ``applied_twice`` (how many) and ``applied_twice_example``."""
    found = {k: op.get(k) for k in ("event", "correlation_id", "records", "same", "outcome", "message")}
    if op.get("pending"):
        twice = beside_a_live_sender(applications(data_dir, op["record_ids"], until), ops or [])
        found.update(pending=True, applied_twice=len(twice), applied_twice_example=twice[0] if twice else None)
    elif op.get("record_ids") is not None:
        sent = calls_sent_after(data_dir, op["calls_before"], op["record_ids"], until)
        found["sent_again"], found["sent_again_example"] = len(sent), (sent[0] if sent else None)
    return found


def beside_a_live_sender(sends: dict[str, list[tuple[int, int, str]]], ops: list[dict[str, Any]]) -> list[str]:
    """The records the service applied a second time while nothing could make the second send a
    re-send in doubt: the first caller was never killed, stopped or crashed, its call did not time
    out, and no store outage came between the two (a caller cut off from its store may lose its
    claim). What is left is a second task of the same record run beside (or after) the first."""
    stopped = {o["pid"] for o in history_module.of(ops, "exit") if history_module.stopped(o)}
    found = []
    for rid, applied in sorted(sends.items()):
        for (first, pid, outcome), (second, other, _) in zip(applied, applied[1:]):
            if outcome == "timeout" or pid in stopped:
                continue
            if history_module.outages_between(ops, first, second):
                continue
            found.append(f"record {rid}: effect #{first} by pid {pid}, #{second} by pid {other}")
            break
    return found
