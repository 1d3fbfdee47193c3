-- The submissions taken (submit --file, a queue message), by correlation id: a
-- redelivered submission finds its row and gets its task ids back instead of
-- adding the work again (runtime/correlation.py, whose TABLE adds it to an older store).
-- Shared by every strategy with a state database.
CREATE TABLE submissions (
    correlation_id VARCHAR(200) PRIMARY KEY,
    task_ids       TEXT         NOT NULL,        -- JSON list: what the submission queued
    records        INTEGER      NOT NULL,
    submitted_at   DOUBLE PRECISION NOT NULL
);
