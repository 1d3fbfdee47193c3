"""`advisor inspect`'s text: the report of inspect.py in the strategy's own words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

IN_DOUBT_SHOWN = 3


def headline(report: Mapping[str, Any]) -> str:
    store = report["store"]
    kind = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "files": "checkpoint files in"}[store["kind"]]
    name = report["strategy"] + (f" ({report['variant']} variant)" if report.get("variant") else "")
    version = f", schema version {report['schema_version']}" if report.get("schema_version") is not None else ""
    return f"{name} · {kind} {store['location']}{version}"


def table_line(report: Mapping[str, Any]) -> str | None:
    tables = report.get("tables") or []
    return "tables: " + ", ".join(f"{t['name']} {t['rows']}" for t in tables) if tables else None


def in_doubt_lines(report: Mapping[str, Any]) -> list[str]:
    doubt = report.get("in_doubt") or []
    if not doubt:
        return ["in doubt: nothing (no call may have been made without being recorded as done)"]
    applied = sum(1 for d in doubt if d.get("external") == "applied")
    lines = [f"in doubt: {len(doubt)} call(s) maybe made, not done — {applied} got through (found in external.db), "
             f"{len(doubt) - applied} did not; recovery settles each by its idempotency key instead of trusting the state"]
    for d in doubt[:IN_DOUBT_SHOWN]:
        lines.append(f"  {d['key']} ({d['where']}): {d.get('external', '?')}")
    if len(doubt) > IN_DOUBT_SHOWN:
        lines.append(f"  … and {len(doubt) - IN_DOUBT_SHOWN} more")
    return lines


def render(report: Mapping[str, Any]) -> str:
    lines = [headline(report)]
    if report.get("note"):
        lines.append(f"data: {report['data_dir']} ({report['note']})")
    else:
        lines.append(f"data: {report['data_dir']}")
    table = table_line(report)
    if table:
        lines.append(table)
    lines.append("recovery point:")
    for p in report["recovery_points"]:
        lines.append(("▶ " if p["highlight"] else "  ") + p["text"])
    if report.get("more_recovery_points"):
        lines.append(f"  … and {report['more_recovery_points']} more")
    lines += in_doubt_lines(report)
    lines.append(f"external service: {report['external']['text']}")
    lines.append(f"resume: {report['resume']}")
    return "\n".join(lines)
