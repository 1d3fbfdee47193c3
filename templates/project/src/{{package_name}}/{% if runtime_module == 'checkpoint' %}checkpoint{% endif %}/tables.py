"""The checkpoint strategy's tables: the schema version, the JSON its columns hold, its SQL.

``tasks`` (one row per task: ``processed_offset``, the running state, the claim),
``task_inputs`` (each task's input, written once), ``results`` and ``intents`` (calls
prepared before they are made); schema.sql creates them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..runtime import correlation
from ..runtime.state import StateCodec
from ..runtime.store import Store, apply_schema, connect
from ..runtime.strategy import Context

SCHEMA_FILE = Path(__file__).parent.with_name("schema.sql")  # src/<package>/schema.sql
SCHEMA_VERSION = 4

# Version 4: the input leaves the tasks row. That row is updated with every batch and
# SQLite writes a row whole, so the input (~500 records) was copied into the WAL again
# by each offset update, and the claim's scan of the table stepped over it in overflow
# pages. One transaction (apply_schema): a crash in it leaves version 3 as it was.
# DROP COLUMN needs SQLite 3.35 (2021) and rewrites each row without the column.
MOVE_INPUT_OUT = """
CREATE TABLE task_inputs (
    task_id VARCHAR(64) PRIMARY KEY,
    payload TEXT        NOT NULL
);
INSERT INTO task_inputs (task_id, payload) SELECT task_id, payload FROM tasks;
ALTER TABLE tasks DROP COLUMN payload"""

#: MIGRATIONS[v] turns schema version v - 1 into v.
MIGRATIONS = {
    2: "ALTER TABLE tasks ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
    3: correlation.TABLE,  # submissions by correlation id
    4: MOVE_INPUT_OUT,  # the input in its own table, written once
}

#: Task input, stored once per task in task_inputs (version 1).
PAYLOAD = StateCodec("task-payload", 1)


def _checkpoint_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    # v1 kept only the sum; v2 keeps a count as well (a mean needs both).
    return {"sum": data["sum"], "count": data.get("offset", 0)}


#: The job's running state at processed_offset (job.fold's; version 2, version 1 is upgraded).
CHECKPOINT = StateCodec("checkpoint", 2, {1: _checkpoint_v1_to_v2})

# --------------------------------------------------------------------------- SQL
INSERT_TASK = """
INSERT INTO tasks (task_id, correlation_id, status, processed_offset, total,
                   checkpoint_data, created_at, updated_at)
VALUES (?, ?, 'pending', 0, ?, ?, ?, ?)"""

# In the same transaction as its task: a task is never without its input.
INSERT_INPUT = "INSERT INTO task_inputs (task_id, payload) VALUES (?, ?)"

COUNT_TASKS = "SELECT COUNT(*) AS n FROM tasks"

# Candidates for a claim: new work, and running work whose owner may be gone.
SELECT_CLAIMABLE = """
SELECT task_id, status, instance_id, owner, updated_at FROM tasks
WHERE status IN ('pending', 'running') ORDER BY created_at, task_id"""

# Compare-and-set on (status, instance_id): of two workers claiming the same row,
# exactly one changes it.
CLAIM_TASK = """
UPDATE tasks SET status = 'running', instance_id = ?, owner = ?, attempts = attempts + 1,
                 claimed_at = ?, claimed_offset = processed_offset, updated_at = ?, error = NULL
WHERE task_id = ? AND status = ? AND COALESCE(instance_id, '') = ?"""

# The claimed task with its input (read once per claim). LEFT JOIN: a task whose input
# row is missing is still returned (payload NULL) and failed with that reason.
SELECT_TASK = """
SELECT t.*, i.payload FROM tasks t LEFT JOIN task_inputs i ON i.task_id = t.task_id
WHERE t.task_id = ?"""

# Intents another (killed) instance prepared but never confirmed.
SELECT_PREPARED = """
SELECT seq FROM intents
WHERE task_id = ? AND seq >= ? AND seq < ? AND status = 'prepared' AND instance_id != ?"""

# Our own intents for records we did not reach (time trigger, signal): never called.
DROP_UNUSED_INTENTS = """
DELETE FROM intents WHERE task_id = ? AND seq >= ? AND seq < ? AND status = 'prepared' AND instance_id = ?"""

# ON CONFLICT DO NOTHING: an intent left 'prepared' by a killed instance stays as it is.
INSERT_INTENT = """
INSERT INTO intents (idempotency_key, task_id, seq, status, instance_id, prepared_at)
VALUES (?, ?, ?, 'prepared', ?, ?) ON CONFLICT (idempotency_key) DO NOTHING"""

# A batch's intents are done once its offset commits ("done with the checkpoint" above):
# they are removed in that same transaction, all at once by range (one statement; the
# table holds a batch or two per running task, so no per-key update and no pile of
# 'done' rows to scan and delete later).
DELETE_BATCH_INTENTS = "DELETE FROM intents WHERE task_id = ? AND seq >= ? AND seq < ?"

INSERT_RESULT = "INSERT INTO results (task_id, seq, record_id, output, created_at) VALUES (?, ?, ?, ?, ?)"

# The checkpoint itself. WHERE processed_offset = ? is the optimistic lock: if
# another worker moved the offset since we read it, 0 rows change and the whole
# transaction (results included) is rolled back: the batch is given up.
ADVANCE_OFFSET = """
UPDATE tasks SET processed_offset = ?, checkpoint_data = ?, last_checkpoint_id = last_checkpoint_id + 1,
                 status = CASE WHEN ? >= total THEN 'done' ELSE status END, updated_at = ?
WHERE task_id = ? AND processed_offset = ? AND status = 'running'"""

# When a task is done every intent of it is: this also clears the rows a store from an earlier
# version kept ('done' ones, and 'prepared' ones of a service kind that keeps no intents now).
DELETE_TASK_INTENTS = "DELETE FROM intents WHERE task_id = ?"

# Graceful stop (signal, --limit): hand the task back at its committed offset so
# the next worker starts at once instead of waiting for the lease.
RELEASE_TASK = """
UPDATE tasks SET status = 'pending', owner = NULL, updated_at = ?
WHERE task_id = ? AND instance_id = ? AND status = 'running'"""

MARK_FAILED = "UPDATE tasks SET status = 'failed', error = ?, updated_at = ? WHERE task_id = ? AND instance_id = ?"

SELECT_STATUS = """
SELECT task_id, status, processed_offset, total, attempts, error, updated_at, claimed_at, claimed_offset,
       last_checkpoint_id
FROM tasks ORDER BY created_at, task_id"""

# What the run stored, read back by the drill.
SELECT_RESULTS = "SELECT record_id, output FROM results ORDER BY task_id, seq"
SELECT_FINAL_STATES = """
SELECT t.task_id, i.payload, t.checkpoint_data FROM tasks t LEFT JOIN task_inputs i ON i.task_id = t.task_id
ORDER BY t.created_at, t.task_id"""
#: The claims held, with their heartbeat and how far their holder has moved them on (the drill watches both).
SELECT_HELD = """
SELECT task_id AS id, owner, updated_at AS heartbeat, processed_offset AS progress FROM tasks
WHERE status = 'running' ORDER BY task_id"""


def open_store(ctx: Context, *, create: bool = False) -> Store:
    store = connect(ctx.data_dir, ctx.settings, create=create)
    apply_schema(store, SCHEMA_FILE.read_text(encoding="utf-8"), SCHEMA_VERSION, MIGRATIONS)
    return store
