"""Recovery points of event sourcing: the last event version per stream, and each
subscriber's position in the notification log (the effects one's prepared range = in doubt)."""

from __future__ import annotations

import json
import time
from typing import Any

from advisor.inspect.reading import (LIST_LIMIT, Point, Reading, ago, collapse, owner_phrase, schema_version,
                                     steps_of, table_counts)
from advisor.inspect.sources import Source

STREAMS = """
SELECT t.task_id, t.stream_id, t.total, t.status, t.acked, t.replayed, t.error,
       (SELECT MAX(e.originator_version) FROM stored_events e
        WHERE e.originator_id = REPLACE(t.stream_id, '-', '')) AS version
FROM es_tasks t ORDER BY t.task_id"""
# The library's PostgreSQL store: originator_id is a uuid, the notification id a column.
STREAMS_PG = STREAMS.replace("e.originator_id = REPLACE(t.stream_id, '-', '')", "e.originator_id::text = t.stream_id")


def _note_id(source: Source) -> str:
    """The notification id: SQLite's rowid, PostgreSQL's notification_id column."""
    return "notification_id" if source.kind == "postgresql" else "rowid"


def event_sourcing(source: Source, lease_s: float, here: str, strategy: str | None) -> Reading:
    now = time.time()
    streams = source.rows(STREAMS_PG if source.kind == "postgresql" else STREAMS)
    subs = {r["name"]: r for r in source.rows("SELECT * FROM es_subscribers")}
    last_note = int(source.rows(f"SELECT COALESCE(MAX({_note_id(source)}), 0) AS n FROM stored_events")[0]["n"])
    payments = int(source.rows("SELECT COUNT(*) AS n FROM stored_events WHERE topic LIKE ?",
                                ("%:Payment.%",))[0]["n"])
    if strategy is None:
        strategy = "event-sourcing-idempotent" if payments else "event-sourcing"
    idempotent = strategy == "event-sourcing-idempotent"
    points: list[Point] = []
    for s in streams:
        version = int(s["version"] or 0)
        appended = max(0, version - 1)  # version 1 is the stream's Created event
        total = int(s["total"])
        words = (f"stream {s['task_id']}: last event version {version}, {appended} of {total} records appended"
                 + ("" if appended >= total else f"; the worker resumes at record {appended}" if appended
                    else "; not started"))
        if idempotent and (s["acked"] or s["replayed"]):
            words += f"; client acked {s['acked']} commands"
            if s["replayed"]:
                words += f" ({s['replayed']} redelivered, answered from their first result, no new event)"
        if s["error"]:
            words += f"; failed: {s['error']}"
        points.append(Point(s["task_id"], "stream", "done" if appended >= total else ("open" if appended else "pending"),
                            words, appended, total, detail={"stream_id": s["stream_id"], "version": version,
                                                            "acked": s["acked"]}))
    open_streams = [p for p in points if p.status == "open"]
    for p in open_streams or [p for p in points if p.status == "pending"][:1]:
        p.highlight = True
    points = collapse(points, lambda p: p.status == "pending", "not started: each resumes at record 0")
    points = collapse(points, lambda p: p.status == "done", "done: every record appended", keep=LIST_LIMIT)
    effects, results = subs.get("effects", {}), subs.get("results", {})
    pos, upto = int(effects.get("position") or 0), int(effects.get("prepared_upto") or 0)
    text = f"effects subscriber at notification {pos} of {last_note}"
    if upto > pos:
        text += (f"; {upto - pos} prepared ({pos + 1}..{upto}), not done: maybe made, recovered by the project's "
                 "effect_kind before calling")
    text += f"; {owner_phrase(effects.get('owner'), effects.get('heartbeat'), lease_s, now, here=here)}"
    points.append(Point("effects", "subscriber", "behind" if pos < last_note else "caught up", text, pos, last_note,
                        highlight=upto > pos or pos < last_note,
                        detail={"position": pos, "prepared_upto": upto, "owner": effects.get("owner")}))
    rpos = int(results.get("position") or 0)
    points.append(Point("results", "subscriber", "behind" if rpos < last_note else "caught up",
                        f"projection (results) at notification {rpos} of {last_note}, "
                        f"updated {ago(results.get('updated_at'), now)}; it never calls out", rpos, last_note))
    in_doubt = _prepared_effects(source, pos, upto, streams)
    appended = sum(p.done or 0 for p in points if p.kind == "stream")
    total = sum(p.total or 0 for p in points if p.kind == "stream")
    behind = last_note - pos
    resume = (f"every record is appended ({appended} of {total}) and the effects subscriber is caught up"
              if appended >= total and not behind else
              f"the next run appends the remaining {total - appended} of {total} records (each stream from its "
              f"last version) and the effects subscriber resumes after notification {pos}"
              + (f", looking up {len(in_doubt)} prepared effect(s) by key first" if in_doubt else ""))
    inputs = [r["task_id"] + "/" + json.loads(r["record"]).get("record_id", "")
              for r in source.rows("SELECT task_id, record FROM es_inputs ORDER BY task_id, seq")]
    expected = {(ti.split("/", 1)[1], step) for ti in inputs for step in steps_of(strategy)} if inputs else None
    return Reading(strategy, None, schema_version(source),
                   table_counts(source, ["stored_events", "stored_snapshots", "es_tasks", "es_inputs",
                                         "es_subscribers", "es_sent", "es_results", "schema_version"]),
                   points, {"streams": len(streams), "events": last_note, "payment_events": payments,
                            "records_appended": appended, "records_total": total},
                   in_doubt, resume, expected, bool(streams) and appended >= total and not behind)


def _prepared_effects(source: Source, pos: int, upto: int, streams: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The effects of notifications (position, prepared_upto]: the subscriber may have called them."""
    if upto <= pos:
        return []
    task_of = {str(s["stream_id"]).replace("-", ""): s["task_id"] for s in streams}
    found = []
    note = _note_id(source)
    for row in source.rows(f"SELECT {note} AS id, originator_id, state FROM stored_events WHERE {note} > ? AND "
                           f"{note} <= ? ORDER BY {note}", (pos, upto)):
        try:
            ev = json.loads(row["state"])
        except (TypeError, ValueError):
            continue  # not JSON (a compressed or encrypted store): counted, not listed
        for eff in ev.get("effects") or []:
            step = str(eff.get("step") or "")
            base = ev.get("key") or f"{task_of.get(str(row['originator_id']).replace('-', ''), '?')}/{ev.get('record_id')}"
            found.append({"key": base + (f"/{step}" if step else ""), "record_id": str(ev.get("record_id")),
                          "step": step, "where": f"notification {row['id']}"})
    return found
