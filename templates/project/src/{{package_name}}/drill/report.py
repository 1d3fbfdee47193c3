"""The drill's report as text: what `python -m <package> drill` prints without --json."""

from __future__ import annotations

import shlex
from typing import Any

from . import verdict
from .shrink import replay_command


def summary(report: dict[str, Any]) -> str:
    rec = report["recovery_ms"]
    added = [f"{report['extended_records']} added to land every fault"] if report.get("extended_records") else []
    added += [f"{report['new_input_records']} submitted while the workers ran"] if report.get("new_input_records") else []
    added += [f"{report['after_rebuild_records']} after a rebuild"] if report.get("after_rebuild_records") else []
    records = f"{report['records']} records" + (f" ({', '.join(added)})" if added else "")
    if report.get("reruns"):
        records += f" (the job run {report['reruns']} more time(s) for work resubmitted as its workers left)"
    return "\n".join([
        f"drill: {report['strategy']}, {records}, {report['kills_landed']} of "
        f"{report['kills_requested']} x {report['signal']} landed, {report['workers']} worker(s)"
        + (f" on {report['hosts']} hosts" if report.get("hosts", 1) > 1 else ""),
        *_fault_lines(report),
        f"lost {report['lost']}, duplicate effects {report['duplicate_effects']}, "
        f"redone calls {report['redone_calls']}, lookups {report['lookups']}, "
        f"incomplete {report['incomplete_records']}",
        f"recovery ms p50 {rec['p50']} p95 {rec['p95']} max {rec['max']}; "
        f"{report['throughput']} records/s; {report['wall_s']} s",
        f"external calls: {report['effect_kind']}"
        + (f", {report['plain_policy']}" if report.get("plain_policy") else "")
        + f": {report['in_doubt']} in doubt" + (f" ({', '.join(report['in_doubt_ids'][:3])}"
                                                + (", ..." if len(report["in_doubt_ids"]) > 3 else "") + ")"
                                                if report["in_doubt_ids"] else ""),
        *_settle_lines(report),
        f"durability: {_durability_line(report['durability'])}",
        *([f"queue: {report['messages']} messages, redelivered {report['redelivered']}, deduped "
           f"{report['deduped']}, rejected {report['rejected']}, left in the queue {report['queue_left']}"]
          if "redelivered" in report else []),
        *(["kills by window: " + ", ".join(f"{w} {n}" for w, n in report["kills_by_window"].items())]
          if report.get("aim") else []),
        f"data: {report['data_dir']}",
        *verdict.summary_line(report["failures"], report),
        *_shrunk_lines(report),
    ])


def _settle_lines(report: dict[str, Any]) -> list[str]:
    """Why calls in doubt (and the records they leave lost) pass under at most once, and how to settle them."""
    if report.get("plain_policy") != "at-most-once" or not report["in_doubt"]:
        return []
    from pathlib import Path

    from ..runtime.shell import fresh_shell_command  # the command line that works from a new shell

    data = Path(report["data_dir"])
    export = shlex.quote(str((data / "external.db").resolve()))
    return [f"{report['in_doubt']} call(s) in doubt, allowed by at-most-once (never sent twice; the {report['lost']} lost"
            " are calls that never arrived, until settled); settle them against the service's log with: "
            + fresh_shell_command(f"reconcile --from-export {export}", data),
            "then send the ones that never arrived: " + fresh_shell_command("run", data)]


def _fault_lines(report: dict[str, Any]) -> list[str]:
    """The schedule in one line (what was injected of what was planned), and what could not be."""
    schedule = report.get("schedule")
    if not schedule:
        return []
    faults = ", ".join(f"{kind} {n['injected']}/{n['planned']}" for kind, n in report["faults"].items())
    lines = [f"faults (seed {schedule['seed']}): {faults or 'none'}; schedule {schedule['file']}"]
    if schedule["skipped"]:
        lines.append("not drilled here: " + "; ".join(f"{k} ({why})" for k, why in schedule["skipped"].items()))
    if report.get("faults_not_injected"):
        lines.append("not injected (the work ran out): " + ", ".join(report["faults_not_injected"]))
    for r in report.get("resubmissions", []):
        lines.append(f"resubmitted {r['records']} record(s) under {'the same' if r['same'] else 'a new'} correlation "
                     f"id ({r['correlation_id']}): {r['outcome']}")
    for o in report.get("operator") or []:
        how = "one by one" if o["how"] == "each" else "from the service's export"
        lines.append(f"reconcile (after the run, {how}): {o['applied']} call(s) answered applied, {o['not_applied']} "
                     f"not applied" + (f"; a re-send killed {', then '.join(o.get('resend_kills') or ['after'])} it went out"
                                       if o["resend_crashed"] else "")
                     + f"; {o['answered_again']} answered again after that")
    return lines


def _shrunk_lines(report: dict[str, Any]) -> list[str]:
    shrunk = report.get("shrunk")
    if not report["failures"]:
        return []
    if not shrunk and "schedule" not in report:  # a crash-point drill (--sweep, --power-loss): its own options
        return [f"rerun it: {report['rerun']}"] if report.get("rerun") else []
    if not shrunk:
        return [f"rerun this schedule: {replay_command_of(report)}"]
    return [f"smallest failing schedule ({shrunk['check']}): {shrunk['records']} records, {shrunk['events']} "
            f"fault(s), from {shrunk['from_records']} and {shrunk['from_events']} ({shrunk['tries']} tries, "
            f"{shrunk['seconds']} s); rerun it while fixing:",
            f"  {shrunk['command']}"]


def replay_command_of(report: dict[str, Any]) -> str:
    from pathlib import Path

    return replay_command(Path(report["schedule"]["file"]))


def _durability_line(d: dict[str, Any]) -> str:
    if d["state_store"] == "files":
        return (f"files: {d['file_fsyncs']} file fsyncs, {d['dir_fsyncs']} directory fsyncs, "
                f"{d['renames']} renames, {len(d['violations'])} violation(s)")
    settings = "; ".join(", ".join(f"{k} {v}" for k, v in sorted(s.items())) for s in d["settings"]) or "none seen"
    return f"{d['state_store']}: {settings}"
