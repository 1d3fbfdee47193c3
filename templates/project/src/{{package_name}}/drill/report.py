"""The drill's report as text: what `python -m <package> drill` prints without --json."""

from __future__ import annotations

from typing import Any

from . import verdict


def summary(report: dict[str, Any]) -> str:
    rec = report["recovery_ms"]
    return "\n".join([
        f"drill: {report['strategy']}, {report['records']} records, {report['kills_landed']} of "
        f"{report['kills_requested']} x {report['signal']} landed, {report['workers']} worker(s)"
        + (f" on {report['hosts']} hosts" if report.get("hosts", 1) > 1 else ""),
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
        f"durability: {_durability_line(report['durability'])}",
        *([f"queue: {report['messages']} messages, redelivered {report['redelivered']}, deduped "
           f"{report['deduped']}, rejected {report['rejected']}, left in the queue {report['queue_left']}"]
          if "redelivered" in report else []),
        *(["kills by window: " + ", ".join(f"{w} {n}" for w, n in report["kills_by_window"].items())]
          if report.get("aim") else []),
        f"data: {report['data_dir']}",
        *verdict.summary_line(report["failures"], report),
    ])


def _durability_line(d: dict[str, Any]) -> str:
    if d["state_store"] == "files":
        return (f"files: {d['file_fsyncs']} file fsyncs, {d['dir_fsyncs']} directory fsyncs, "
                f"{d['renames']} renames, {len(d['violations'])} violation(s)")
    settings = "; ".join(", ".join(f"{k} {v}" for k, v in sorted(s.items())) for s in d["settings"]) or "none seen"
    return f"{d['state_store']}: {settings}"
