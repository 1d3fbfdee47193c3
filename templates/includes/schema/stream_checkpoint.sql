-- Stream-checkpoint strategy: Spark Structured Streaming keeps the source offsets
-- in its own checkpoint location (offsets/, commits/); this database keeps what
-- the foreachBatch sink wrote, and which micro-batches it wrote.

-- The landing files submitted (submit-demo, submit --file): the input's size, for status.
CREATE TABLE stream_files (
    path         VARCHAR(500) PRIMARY KEY,
    records      INTEGER      NOT NULL,
    work_ms      DOUBLE PRECISION NOT NULL DEFAULT 0,   -- simulated work per record (the demo)
    submitted_at DOUBLE PRECISION NOT NULL
);

-- One row per micro-batch the sink committed, in the SAME transaction as the
-- batch's results. Spark replays a batch whose commit it had not logged when the
-- driver died; its batch_id is found here and the batch is skipped.
CREATE TABLE stream_batches (
    batch_id     BIGINT       PRIMARY KEY,
    records      INTEGER      NOT NULL,
    committed_at DOUBLE PRECISION NOT NULL
);

-- A replayed batch that was skipped (the proof the drill reports).
CREATE TABLE stream_skipped (
    batch_id     BIGINT       NOT NULL,
    skipped_at   DOUBLE PRECISION NOT NULL
);

-- The job's results, one row per record (job.process_record's answer, JSON).
CREATE TABLE stream_results (
    record_id    VARCHAR(200) NOT NULL,
    batch_id     BIGINT       NOT NULL,
    result       TEXT         NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL
);
CREATE INDEX stream_results_by_record ON stream_results (record_id);

CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (2);
