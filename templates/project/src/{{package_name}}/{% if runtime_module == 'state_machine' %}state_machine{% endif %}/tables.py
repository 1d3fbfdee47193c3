"""The state-machine strategy's tables: the schema version, an order's stored input, its SQL.

``orders`` (state, holder, version), ``transitions`` (the log of every move) and ``step_log``
(an external call's intent, prepared before the call, confirmed with the transition); schema.sql
creates them.
"""

from __future__ import annotations

from pathlib import Path

from ..runtime import correlation
from ..runtime.state import StateCodec
from ..runtime.store import Store, apply_schema, connect
from ..runtime.strategy import Context
from .flow import ACTIVE_STATES

SCHEMA_FILE = Path(__file__).parent.with_name("schema.sql")  # src/<package>/schema.sql
SCHEMA_VERSION = 2
#: MIGRATIONS[v] turns schema version v - 1 into v.
MIGRATIONS: dict[int, str] = {
    2: correlation.TABLE,  # submissions by correlation id
}

#: An order's input, stored with the order (versioned JSON, never pickle).
ORDER_INPUT = StateCodec("order-input", 1)

# -------------------------------------------------------------------------- SQL
INSERT_ORDER = """
INSERT INTO orders (order_id, input, state, version, created_at, updated_at)
VALUES (?, ?, 'new', 0, ?, ?) ON CONFLICT (order_id) DO NOTHING"""

COUNT_ORDERS = "SELECT COUNT(*) AS n FROM orders"

# Orders in mid-flow with a holder: the holder may be dead (kill -9).
SELECT_HELD = f"""
SELECT order_id, owner, instance_id, updated_at FROM orders
WHERE owner IS NOT NULL AND state IN ({", ".join("?" * len(ACTIVE_STATES))})"""

SELECT_NEXT_FREE = f"""
SELECT order_id, owner, instance_id, updated_at FROM orders
WHERE owner IS NULL AND state IN ({", ".join("?" * len(ACTIVE_STATES))}) ORDER BY order_id LIMIT 1"""

# Compare-and-set on the holder: of two workers taking the same order, one wins.
CLAIM_ORDER = """
UPDATE orders SET owner = ?, instance_id = ?, claimed_at = ?, updated_at = ?
WHERE order_id = ? AND COALESCE(instance_id, '') = ?"""

SELECT_ORDER = "SELECT * FROM orders WHERE order_id = ?"

SELECT_STEP = "SELECT status, idempotency_key, context_id FROM step_log WHERE order_id = ? AND step = ?"

# The intent, committed BEFORE the call. ON CONFLICT DO NOTHING: an intent a
# killed orchestrator left 'prepared' stays as it is (and is looked up).
PREPARE_STEP = """
INSERT INTO step_log (order_id, step, idempotency_key, status, context_id, prepared_at)
VALUES (?, ?, ?, 'prepared', ?, ?) ON CONFLICT (order_id, step) DO NOTHING"""

CONFIRM_STEP = """
UPDATE step_log SET status = 'confirmed', response = ?, confirmed_at = ?
WHERE order_id = ? AND step = ? AND status = 'prepared'"""

# The transition: optimistic on (state, version) and on our hold of the order.
MOVE_ORDER = """
UPDATE orders SET state = ?, version = version + 1, error = ?, updated_at = ?,
                  owner = CASE WHEN ? = 1 THEN NULL ELSE owner END
WHERE order_id = ? AND state = ? AND version = ? AND instance_id = ?"""

LOG_TRANSITION = """
INSERT INTO transitions (order_id, seq, event, from_state, to_state, context_id, at)
VALUES (?, ?, ?, ?, ?, ?, ?)"""

RELEASE_ORDER = "UPDATE orders SET owner = NULL, updated_at = ? WHERE order_id = ? AND instance_id = ?"

# An order claimed but never started: our intent of its first step was never called.
DROP_UNCALLED_STEPS = "DELETE FROM step_log WHERE order_id = ? AND status = 'prepared' AND context_id = ?"

SELECT_COUNTS = """
SELECT state, COUNT(*) AS n, SUM(version) AS transitions, MIN(claimed_at) AS first_claim, MAX(updated_at) AS last
FROM orders GROUP BY state"""

SELECT_FAILED = "SELECT order_id, state, version, error FROM orders WHERE state = 'failed' ORDER BY order_id LIMIT 20"

# `history` (an extra command) and what the run stored, read back by the drill.
SELECT_HISTORY = """
SELECT seq, event, from_state, to_state, context_id, at FROM transitions WHERE order_id = ? ORDER BY seq"""

SELECT_STEPS = """
SELECT step, status, idempotency_key, context_id, prepared_at, confirmed_at FROM step_log
WHERE order_id = ? ORDER BY prepared_at"""

SELECT_RESULTS = """
SELECT order_id, response FROM step_log WHERE step = ? AND status = 'confirmed' ORDER BY order_id"""
SELECT_VERSIONS = "SELECT order_id, state, version FROM orders ORDER BY order_id"
SELECT_HELD_ORDERS = f"""
SELECT order_id AS id, owner, updated_at AS heartbeat, version AS progress FROM orders
WHERE owner IS NOT NULL AND state IN ({", ".join("?" * len(ACTIVE_STATES))}) ORDER BY order_id"""
SELECT_ALL_TRANSITIONS = "SELECT order_id, seq, event, from_state, to_state FROM transitions ORDER BY order_id, seq"
SELECT_ALL_STEPS = "SELECT order_id, step, status FROM step_log ORDER BY order_id, step"


def open_store(ctx: Context, *, create: bool = False) -> Store:
    store = connect(ctx.data_dir, ctx.settings, create=create)
    apply_schema(store, SCHEMA_FILE.read_text(encoding="utf-8"), SCHEMA_VERSION, MIGRATIONS)
    return store
