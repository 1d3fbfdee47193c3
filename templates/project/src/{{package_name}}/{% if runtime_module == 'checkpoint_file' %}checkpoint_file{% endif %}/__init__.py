"""Checkpoint strategy, file variant: for a job without a database.

The classic example: 10,000 files to compress and upload, progress kept in a
``progress.json`` swapped in with ``os.replace``. Done carefully (the pitfall
"a corrupt or lost checkpoint file"):

* every write goes to a temporary file that is fsynced, then ``os.replace``-d over
  the old one and the directory is fsynced: a reader sees the old or the new
  file, never half of one;
* each file carries a SHA-256 checksum of its body, verified on load;
* two generations are kept (``checkpoint.json`` and ``checkpoint.json.1``): when
  the newest is truncated or corrupted, the previous one is used, and the batch
  after it is treated as "maybe done" (its external calls follow the rule of the
  service's kind, effects.py: re-sent with their keys, looked up, or in doubt);
* if neither can be read the run stops with a clear error (exit 2) rather than
  silently starting over.

The results (the job's running state, ``job.fold``'s: here a sum and a count) and
the offset are one file write: they can never disagree. External calls are recorded as prepared (the batch range is
written into the checkpoint before the calls) and done (the next write). One
worker per data directory (an exclusive ``flock`` on ``worker.lock``).

This module is the interface ``strategy.load()`` imports (submit, run, status, what the
run stored); ``files.py`` holds the files: their names, their versioned JSON, the atomic
writes and the two generations.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import time
import uuid
from pathlib import Path
from typing import Any

from .. import job
from ..runtime import correlation, effects, faults, metrics
from ..runtime.errors import CorruptStateError, JobError, TransientError
from ..runtime.safe_read import MAX_STATE_BYTES, read_bytes
from ..runtime.shutdown import Shutdown
from ..runtime.store import check_data_dir, workload_held
from ..runtime.strategy import Context, Submitted, percent
from ..settings import Settings
from .files import (CHECKPOINT_FILE, DAMAGED_FILE, INPUT, INPUT_FILE, PREVIOUS_FILE, damage_newest, initial_progress,
                    load_checkpoint, log, save_checkpoint, set_aside, write_atomic)

NAME = "checkpoint"
MULTI_WORKER = False
#: After a kill, the prepared range's calls are re-sent with their keys when the service is
#: idempotent (it dedupes them); otherwise none (effects.py).
REDONE_CALLS_PER_KILL = effects.promise(Settings.from_env().batch_size * len(job.STEPS))
#: The critical windows (drill --aim): name -> what a kill there proves.
WINDOWS = {
    "after_effect_before_checkpoint": "a record's external call went through, the checkpoint file that records it "
                                      "is not written: the restart must treat the prepared calls by the service's "
                                      "kind (re-send with the key, look up, or hold in doubt)",
    "between_renames": "the current checkpoint was renamed to the previous generation, the new one is not in place "
                       "yet: the restart must fall back to the previous generation and treat its batch's calls "
                       "as maybe made",
    "after_checkpoint_before_next_batch": "the checkpoint (results, offset) is renamed into place and its directory "
                                          "fsynced; the next batch is not prepared: nothing may be lost or redone",
}
#: A record already queued here, submitted again under a new correlation id (drill/schedule.py,
#: docs/generated-project.md): new work, appended to the input and processed again. Resubmit under
#: the SAME correlation id to have it queued once.
RESUBMITTED_RECORD = "new-work"
#: The state lives in files, not a database: the drill checks their fsyncs instead of pragmas.
STATE_STORE = "files"

LOCK_FILE = "worker.lock"
#: Held while a submission reads, extends and replaces input.json (not the worker's lock:
#: submitting while a worker runs is fine, the next run picks the new records up).
SUBMIT_LOCK_FILE = "submit.lock"
#: No state store tables: `reset` removes these files from the data directory instead (strategy.py).
STORE_TABLES: tuple[str, ...] = ()
STATE_FILES = (INPUT_FILE, CHECKPOINT_FILE, PREVIOUS_FILE, CHECKPOINT_FILE + ".tmp", DAMAGED_FILE, LOCK_FILE,
               SUBMIT_LOCK_FILE)


# ---------------------------------------------------------------------- submit
def submit(ctx: Context, records: list[dict[str, Any]], *, work_ms: float = 0.0,
           correlation_id: str | None = None) -> Submitted:
    """The records become (the end of) the one job's input, ``input.json``.

    Without a correlation id (the demo) a data directory that holds a workload is
    refused. With one, the records are appended (the offset of what is done stays
    valid) unless that id is already in the input's ``submissions``; the check and
    the new input are one atomic replace of ``input.json``, under ``submit.lock``.
    The job keeps the ``work_ms`` of its first submission.
    """
    check_data_dir(ctx.data_dir, create=True)
    path = ctx.data_dir / INPUT_FILE
    if correlation_id is None:
        if path.exists():
            raise JobError(workload_held(None, ctx.data_dir))
        write_atomic(path, INPUT.dumps({"records": records, "work_ms": work_ms, "submissions": {}}))
        return Submitted(["file-job"])
    correlation.check(correlation_id)
    with open(ctx.data_dir / SUBMIT_LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two submissions: one after the other (released on close or kill)
        current = (_load_input(ctx.data_dir) if path.exists()
                   else {"records": [], "work_ms": work_ms, "submissions": {}})
        if correlation_id in current["submissions"]:
            return Submitted(["file-job"], added=False)
        current["submissions"][correlation_id] = [len(current["records"]), len(records)]
        current["records"] = current["records"] + records
        write_atomic(path, INPUT.dumps(current))
    return Submitted(["file-job"])


def _load_input(data_dir: Path) -> dict[str, Any]:
    check_data_dir(data_dir, create=False)
    path = data_dir / INPUT_FILE
    if not path.exists():
        raise JobError(f"no input at {path}; run `submit-demo --data-dir {data_dir}` first")
    return INPUT.loads(read_bytes(path, "input file", limit=MAX_STATE_BYTES, error=CorruptStateError))


def _idempotency_key(record_id: str, step: str = "") -> str:
    # The file variant has one task: the job itself.
    return f"file-job/{record_id}" + (f"/{step}" if step else "")


# ------------------------------------------------------------------------- run
def run(ctx: Context, shutdown: Shutdown, *, limit: int | None = None) -> int:
    payload = _load_input(ctx.data_dir)
    lock = open(ctx.data_dir / LOCK_FILE, "a")
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise JobError(f"another worker is running on {ctx.data_dir} "
                               "(the file variant runs one worker per data directory)") from None
            raise
        external = ctx.external()
        calls = effects.Effects(external, ctx.data_dir, ctx.settings)
        try:
            calls.send_released(log)
            return _work(ctx, shutdown, limit, payload, calls)
        finally:
            calls.close()
            external.close()
    finally:
        lock.close()  # releases the flock (a killed process releases it too)


def _work(ctx: Context, shutdown: Shutdown, limit: int | None, payload: dict[str, Any],
          calls: effects.Effects) -> int:
    records, work_ms = payload["records"], float(payload.get("work_ms", 0.0))
    settings = ctx.settings
    state, source = load_checkpoint(ctx.data_dir)
    state = state or initial_progress()
    offset = state["offset"]
    # Calls that may already have happened: the prepared range of a killed run,
    # or, after falling back a generation, the batch after the older offset.
    suspect: set[int] = set(range(*state["prepared"])) if state["prepared"] else set()
    if source == PREVIOUS_FILE:
        suspect |= set(range(offset, offset + settings.batch_size))
        set_aside(ctx.data_dir)  # the newest, if it is there, is unreadable: out of the rotation
    if offset:
        log(f"resuming at offset {offset}/{len(records)} from {source}")
    state.update(instance_id=uuid.uuid4().hex, claimed_at=time.time(), claimed_offset=offset)
    processed = 0
    while offset < len(records):
        if shutdown.requested or (limit is not None and processed >= limit):
            break
        end = min(offset + settings.batch_size, len(records))
        state.update(prepared=[offset, end], written_at=time.time())
        save_checkpoint(ctx.data_dir, state)            # 1. prepared, before any call
        started, outputs = time.monotonic(), []
        unavailable: TransientError | None = None
        for seq in range(offset, end):                  # 2. the work
            effect = _effect(calls, records[seq], recovering=seq in suspect)
            try:
                outputs.append(job.process_record(records[seq], effect, work_ms=work_ms))
            except TransientError as exc:  # the service kept failing through the call's retries
                unavailable = exc
                break
            faults.window("after_effect_before_checkpoint")
            if shutdown.requested or time.monotonic() - started >= settings.checkpoint_interval_s:
                break                                   # safe point / time trigger
        offset += len(outputs)                          # 3. results + offset: one atomic write
        # Cut short, what may have got through stays prepared, so whoever sends it next treats it as
        # maybe made: the rest of the range when the service kept failing (a call that timed out),
        # and a killed run's calls this run has not reached yet (stopped while it recovers).
        high = max([end if unavailable is not None else offset, *(seq + 1 for seq in suspect if seq >= offset)])
        state.update(offset=offset, prepared=[offset, high] if high > offset else None,
                     written_at=time.time(),
                     job_state=functools.reduce(job.fold, outputs, state["job_state"]))  # job.py's fold
        save_checkpoint(ctx.data_dir, state)
        faults.window("after_checkpoint_before_next_batch")
        metrics.records_done(len(outputs))  # runtime/metrics.py
        processed += len(outputs)
        if unavailable is not None:
            # What was done is checkpointed above; pause and go on from there instead of crashing.
            log(f"external service unavailable ({unavailable}); checkpoint at offset {offset}, trying again")
            suspect |= set(range(offset, end))
            time.sleep(0.5)
    if shutdown.requested:
        log(f"{shutdown.signal_name}: final checkpoint written at offset {offset}, exiting 0")
    return 0


def _effect(calls: effects.Effects, record: dict[str, Any], *, recovering: bool) -> job.Effect:
    record_id = str(record.get("record_id"))

    def effect(payload: Any, step: str = "") -> dict[str, Any]:
        key = _idempotency_key(record_id, step)
        # recovering: in the prepared range of a killed run, so the call may have got through.
        for attempt in range(5):
            try:
                return calls.call(record_id, step, key, payload, recovering=recovering)
            except TransientError:
                time.sleep(min(0.5, 0.01 * 2 ** attempt))
        return calls.call(record_id, step, key, payload, recovering=recovering)

    return effect


# ------------------------------------------------------------------ the drill
def drill_damage_newest(ctx: Context, how: str | None) -> dict[str, Any]:
    """The drill's damaged-checkpoint fault, on a killed worker's data directory (files.py);
    ``how`` None: only whether it could land now (an older generation to fall back to)."""
    return damage_newest(ctx.data_dir, how)


# ---------------------------------------------------------------------- status
def status(ctx: Context) -> dict[str, Any]:
    total = len(_load_input(ctx.data_dir)["records"])
    state, _ = load_checkpoint(ctx.data_dir)
    state = state or initial_progress()
    done = state["offset"]
    written, claimed = state["written_at"], state["claimed_at"]
    moved = done - (state["claimed_offset"] or 0)
    elapsed = (written - claimed) if written and claimed else 0
    task = {
        "task_id": "file-job", "status": "done" if done >= total else ("running" if written else "pending"),
        "done": done, "total": total, "percent": round(percent(done, total), 1),
        "last_checkpoint_age_s": round(time.time() - written, 3) if written else None,
        "rate_per_s": round(moved / elapsed, 1) if elapsed > 0 and moved > 0 else None,
        "attempts": 0, "error": None,
    }
    return {"strategy": NAME, "total": total, "done": done, "percent": task["percent"], "failed": 0,
            "tasks": [task], "job_state": state["job_state"]}


def expected_effects(records: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(str(r["record_id"]), step) for r in records for step in job.STEPS}


# ------------------------------------------------- what the run stored (read-only)
def stored_results(ctx: Context) -> None:
    """None: this variant keeps no per-record results, only the running state
    (the drill checks that, and the effects' payloads, instead)."""
    return None


def stored_final_states(ctx: Context) -> list[dict[str, Any]]:
    """The one task (the job itself): its input's record ids and the saved running state."""
    records = _load_input(ctx.data_dir)["records"]
    state, _ = load_checkpoint(ctx.data_dir)
    return [{"task_id": "file-job", "record_ids": [str(r.get("record_id")) for r in records],
             "state": state["job_state"] if state else None}]
