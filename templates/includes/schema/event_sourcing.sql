-- Event sourcing ({{ strategy }}): the event store itself belongs to the
-- `eventsourcing` library, which creates its tables in the same database (state.db,
-- or PostgreSQL's, where the notification id is a bigserial column, not the rowid):
--
--   stored_events    (originator_id, originator_version, topic, state)   PRIMARY KEY
--                    (originator_id, originator_version): append-only, and the
--                    optimistic concurrency check per stream (a second writer of
--                    version v of a stream fails with a conflict); its rowid is the
--                    notification id, the global order subscribers follow.
--   stored_snapshots (same columns): a snapshot every snapshot_every events, so a
--                    stream is rebuilt from the latest snapshot plus the events after it.
--
-- Event state is JSON (the library's JSON transcoder), never pickle. The tables
-- below are this project's own: the input queue, the subscribers' positions and
-- the read model (projection) the subscribers maintain.

-- The input, written once by `submit-demo`: recovery never depends on a queue
-- redelivering it. Each task is one event stream.
CREATE TABLE es_tasks (
    task_id     VARCHAR(64)  PRIMARY KEY,
    stream_id   VARCHAR(36)  NOT NULL UNIQUE,   -- the aggregate id in stored_events
    total       INTEGER      NOT NULL,
    work_ms     DOUBLE PRECISION NOT NULL,
    -- 'open' until the stream holds every record; a hint only (the stream is the truth).
    status      VARCHAR(16)  NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done', 'failed')),
    -- Idempotent variant: the commands acknowledged so far (an at-least-once client's
    -- cursor, committed AFTER the events, so a kill redelivers the commands since it),
    -- and how many redelivered commands were answered from their first result.
    acked       INTEGER      NOT NULL DEFAULT 0,
    replayed    INTEGER      NOT NULL DEFAULT 0,
    error       TEXT,
    created_at  DOUBLE PRECISION NOT NULL
);

CREATE TABLE es_inputs (
    task_id     VARCHAR(64)  NOT NULL,
    seq         INTEGER      NOT NULL,
    record      TEXT         NOT NULL,          -- the input record as JSON
    PRIMARY KEY (task_id, seq)
);

-- One row per consumer of the notification log: 'effects' (the only place that
-- calls the external service) and 'results' (the projection; never calls out).
-- `position` is committed in the SAME transaction as the consumer's own rows.
CREATE TABLE es_subscribers (
    name          VARCHAR(32)  PRIMARY KEY,
    position      INTEGER      NOT NULL DEFAULT 0,
    -- Written BEFORE the effects subscriber calls out for (position, prepared_upto]:
    -- after a kill, those events are first looked up by key at the service
    -- instead of being called again (pitfall 4.1, an outbox in one row).
    prepared_upto INTEGER      NOT NULL DEFAULT 0,
    -- The lease: one effects subscriber at a time (host:pid; a dead pid on this
    -- host or a heartbeat older than lease_s frees it).
    owner         VARCHAR(128),
    heartbeat     DOUBLE PRECISION,
    updated_at    DOUBLE PRECISION
);

-- The effects subscriber's own work: the service's answer per effect.
CREATE TABLE es_sent (
    idempotency_key VARCHAR(200) PRIMARY KEY,
    notification_id INTEGER      NOT NULL,
    task_id         VARCHAR(64)  NOT NULL,
    record_id       VARCHAR(64)  NOT NULL,
    step            VARCHAR(64)  NOT NULL DEFAULT '',
    outcome         VARCHAR(16)  NOT NULL,        -- applied | duplicate | found
    sent_at         DOUBLE PRECISION NOT NULL
);

-- The projection (read model): one row per processed record. `rebuild` deletes
-- it and replays every event into it, without calling anything.
CREATE TABLE es_results (
    record_id       VARCHAR(64)  PRIMARY KEY,
    task_id         VARCHAR(64)  NOT NULL,
    seq             INTEGER      NOT NULL,
    output          TEXT         NOT NULL,        -- JSON
    notification_id INTEGER      NOT NULL,
    created_at      DOUBLE PRECISION NOT NULL
);
CREATE INDEX es_results_by_task ON es_results (task_id);

INSERT INTO es_subscribers (name) VALUES ('effects');
INSERT INTO es_subscribers (name) VALUES ('results');

CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (2);
