-- State-machine strategy (SEEDS 3, pitfall 4.1): each order goes through declared
-- states (OrderFlow in state_machine/flow.py); every transition is logged; every
-- external call is an intent before and a confirmation after.

-- One row per order (a demo record). `state` is where the flow is; `version`
-- counts its transitions and is the optimistic lock of the next one
-- (UPDATE ... WHERE state = ? AND version = ?).
CREATE TABLE orders (
    order_id    VARCHAR(64)  PRIMARY KEY,
    -- The order's input as versioned JSON: recovery needs nothing but this row.
    input       TEXT         NOT NULL,
    -- Must be a state of OrderFlow; the database refuses anything else.
    state       VARCHAR(16)  NOT NULL DEFAULT 'new'
                CHECK (state IN ('new', 'reserved', 'charged', 'done', 'failed')),
    version     INTEGER      NOT NULL DEFAULT 0,
    -- The orchestrator driving it (host:pid, and the start's context id). NULL when
    -- free or finished. A dead holder on this host is seen at once, a silent one
    -- elsewhere when updated_at is older than lease_s: its order is carried on.
    owner       VARCHAR(128),
    instance_id VARCHAR(64),
    error       TEXT,                              -- why an order failed
    created_at  DOUBLE PRECISION NOT NULL,
    claimed_at  DOUBLE PRECISION,
    updated_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX orders_by_state ON orders (state, owner);

-- Every transition, with the context id of the orchestrator start that made it
-- and the time: the order's visible history. (order_id, seq) is unique, so two
-- orchestrators can never both write transition n of an order.
CREATE TABLE transitions (
    order_id   VARCHAR(64) NOT NULL,
    seq        INTEGER     NOT NULL,     -- the order's version after this transition
    event      VARCHAR(32) NOT NULL,     -- reserve | charge | notify | fail
    from_state VARCHAR(16) NOT NULL,
    to_state   VARCHAR(16) NOT NULL,
    context_id VARCHAR(64) NOT NULL,
    at         DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (order_id, seq)
);

-- The operation log of external calls. 'prepared' is committed BEFORE the call;
-- 'confirmed' in the same transaction as the transition AFTER it. A 'prepared'
-- step found on recovery means "maybe called": the orchestrator asks the service
-- by idempotency_key instead of calling again.
CREATE TABLE step_log (
    order_id        VARCHAR(64)  NOT NULL,
    step            VARCHAR(32)  NOT NULL,
    idempotency_key VARCHAR(200) NOT NULL UNIQUE,
    status          VARCHAR(16)  NOT NULL CHECK (status IN ('prepared', 'confirmed')),
    context_id      VARCHAR(64)  NOT NULL,   -- the start that recorded the intent
    response        TEXT,                    -- JSON: the service's answer
    prepared_at     DOUBLE PRECISION NOT NULL,
    confirmed_at    DOUBLE PRECISION,
    PRIMARY KEY (order_id, step)
);

CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (2);
