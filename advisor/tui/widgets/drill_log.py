"""One readable line per drill event, and the final verdict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text


def event_line(event: Mapping[str, Any]) -> Text | None:
    """A log line for kill/restart/recovered events (progress goes to the bar and chart)."""
    kind = event.get("event")
    t = event.get("t")
    at = f"{t:6.1f}s " if isinstance(t, (int, float)) else "        "
    if kind == "start":
        return Text(f"{at}started: {event.get('records', '?')} records, {event.get('kills', '?')} kills", style="dim")
    if kind == "kill":
        sig = event.get("signal", "SIGKILL") + (", successor on another host" if event.get("kind") == "other-host" else "")
        line = Text.assemble((f"{at}✕ kill {event.get('n')} ", "bold red"), f"{sig} after {event.get('done', '?')} records")
        if "exit_code" in event and event.get("exit_s") is not None:  # SIGTERM: how the worker stopped
            clean = event.get("exit_code") == 0 and event.get("within_grace", True)
            line.append(f", exited {event['exit_code']} in {_num(event.get('exit_s'), 2)} s",
                        style="green" if clean else "bold red")
        return line
    if kind == "fault":  # the schedule's other faults (the service, resubmissions, an outage, a reused key)
        return Text.assemble((f"{at}⚡ {event.get('kind', 'fault')} ", "bold magenta"),
                             f"after {event.get('done', '?')} records", (_fault_outcome(event), "dim"))
    if kind == "shrink":
        return Text(f"{at}shrinking: try {event.get('try')}, {event.get('records')} records, {event.get('faults')} "
                    f"fault(s): {'still fails' if event.get('still_fails') else 'passes'}", style="dim")
    if kind == "stalled":  # the drill's watchdog: the run stopped moving, its workers were stopped
        return Text.assemble((f"{at}⏸ stalled ", "bold red"), f"no call, effect or worker change for "
                             f"{_num(event.get('still_s'), 1)} s: the workers were stopped")
    if kind == "restart":
        return Text(f"{at}↻ restart {event.get('n')}", style="yellow")
    if kind == "recovered":
        ms = event.get("ms")
        took = f"{ms / 1000:.1f} s" if isinstance(ms, (int, float)) and ms >= 1000 else f"{ms if ms is not None else '?'} ms"
        return Text.assemble((f"{at}✔ recovered {event.get('n')} ", "green"), f"in {took}")
    return None


def _fault_outcome(event: Mapping[str, Any]) -> str:
    if "outcome" in event:
        return f": {event['outcome']}"
    if "calls" in event:
        return f": {event['calls']} call(s)"
    return ""


def verdict(report: Mapping[str, Any]) -> Text:
    """Lost, duplicated, MTTR: the three numbers that prove the design."""
    ok = bool(report.get("ok"))
    rec = report.get("recovery_ms") or {}
    text = Text()
    text.append("✔ PASSED  " if ok else "✘ FAILED  ", style="bold green" if ok else "bold red")
    # Records the drill added: new input while the workers ran, after a rebuild, and (a slow machine) so that
    # every fault could land.
    why = {"new_input_records": "submitted while the workers ran", "after_rebuild_records": "after a rebuild",
           "extended_records": "added to land every fault"}
    added = [f"{report[key]} {words}" for key, words in why.items() if report.get(key)]
    if added:
        text.append(f"{report.get('records')} records ({', '.join(added)}) · ")
    text.append(
        f"lost {report.get('lost', '?')} · duplicated {report.get('duplicate_effects', '?')} · "
        f"redone calls {report.get('redone_calls', '?')}\n"
    )
    graceful = report.get("graceful_exits") or []
    if graceful:
        clean = sum(1 for g in graceful if g.get("exit_code") == 0 and g.get("within_grace"))
        text.append(f"graceful exits {clean}/{len(graceful)} · ")
    text.append(
        f"MTTR p50 {rec.get('p50', '?')} ms · p95 {rec.get('p95', '?')} ms · max {rec.get('max', '?')} ms · "
        f"{report.get('kills', '?')} kills · {_num(report.get('throughput'))} records/s · "
        f"{_num(report.get('wall_s'))} s"
    )
    # A failed verdict names each check that failed: the counts above can all be 0 while the
    # results, the final state, the durability settings or the job's purity are wrong.
    for failure in report.get("failures") or []:
        text.append(f"\n✘ {failure.get('check')}: ", style="bold red")
        text.append(str(failure.get("message", "")))
    shrunk = report.get("shrunk")
    if isinstance(shrunk, Mapping) and shrunk.get("command"):  # the smallest failing schedule, to rerun
        text.append(f"\nsmallest failing schedule: {shrunk.get('records')} records, {shrunk.get('events')} "
                    f"fault(s); rerun: {shrunk['command']}")
    return text


def _num(value: Any, digits: int = 1) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "?"
