"""Recovery points of the strategies whose workers claim rows: checkpoint (task table),
idempotent-retry (one task per record) and state-machine (one order per record)."""

from __future__ import annotations

import json
import time
from typing import Any

from advisor.inspect.reading import (LIST_LIMIT, Point, Reading, ago, collapse, owner_phrase, record_of_key,
                                   redone_by, schema_version, steps_of, table_counts)
from advisor.inspect.sources import Source


def _json_data(text: Any) -> dict[str, Any]:
    """The ``data`` of a versioned JSON document (``{"kind", "version", "data"}``), or {}."""
    try:
        doc = json.loads(text)
    except (TypeError, ValueError):
        return {}
    data = doc.get("data") if isinstance(doc, dict) else None
    return data if isinstance(data, dict) else {}


def _expected(record_ids: list[str], strategy: str) -> set[tuple[str, str]]:
    return {(rid, step) for rid in record_ids for step in steps_of(strategy)}


# ------------------------------------------------------------------ checkpoint
def checkpoint(source: Source, lease_s: float, here: str, effect_kind: str = "", batch_size: int = 100) -> Reading:
    """A queryable project keeps an intent per call of the running batch; the others keep none (the
    key or the call ledger settles a re-sent call), so a running task's batch past its offset is what
    may have been called: ``batch_size`` records (the project's setting)."""
    now = time.time()
    # Schema version 4 keeps each task's input in task_inputs; earlier versions in the tasks row.
    # Inspect reads either as it is (it never migrates a store).
    split = "task_inputs" in source.tables()
    tasks = source.rows("SELECT t.task_id, t.status, t.processed_offset, t.total, t.owner, t.updated_at, "
                        "t.last_checkpoint_id, t.attempts, t.error, "
                        + ("i.payload FROM tasks t LEFT JOIN task_inputs i ON i.task_id = t.task_id "
                           if split else "t.payload FROM tasks t ")
                        + "ORDER BY t.created_at, t.task_id")
    prepared = source.rows("SELECT idempotency_key, task_id, seq FROM intents WHERE status = 'prepared' "
                           "ORDER BY task_id, seq")
    doubt_by_task: dict[str, list[int]] = {}
    for row in prepared:
        doubt_by_task.setdefault(row["task_id"], []).append(int(row["seq"]))
    points: list[Point] = []
    record_ids: list[str] = []
    unprepared: list[dict[str, str]] = []  # maybe called, with no intent kept (see the docstring)
    for t in tasks:
        ids = [str(r.get("record_id")) for r in _json_data(t["payload"]).get("records", [])]
        record_ids += ids
        off, total, status = int(t["processed_offset"]), int(t["total"]), t["status"]
        cp = f"checkpoint {t['last_checkpoint_id']}, {ago(t['updated_at'], now)}"
        if status == "done":
            text = f"task {t['task_id']} done: all {total} records ({cp})"
        elif status == "failed":
            text = f"task {t['task_id']} failed at record {off} of {total}: {t['error']}"
        elif status == "pending" and off == 0:
            text = f"task {t['task_id']} not started: resumes at record 0 of {total}"
        else:
            who = (owner_phrase(t["owner"], t["updated_at"], lease_s, now, here=here) if status == "running"
                   else "released")
            text = f"task {t['task_id']} resumes at record {off} of {total} ({cp}); {who}"
        seqs = doubt_by_task.get(t["task_id"])
        if seqs:
            text += (f"; {len(seqs)} calls prepared, not done (records {min(seqs)}..{max(seqs)}): maybe made, "
                     "recovered by the project's effect_kind (re-sent with the key, looked up, or held in doubt)")
        elif status == "running" and effect_kind != "queryable":
            end = min(off + batch_size, total)
            unprepared += [{"key": f"{t['task_id']}/{rid}", "record_id": rid, "step": "",
                            "where": f"task {t['task_id']} record {seq}, past the offset"}
                           for seq, rid in enumerate(ids[off:end], start=off)]
            text += (f"; the calls of records {off}..{end - 1} may have been made by its holder: "
                     f"{redone_by(effect_kind)}")
        points.append(Point(t["task_id"], "task", status, text, off, total,
                            detail={"owner": t["owner"], "heartbeat": t["updated_at"],
                                    "checkpoint": t["last_checkpoint_id"], "attempts": t["attempts"],
                                    "prepared": len(seqs or [])}))
    _highlight(points, lambda p: p.status == "running" or (p.status == "pending" and bool(p.done)))
    in_doubt = [{"key": r["idempotency_key"], "record_id": record_of_key(r["idempotency_key"]), "step": "",
                 "where": f"task {r['task_id']} record {r['seq']}"} for r in prepared] + unprepared
    by_status = _count(t["status"] for t in tasks)
    done = sum(int(t["processed_offset"]) for t in tasks)
    total = sum(int(t["total"]) for t in tasks)
    nxt = next((p for p in points if p.highlight), None)
    resume = (f"all {total} records are checkpointed; nothing to resume" if done >= total and total else
              f"the next run resumes task {nxt.id} at record {nxt.done} of {nxt.total}" if nxt else
              "the next run starts the first pending task at record 0")
    if prepared:
        resume += f", first looking up {len(prepared)} prepared call(s) by idempotency key instead of calling again"
    if unprepared:
        resume += f"; {len(unprepared)} call(s) of the batch past the offset are {redone_by(effect_kind)}"
    # Thousands of tasks read as a few lines: the not-started ones (and many done ones) counted.
    points = collapse(points, lambda p: p.status == "pending" and not p.done, "not started: each resumes at record 0")
    points = collapse(points, lambda p: p.status == "done", "done: all their records", keep=LIST_LIMIT)
    return Reading("checkpoint", "table", schema_version(source),
                   table_counts(source, ["tasks", "task_inputs", "results", "intents", "schema_version"]),
                   points, {"tasks": by_status, "records_done": done, "records_total": total}, in_doubt,
                   resume, _expected(record_ids, "checkpoint") if record_ids else None,
                   bool(tasks) and all(t["status"] in ("done", "failed") for t in tasks))


# ------------------------------------------------------------ idempotent-retry
def idempotent_retry(source: Source, lease_s: float, here: str) -> Reading:
    now = time.time()
    counts = {r["status"]: int(r["n"]) for r in source.rows("SELECT status, COUNT(*) AS n FROM tasks GROUP BY status")}
    active = source.rows("SELECT task_id, business_key, status, attempts, owner, updated_at, error FROM tasks "
                         "WHERE status IN ('running', 'failed') ORDER BY status DESC, task_id")
    dedupe = source.count("processed")
    total = sum(counts.values())
    points = [Point("tasks", "task", "summary",
                    f"{counts.get('done', 0)} of {total} tasks done ({dedupe} dedupe records by business key), "
                    f"{counts.get('pending', 0)} pending, {counts.get('running', 0)} running, "
                    f"{counts.get('failed', 0)} failed", counts.get("done", 0), total)]
    in_doubt = []
    for t in active[:LIST_LIMIT]:
        if t["status"] == "failed":
            text = f"task {t['task_id']} failed after {t['attempts']} attempt(s): {t['error']}"
        else:
            text = (f"task {t['task_id']} (key {t['business_key']}) running, attempt {t['attempts']}; "
                    f"{owner_phrase(t['owner'], t['updated_at'], lease_s, now, here=here)}; re-run whole, "
                    "its business key makes the rerun harmless")
        points.append(Point(t["task_id"], "task", t["status"], text, highlight=t["status"] == "running",
                            detail={"business_key": t["business_key"], "owner": t["owner"],
                                    "heartbeat": t["updated_at"], "attempts": t["attempts"]}))
    for t in active:
        if t["status"] == "running":
            in_doubt.append({"key": t["business_key"], "record_id": record_of_key(t["business_key"]), "step": "",
                             "where": f"task {t['task_id']}, running: its call may have been made"})
    record_ids = [str(_json_data(r["input"]).get("record", {}).get("record_id"))
                  for r in source.rows("SELECT input FROM tasks")]
    pending = counts.get("pending", 0) + counts.get("running", 0)
    resume = (f"all {total} tasks are finished; nothing to resume" if not pending else
              f"the next run re-runs {counts.get('running', 0)} interrupted task(s) whole and then "
              f"{counts.get('pending', 0)} pending ones; a key already in `processed` is not called again")
    return Reading("idempotent-retry", None, schema_version(source),
                   table_counts(source, ["tasks", "processed", "results", "schema_version"]),
                   points, {"tasks": counts, "dedupe_records": dedupe}, in_doubt, resume,
                   _expected(record_ids, "idempotent-retry") if record_ids else None, total > 0 and not pending,
                   more_points=max(0, len(active) - LIST_LIMIT))


# --------------------------------------------------------------- state-machine
def state_machine(source: Source, lease_s: float, here: str) -> Reading:
    now = time.time()
    counts = {r["state"]: int(r["n"]) for r in source.rows("SELECT state, COUNT(*) AS n FROM orders GROUP BY state")}
    moving = source.rows("SELECT order_id, state, version, owner, updated_at, error FROM orders "
                         "WHERE state NOT IN ('done', 'failed', 'new') OR owner IS NOT NULL ORDER BY order_id")
    prepared = source.rows("SELECT order_id, step, idempotency_key, context_id FROM step_log "
                           "WHERE status = 'prepared' ORDER BY order_id, step")
    total = sum(counts.values())
    order = ("new", "reserved", "charged", "done", "failed")
    points = [Point("orders", "order", "summary", "orders per state: " + ", ".join(
        f"{s} {counts.get(s, 0)}" for s in order), counts.get("done", 0), total)]
    doubt = {r["order_id"]: r for r in prepared}
    for o in moving[:LIST_LIMIT]:
        last = source.rows("SELECT event, from_state, to_state, at FROM transitions WHERE order_id = ? "
                           "ORDER BY seq DESC LIMIT 1", (o["order_id"],))
        moved = (f"last transition {last[0]['event']} {last[0]['from_state']} → {last[0]['to_state']} "
                 f"{ago(last[0]['at'], now)}") if last else "no transition yet"
        who = owner_phrase(o["owner"], o["updated_at"], lease_s, now, here=here)
        text = f"order {o['order_id']} is {o['state']} ({moved}); {who}"
        if o["order_id"] in doubt:
            text += (f"; step {doubt[o['order_id']]['step']} prepared, not confirmed: maybe made, recovered by the "
                     "project's effect_kind, never called blindly")
        points.append(Point(o["order_id"], "order", o["state"], text, highlight=True,
                            detail={"version": o["version"], "owner": o["owner"], "heartbeat": o["updated_at"],
                                    "prepared_step": doubt.get(o["order_id"], {}).get("step")}))
    in_doubt = [{"key": r["idempotency_key"], "record_id": r["order_id"], "step": r["step"],
                 "where": f"order {r['order_id']} step {r['step']}"} for r in prepared]
    record_ids = [r["order_id"] for r in source.rows("SELECT order_id FROM orders")]
    unfinished = total - counts.get("done", 0) - counts.get("failed", 0)
    resume = (f"all {total} orders reached a final state; nothing to resume" if not unfinished else
              f"the next run carries {len(moving)} order(s) in mid-flow on from their state, then starts "
              f"{counts.get('new', 0) - sum(1 for o in moving if o['state'] == 'new')} new ones")
    if in_doubt:
        resume += f"; {len(in_doubt)} prepared step(s) are recovered by the project's effect_kind first"
    transitions = source.count("transitions")
    return Reading("state-machine", None, schema_version(source),
                   table_counts(source, ["orders", "transitions", "step_log", "schema_version"]),
                   points, {"orders": counts, "transitions": transitions}, in_doubt, resume,
                   _expected(record_ids, "state-machine") if record_ids else None, total > 0 and not unfinished,
                   more_points=max(0, len(moving) - LIST_LIMIT))


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _highlight(points: list[Point], matters: Any) -> None:
    for p in points:
        if matters(p):
            p.highlight = True
    if not any(p.highlight for p in points):
        first = next((p for p in points if p.status == "pending"), None)
        if first is not None:
            first.highlight = True
