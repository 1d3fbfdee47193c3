"""The idempotent-retry strategy's tables: the schema version, the JSON a task holds, its SQL.

``tasks`` (one per record, with its input and an optimistic ``version``), ``processed``
(the dedupe record, keyed by the business key) and ``results``; schema.sql creates them.
"""

from __future__ import annotations

from pathlib import Path

from ..runtime import correlation
from ..runtime.state import StateCodec
from ..runtime.store import Store, apply_schema, connect
from ..runtime.strategy import Context

SCHEMA_FILE = Path(__file__).parent.with_name("schema.sql")  # src/<package>/schema.sql
SCHEMA_VERSION = 2
#: MIGRATIONS[v] turns schema version v - 1 into v.
MIGRATIONS: dict[int, str] = {
    2: correlation.TABLE,  # submissions by correlation id
}

#: A task's input, stored with the task: recovery never depends on a queue.
TASK_INPUT = StateCodec("task-input", 1)

# -------------------------------------------------------------------------- SQL
INSERT_TASK = """
INSERT INTO tasks (task_id, business_key, input, status, version, attempts, created_at, updated_at)
VALUES (?, ?, ?, 'pending', 0, 0, ?, ?)"""

COUNT_TASKS = "SELECT COUNT(*) AS n FROM tasks"

# Running tasks: their holder may be dead (kill -9) and the task must be re-run.
SELECT_RUNNING = "SELECT task_id, version, owner, instance_id, updated_at FROM tasks WHERE status = 'running'"

# The next pending task whose business key no running task holds: the same record submitted
# twice (two correlation ids) must not run on two workers at once, where neither would find the
# other's dedupe record yet and both would call (a queryable or plain service applies both). It
# waits until the running one is done (then its dedupe record makes it a no-op) or taken over.
# Claims are serialized (SQLite's BEGIN IMMEDIATE; on PostgreSQL an advisory lock, worker.claim), so
# two can never pass this check together.
SELECT_NEXT_PENDING = """
SELECT t.task_id, t.version FROM tasks t WHERE t.status = 'pending'
AND NOT EXISTS (SELECT 1 FROM tasks r WHERE r.status = 'running' AND r.business_key = t.business_key)
ORDER BY t.task_id LIMIT 1"""

# Optimistic claim: of two workers that read the same version, exactly one changes the row.
CLAIM_TASK = """
UPDATE tasks SET status = 'running', version = version + 1, owner = ?, instance_id = ?,
                 attempts = attempts + 1, claimed_at = ?, updated_at = ?
WHERE task_id = ? AND version = ?"""

SELECT_TASK = "SELECT * FROM tasks WHERE task_id = ?"

# The dedupe record of a business key that already took effect.
SELECT_PROCESSED = "SELECT task_id, result FROM processed WHERE business_key = ?"

# ON CONFLICT DO NOTHING + rowcount: portable "was this key new?" (0 rows = a
# concurrent task with the same key committed first).
INSERT_PROCESSED = """
INSERT INTO processed (business_key, task_id, result, processed_at) VALUES (?, ?, ?, ?)
ON CONFLICT (business_key) DO NOTHING"""

INSERT_RESULT = "INSERT INTO results (task_id, business_key, output, created_at) VALUES (?, ?, ?, ?)"

# The optimistic-version update: the task is ours only if its version is still
# the one our claim wrote. 0 rows → someone took it over → roll everything back.
COMPLETE_TASK = """
UPDATE tasks SET status = 'done', version = version + 1, attempts = attempts + ?, error = NULL, updated_at = ?
WHERE task_id = ? AND version = ?"""

FAIL_TASK = """
UPDATE tasks SET status = 'failed', version = version + 1, attempts = attempts + ?, error = ?, updated_at = ?
WHERE task_id = ? AND version = ?"""

# Graceful stop while a task waits for a retry: hand it back untouched.
RELEASE_TASK = """
UPDATE tasks SET status = 'pending', version = version + 1, owner = NULL, updated_at = ?
WHERE task_id = ? AND version = ?"""

SELECT_COUNTS = """
SELECT status, COUNT(*) AS n, SUM(attempts) AS attempts, MIN(claimed_at) AS first_claim, MAX(updated_at) AS last
FROM tasks GROUP BY status"""

SELECT_UNFINISHED = """
SELECT task_id, status, attempts, error, updated_at FROM tasks
WHERE status IN ('running', 'failed') ORDER BY task_id LIMIT 20"""

# What the run holds and stored, read back by the drill.
SELECT_HELD = "SELECT task_id AS id, owner FROM tasks WHERE status = 'running' ORDER BY task_id"
SELECT_RESULTS = """
SELECT t.input, r.output FROM results r JOIN tasks t ON t.task_id = r.task_id ORDER BY r.task_id"""


def open_store(ctx: Context, *, create: bool = False) -> Store:
    store = connect(ctx.data_dir, ctx.settings, create=create)
    apply_schema(store, SCHEMA_FILE.read_text(encoding="utf-8"), SCHEMA_VERSION, MIGRATIONS)
    return store
