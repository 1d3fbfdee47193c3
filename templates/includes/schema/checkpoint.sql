-- Checkpoint strategy: a task/state table (SEEDS 8 and 18), the results written
-- with each checkpoint, and the intents (outbox) of external calls (pitfall 4.1).

-- One row per unit of work. A worker claims a task, processes its records in
-- batches and, per batch, commits the results and the new processed_offset in ONE
-- transaction: after kill -9 the task resumes at the last committed offset.
CREATE TABLE tasks (
    task_id            VARCHAR(64)  PRIMARY KEY,
    -- Unique per task: the demo's record range, or the task id itself for a
    -- submission (whose correlation id is kept in `submissions` below).
    correlation_id     VARCHAR(64)  NOT NULL UNIQUE,
    -- The task's input is in task_inputs (below), not here: this row is updated with
    -- every batch, and a row is rewritten whole (schema version 4 moved it out).
    status             VARCHAR(16)  NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'running', 'done', 'failed')),
    -- New for every worker start: a resumed run is told apart from a new one.
    instance_id        VARCHAR(64),
    -- host id:start time:pid of that instance (runtime/owners.py): a dead owner on this host is detected at once,
    -- a silent one elsewhere when its heartbeat (updated_at) is older than the lease.
    owner              VARCHAR(128),
    processed_offset   INTEGER      NOT NULL DEFAULT 0,
    total              INTEGER      NOT NULL,
    -- The job's own running state at processed_offset, as versioned JSON (never pickle).
    checkpoint_data    TEXT,
    last_checkpoint_id INTEGER      NOT NULL DEFAULT 0,
    attempts           INTEGER      NOT NULL DEFAULT 0,   -- added in schema version 2
    error              TEXT,
    created_at         DOUBLE PRECISION NOT NULL,
    claimed_at         DOUBLE PRECISION,                  -- with claimed_offset: the rate
    claimed_offset     INTEGER,
    updated_at         DOUBLE PRECISION NOT NULL          -- the heartbeat
);
CREATE INDEX tasks_by_status ON tasks (status, updated_at);

-- The original input of each task, as versioned JSON: recovery never depends on the
-- queue redelivering it. Written once, with its task, and read when the task is
-- claimed; never updated, so a batch's commit does not copy it again (schema version 4;
-- earlier versions kept it in the tasks row, rewritten by every offset update).
CREATE TABLE task_inputs (
    task_id VARCHAR(64) PRIMARY KEY,
    payload TEXT        NOT NULL
);

-- What the job computed, committed together with the offset that covers it.
CREATE TABLE results (
    task_id    VARCHAR(64) NOT NULL,
    seq        INTEGER     NOT NULL,       -- the record's position in the task
    record_id  VARCHAR(64) NOT NULL,
    output     TEXT        NOT NULL,       -- JSON
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;

-- External calls: 'prepared' is committed BEFORE the call, and the row is deleted by the
-- batch's checkpoint (its committed offset now says "done"; earlier versions kept the row
-- as 'done'). A 'prepared' intent found on recovery means "the call may have got
-- through": ask the service by idempotency key instead of calling again. Written only
-- when the service is queryable: an idempotent one dedupes the re-sent key itself, and a
-- plain call has its own ledger row (runtime/effects.py).
CREATE TABLE intents (
    idempotency_key VARCHAR(200) PRIMARY KEY,
    task_id         VARCHAR(64)  NOT NULL,
    seq             INTEGER      NOT NULL,
    status          VARCHAR(16)  NOT NULL CHECK (status IN ('prepared', 'done')),
    instance_id     VARCHAR(64)  NOT NULL,
    prepared_at     DOUBLE PRECISION NOT NULL,
    done_at         DOUBLE PRECISION
);

CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (4);
