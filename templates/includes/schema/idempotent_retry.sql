-- Idempotent-retry strategy (SEEDS 2 and 6): one task per unit of work, re-run
-- whole on failure or restart; a business unique key makes the rerun harmless.

-- One row per task. `version` is the optimistic lock: a claim and the final
-- update each carry `WHERE version = ?`, so of two workers only one wins, and a
-- worker whose task was taken over cannot commit it (0 rows: roll back).
CREATE TABLE tasks (
    task_id      VARCHAR(64)  PRIMARY KEY,
    -- The business unique key (order number + payment serial in a real system):
    -- the same for every rerun, sent with the external call, and the primary key
    -- of the dedupe table below.
    business_key VARCHAR(200) NOT NULL,
    -- The task's input as versioned JSON: a rerun needs nothing but this row.
    input        TEXT         NOT NULL,
    status       VARCHAR(16)  NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'running', 'done', 'failed')),
    version      INTEGER      NOT NULL DEFAULT 0,
    -- host:pid and the start of the worker holding it: a dead holder on this host
    -- is seen at once, a silent one elsewhere when updated_at is older than lease_s.
    owner        VARCHAR(128),
    instance_id  VARCHAR(64),
    attempts     INTEGER      NOT NULL DEFAULT 0,   -- claims + retries
    error        TEXT,                              -- why a task failed (permanent error, or retries exhausted)
    created_at   DOUBLE PRECISION NOT NULL,
    claimed_at   DOUBLE PRECISION,
    updated_at   DOUBLE PRECISION NOT NULL
);
CREATE INDEX tasks_by_status ON tasks (status, task_id);

-- WITHOUT ROWID (SQLite; PostgreSQL has no such clause, store.py drops it there): the two
-- tables below are looked up and written by their text key only, so SQLite keeps each
-- as ONE b-tree ordered by that key instead of a rowid table plus a separate index of
-- the key: every task's commit writes two pages fewer (45 -> 38 KB written per task,
-- benchmarks/bench_rabbitmq.py). A store created before keeps its layout and works as is.

-- The dedupe record: one row per business key that took effect. It commits in
-- the same transaction as the effect (results) and the task's 'done' status, so
-- "effect written" and "key recorded" can never disagree.
CREATE TABLE processed (
    business_key VARCHAR(200) PRIMARY KEY,
    task_id      VARCHAR(64)  NOT NULL,
    result       TEXT         NOT NULL,   -- JSON: what the task produced
    processed_at DOUBLE PRECISION NOT NULL
) WITHOUT ROWID;

-- The task's local effect (what the job computed).
CREATE TABLE results (
    task_id      VARCHAR(64)  PRIMARY KEY,
    business_key VARCHAR(200) NOT NULL,
    output       TEXT         NOT NULL,   -- JSON
    created_at   DOUBLE PRECISION NOT NULL
) WITHOUT ROWID;

CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (2);
