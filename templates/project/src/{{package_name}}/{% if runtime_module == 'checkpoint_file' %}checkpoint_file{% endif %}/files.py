"""The file variant's files: the input, and the checkpoint in two generations, each written atomically.

Every write goes to a temporary file that is fsynced, then ``os.replace``-d over the old
one, and the directory is fsynced; each checkpoint carries a SHA-256 checksum of its body;
``load_checkpoint`` falls back to the previous generation when the newest cannot be read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from .. import job
from ..runtime import faults, metrics
from ..runtime.errors import CorruptStateError
from ..runtime.safe_read import read_json
from ..runtime.state import StateCodec

INPUT_FILE = "input.json"
CHECKPOINT_FILE = "checkpoint.json"
PREVIOUS_FILE = "checkpoint.json.1"
#: Where an unreadable newest generation is moved once the run has fallen back from it: kept for
#: a look, and out of the rotation (see set_aside).
DAMAGED_FILE = "checkpoint.json.damaged"


def _input_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    # v2 remembers the submissions taken, by correlation id: [first record, count].
    return {**data, "submissions": {}}


#: The job's input, stored in the data directory so recovery never needs the source again
#: (version 2; version 1 is upgraded).
INPUT = StateCodec("file-input", 2, {1: _input_v1_to_v2})


def _progress_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    # v1 had offset and sum; v2 adds the count, the prepared range and timing.
    return {"offset": data["offset"], "sum": data["sum"], "count": data["offset"], "prepared": None,
            "instance_id": None, "written_at": None, "claimed_at": None, "claimed_offset": 0}


def _progress_v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    # v3 keeps the job's running state (job.fold's) under its own key, apart from our bookkeeping.
    rest = {k: v for k, v in data.items() if k not in ("sum", "count")}
    return {**rest, "job_state": {"sum": data["sum"], "count": data["count"]}}


#: The checkpoint body (version 3; versions 1 and 2 are upgraded, newer is refused).
PROGRESS = StateCodec("file-checkpoint", 3, {1: _progress_v1_to_v2, 2: _progress_v2_to_v3})


def log(message: str) -> None:
    print(f"[{os.getpid()}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- atomic files
def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)  # makes the rename itself durable
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    """Temp file + fsync + os.replace + directory fsync."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def checksum(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def save_checkpoint(data_dir: Path, state: dict[str, Any]) -> None:
    """Write a new generation; the current one becomes the previous one."""
    began = time.perf_counter()
    body = PROGRESS.dumps(state)
    doc = json.dumps({"sha256": checksum(body), "body": body})
    tmp = data_dir / (CHECKPOINT_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(doc)
        f.flush()
        os.fsync(f.fileno())
    current = data_dir / CHECKPOINT_FILE
    if current.exists():
        # A crash between these two renames leaves only the previous generation:
        # load_checkpoint() falls back to it, which is exactly what it is for.
        os.replace(current, data_dir / PREVIOUS_FILE)
        faults.window("between_renames")
    os.replace(tmp, current)
    _fsync_dir(data_dir)
    metrics.checkpoint(time.perf_counter() - began)  # runtime/metrics.py: the commit latency


def read_generation(path: Path) -> dict[str, Any]:
    """One checkpoint file, checksum verified. Raises CorruptStateError."""
    try:
        doc = read_json(path, "checkpoint file")  # bounded size and depth (safe_read.py)
        body, digest = doc["body"], doc["sha256"]
    except (KeyError, TypeError) as exc:
        raise CorruptStateError(f"{path.name}: unreadable ({exc.__class__.__name__}: {exc})") from None
    if not isinstance(body, str) or checksum(body) != digest:
        raise CorruptStateError(f"{path.name}: checksum mismatch")
    return PROGRESS.loads(body)


def load_checkpoint(data_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The newest readable generation and its file name; (None, None) before the first one."""
    problems = []
    for name in (CHECKPOINT_FILE, PREVIOUS_FILE):
        path = data_dir / name
        if not path.exists():
            if name == CHECKPOINT_FILE and (data_dir / PREVIOUS_FILE).exists():
                problems.append(f"{name}: missing")
            continue
        try:
            state = read_generation(path)
        except CorruptStateError as exc:
            problems.append(str(exc))
            continue
        for problem in problems:
            log(f"checkpoint {problem}; falling back to {name}")
        return state, name
    if problems:
        raise CorruptStateError("no readable checkpoint generation in "
                                f"{data_dir} ({'; '.join(problems)}); restore one from a replica "
                                "or delete both files to start over")
    return None, None


def set_aside(data_dir: Path) -> None:
    """After falling back a generation: move the unreadable newest one aside. Left in place, the
    next save would rotate it into the previous generation, and a kill between that save's two
    renames would then leave no readable generation at all."""
    path = data_dir / CHECKPOINT_FILE
    if path.exists():
        os.replace(path, data_dir / DAMAGED_FILE)
        _fsync_dir(data_dir)
        log(f"unreadable {CHECKPOINT_FILE} kept as {DAMAGED_FILE}")


def damage_newest(data_dir: Path, how: str | None) -> dict[str, Any]:
    """The drill's damaged-checkpoint fault, after a kill: the newest generation cut short (``how``
    "torn", as a torn write leaves a file) or with one character of its body changed ("rot", as a
    rotten sector does), so that its JSON or its checksum no longer holds. Only while an older
    readable generation exists to fall back to: with one generation, damage is a lost checkpoint,
    which the run refuses (exit 2) by design. ``how`` None: only say whether it could."""
    newest, previous = data_dir / CHECKPOINT_FILE, data_dir / PREVIOUS_FILE
    if not (newest.exists() and previous.exists()):
        return {"file": None, "why": "no older generation to fall back to yet"}
    try:
        read_generation(previous)
    except CorruptStateError:
        return {"file": None, "why": f"{PREVIOUS_FILE} is unreadable: damaging {CHECKPOINT_FILE} would leave none"}
    if how is None:
        return {"file": CHECKPOINT_FILE}
    text = newest.read_text(encoding="utf-8")
    if how == "torn":
        damaged = text[:len(text) // 2]
    else:
        # The rot lands on the offset (still JSON, a few records further on): a loader that skips the
        # checksum resumes past records never done, which the drill sees as lost.
        doc = json.loads(text)
        rotten = re.sub(r'("offset": ?)(\d+)', lambda m: f"{m[1]}{int(m[2]) + 7}", doc["body"], count=1)
        doc["body"] = rotten if rotten != doc["body"] else doc["body"] + " "  # no offset: still out of its checksum
        damaged = json.dumps(doc)
    newest.write_text(damaged, encoding="utf-8")
    return {"file": CHECKPOINT_FILE, "how": how}


def initial_progress() -> dict[str, Any]:
    return {"offset": 0, "job_state": dict(job.INITIAL_STATE), "prepared": None, "instance_id": None,
            "written_at": None, "claimed_at": None, "claimed_offset": 0}
