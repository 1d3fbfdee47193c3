"""Recovery point of the checkpoint strategy's file variant: two checkpoint generations,
each with a SHA-256 checksum over its body; the newest valid one is where the job resumes."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from advisor.inspect.reading import Point, Reading, ago, steps_of
from advisor.inspect.sources import FILE_CHECKPOINTS, FILE_INPUT, FILE_SET_ASIDE, InspectError


def _read_json(path: Path) -> Any:
    """The file's JSON, read with a plain open() (no lock, no write)."""
    return json.loads(path.read_bytes())


def read_generation(path: Path) -> tuple[dict[str, Any] | None, str]:
    """(the checkpoint body's data, "valid") or (None, why it cannot be used)."""
    if not path.exists():
        return None, "missing"
    try:
        doc = _read_json(path)
        body, digest = doc["body"], doc["sha256"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    if not isinstance(body, str) or hashlib.sha256(body.encode("utf-8")).hexdigest() != digest:
        return None, "checksum mismatch"
    try:
        data = json.loads(body)["data"]
    except (ValueError, KeyError, TypeError):
        return None, "checksum valid, body unreadable"
    return (data if isinstance(data, dict) else None), "valid"


def checkpoint_file(data_dir: Path, batch_size: int) -> Reading:
    now = time.time()
    records: list[dict[str, Any]] = []
    if (data_dir / FILE_INPUT).exists():
        try:
            records = list(_read_json(data_dir / FILE_INPUT)["data"]["records"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InspectError(f"{data_dir / FILE_INPUT}: not a generated project's input ({exc})") from None
    total = len(records)
    points: list[Point] = []
    used: tuple[str, dict[str, Any]] | None = None
    for name in FILE_CHECKPOINTS:
        data, verdict = read_generation(data_dir / name)
        role = "newest" if name == FILE_CHECKPOINTS[0] else "previous"
        if data is None:
            text = f"{name} ({role} generation): {verdict}"
            points.append(Point(name, "file", verdict, text, detail={"checksum": verdict}))
            continue
        off = int(data.get("offset") or 0)
        text = f"{name} ({role} generation): checksum valid, offset {off} of {total}"
        if data.get("written_at"):
            text += f", written {ago(data['written_at'], now)}"
        if data.get("prepared"):
            a, b = data["prepared"]
            text += f", prepared records {a}..{b - 1} (calls may have been made)"
        text += f", running state {json.dumps(data.get('job_state'), sort_keys=True)}"
        points.append(Point(name, "file", "valid", text, off, total,
                            detail={"checksum": "valid", "offset": off, "prepared": data.get("prepared"),
                                    "written_at": data.get("written_at"), "job_state": data.get("job_state")}))
        if used is None:
            used = (name, data)
    if (data_dir / FILE_SET_ASIDE).exists():  # a run fell back from it: evidence, never read by the job
        _, verdict = read_generation(data_dir / FILE_SET_ASIDE)
        points.append(Point(FILE_SET_ASIDE, "file", "set aside",
                            f"{FILE_SET_ASIDE} (set aside): a newest generation a run could not read ({verdict}) "
                            "and fell back from; the job never reads it", detail={"checksum": verdict}))
    in_doubt: list[dict[str, str]] = []
    if used is None:
        bad = [p for p in points if p.status != "missing"]
        resume = ("no checkpoint yet: the first run starts at record 0" if not bad else
                  "no readable checkpoint generation: the run stops with an error rather than start over "
                  "(restore one, or delete both files to start over)")
    else:
        name, data = used
        off = int(data.get("offset") or 0)
        for p in points:
            p.highlight = p.id == name
        suspect = set(range(*data["prepared"])) if data.get("prepared") else set()
        if name != FILE_CHECKPOINTS[0]:
            suspect |= set(range(off, off + batch_size))  # the batch after a fallback may have been called
        for seq in sorted(s for s in suspect if s < total):
            rid = str(records[seq].get("record_id"))
            in_doubt += [{"key": f"file-job/{rid}" + (f"/{step}" if step else ""), "record_id": rid, "step": step,
                          "where": f"record {seq}"} for step in steps_of("checkpoint")]
        resume = (f"all {total} records are checkpointed; nothing to resume" if off >= total else
                  f"the job resumes at record {off} of {total} from {name}")
        if name != FILE_CHECKPOINTS[0]:
            resume += f" (falling back: {points[0].status})"
        if in_doubt and off < total:
            resume += f", looking up {len(in_doubt)} prepared call(s) by key instead of calling again"
    expected = {(str(r.get("record_id")), s) for r in records for s in steps_of("checkpoint")} if records else None
    done = int(used[1].get("offset") or 0) if used else 0
    return Reading("checkpoint", "file", None, [], points,
                   {"records_done": done, "records_total": total, "generation_used": used[0] if used else None},
                   in_doubt, resume, expected, bool(total) and done >= total)
