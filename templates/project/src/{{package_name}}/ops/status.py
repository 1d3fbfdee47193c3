"""``status``: progress per task, last checkpoint age and rate, as a table or JSON."""

from __future__ import annotations

import json
from typing import Any


def render(report: dict[str, Any], *, as_json: bool) -> str:
    if as_json:
        return json.dumps(report, indent=2, sort_keys=True)
    # Columns as wide as their longest value: a long task id (a file name, a submission id) must not
    # push the rest of its row out of line.
    idw = max([16] + [len(str(t["task_id"])) for t in report["tasks"]])
    stw = max([8] + [len(str(t["status"])) for t in report["tasks"]])
    lines = [
        f"{report['strategy']}: {report['done']}/{report['total']} records "
        f"({report['percent']:.1f} %), {report['failed']} failed task(s)",
        *([f"store: {report['store']}"] if report.get("store") else []),
        f"{'task':<{idw}} {'status':<{stw}} {'progress':>20} {'checkpoint age':>15} {'rate/s':>9} {'tries':>5}",
    ]
    for task in report["tasks"]:
        age = task["last_checkpoint_age_s"]
        rate = task["rate_per_s"]
        lines.append(
            f"{task['task_id']:<{idw}} {task['status']:<{stw}} "
            f"{task['done']:>7}/{task['total']:<7} {task['percent']:>3.0f}% "
            f"{'-' if age is None else f'{age:.1f} s':>15} "
            f"{'-' if rate is None else f'{rate:.0f}':>9} {task['attempts']:>5}"
        )
        if task.get("error"):
            lines.append(f"{'':<{idw}} error: {task['error']}")
    calls = report.get("effects")
    if calls:
        lines.append(f"external calls: {calls['effect_kind']}"
                     + (f", {calls['plain_policy']}" if calls.get("plain_policy") else "")
                     + f"; {calls['in_doubt']} call(s) in doubt"
                     + (f" ({calls['possible_duplicates']} possible duplicate(s))"
                        if calls.get("plain_policy") == "at-least-once" else "")
                     + (f", {calls['awaiting_resend']} to be sent by the next run" if calls["awaiting_resend"] else "")
                     + ("; see `reconcile`" if calls["in_doubt"] else ""))
    return "\n".join(lines)

