"""Event sourcing, the event store: the library's ``Application`` (``Events``) over the
streams of domain.py, and our own tables (``es_tasks``, ``es_inputs``, ...) next to it in
the same database: ``state.db`` (SQLite) or the PostgreSQL database ``DATABASE_URL`` names
(the library's PostgreSQL persistence, psycopg 3), through the durable factories of
recorders.py. A store outage inside the library is raised as ``StoreUnavailable``.

The strategy's interface is ``event_sourcing/__init__.py``.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

from eventsourcing import persistence as es_persistence
from eventsourcing.application import Application

from .. import settings as settings_module
from ..runtime import correlation, faults
from ..runtime.errors import JobError, StoreError, StoreUnavailable, redact
from ..runtime.store import STATE_DB, Store, apply_schema, check_data_dir, connect, postgresql_unavailable
from ..runtime.strategy import Context
from . import recorders
from .domain import Task

#: event-sourcing-idempotent: commands carry idempotency keys (a ledger of payments).
IDEMPOTENT = settings_module.STRATEGY == "event-sourcing-idempotent"

SCHEMA_FILE = Path(__file__).parent.with_name("schema.sql")  # src/<package>/schema.sql
SCHEMA_VERSION = 2
#: MIGRATIONS[v] turns schema version v - 1 into v.
MIGRATIONS: dict[int, str] = {
    2: correlation.TABLE,  # submissions by correlation id
}
#: The library's tables: the same names on both stores (the PostgreSQL factory is
#: told so), so tools that recognise an event-sourcing store find them either way.
EVENTS_TABLE, SNAPSHOTS_TABLE = "stored_events", "stored_snapshots"
#: Every table this strategy owns in the state store, the library's included (the
#: `reset` command drops them). On PostgreSQL the library also creates a composite
#: type and a function; they are recreated harmlessly and need no reset.
STORE_TABLES: tuple[str, ...] = ("submissions", "es_tasks", "es_inputs", "es_subscribers", "es_sent", "es_results",
                                 "schema_version", EVENTS_TABLE, SNAPSHOTS_TABLE)

# --------------------------------------------------------------------------- SQL
COUNT_TASKS = "SELECT COUNT(*) AS n FROM es_tasks"
INSERT_TASK = """
INSERT INTO es_tasks (task_id, stream_id, total, work_ms, created_at) VALUES (?, ?, ?, ?, ?)"""
INSERT_INPUT = "INSERT INTO es_inputs (task_id, seq, record) VALUES (?, ?, ?)"
SELECT_OPEN_TASKS = "SELECT task_id, stream_id, total, work_ms, acked FROM es_tasks WHERE status = 'open' ORDER BY task_id"
SELECT_TASKS = "SELECT * FROM es_tasks ORDER BY task_id"
SELECT_INPUTS = "SELECT seq, record FROM es_inputs WHERE task_id = ? AND seq >= ? AND seq < ? ORDER BY seq"
MARK_TASK = "UPDATE es_tasks SET status = ?, error = ? WHERE task_id = ? AND status = 'open'"
# Idempotent variant: the client's acknowledgement, committed after the events on
# purpose; only ever moves forward.
ACK_COMMANDS = """
UPDATE es_tasks SET acked = ?, replayed = replayed + ? WHERE task_id = ? AND acked < ?"""


class Events(Application):
    """The event store (the library's Application). Snapshots every N events per stream."""

    name = "continuity"

    def __init__(self, env: dict[str, str], snapshot_every: int) -> None:
        self.snapshot_every = snapshot_every
        super().__init__(env)  # IS_SNAPSHOTTING_ENABLED gives it the snapshot store

    def save(self, *objs: Any, **kwargs: Any) -> Any:
        """Append, with a snapshot of each task whose stream crosses a multiple of N events
        written IN THE SAME TRANSACTION as the events (one commit, one fsync, per save).

        The snapshot is taken from the aggregate in memory, which is exactly the state
        being committed (``Snapshot.take`` leaves the pending events out). (The library's
        own `snapshotting_intervals` would first re-read the stream from the store, a
        needless replay, and store the snapshot in a transaction of its own.) The
        snapshots travel to the recorder as a keyword argument of the insert: the
        library hands ``save``'s keyword arguments down to its recorder's
        ``_insert_events``, which our recorders override (above).
        """
        faults.point("append")  # a crash point of the drill's sweep (faults.py): nothing appended yet
        due = [type(o).Snapshot.take(o) for o in objs
               if isinstance(o, Task) and o.version // self.snapshot_every
               > (o.version - len(o.pending_events)) // self.snapshot_every]
        if due and self.snapshots is not None:
            kwargs["due_snapshots"] = (self.snapshots.recorder,
                                       [self.snapshots.mapper.to_stored_event(s) for s in due])
        return super().save(*objs, **kwargs)


# --------------------------------------------------------------- store outages
def _is_postgresql(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def is_outage(exc: BaseException) -> bool:
    """Is this error from inside the library a store outage? The library wraps the
    driver's error (its ``__cause__``), which store.py classifies as it does for our own
    tables (``postgresql_unavailable``; SQLite: a lock held beyond the timeout). Only the
    library's own pool timing out (no connection in time) has no driver error behind it."""
    if isinstance(exc, StoreUnavailable):
        return True
    if isinstance(exc, es_persistence.PersistenceError):
        cause = exc.__cause__
        if cause is None:
            return isinstance(exc, es_persistence.ConnectionUnavailableError)
        return is_outage(cause)
    if isinstance(exc, sqlite3.Error):
        return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))
    # psycopg's errors (psycopg_pool's PoolTimeout is one of them); psycopg is only
    # imported (installed) when the error came from it.
    return type(exc).__module__.startswith("psycopg") and postgresql_unavailable(exc)


@contextmanager
def store_outages(ctx: Context) -> Iterator[None]:
    """Raise a store outage from inside the library (or psycopg) as StoreUnavailable,
    which `run` rides out; anything else goes through unchanged."""
    try:
        yield
    except StoreUnavailable:
        raise
    except Exception as exc:
        if not is_outage(exc):
            raise
        # Worded as store.py words the same outage on our own tables' connection.
        detail = " ".join(str(exc).split())
        if _is_postgresql(ctx.settings.database_url):
            raise StoreUnavailable(f"state store {redact(ctx.settings.database_url)} unreachable: {detail}") from None
        raise StoreUnavailable(f"state database {ctx.data_dir / STATE_DB} is locked by another process "
                               f"(waited busy_timeout): {detail}") from None


F = TypeVar("F", bound=Callable[..., Any])


def outages_unavailable(func: F) -> F:
    """Decorator form of store_outages for the strategy's commands (first argument: ctx)."""

    @wraps(func)
    def wrapper(ctx: Context, *args: Any, **kwargs: Any) -> Any:
        with store_outages(ctx):
            return func(ctx, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


# ------------------------------------------------------------------ opening
def _events_env(ctx: Context) -> dict[str, str]:
    """The library's settings, derived from ours: DATABASE_URL is the one the user sets."""
    common = {"IS_SNAPSHOTTING_ENABLED": "y", "CREATE_TABLE": "y"}
    # Seconds (the library takes an int): how long a writer waits for the lock.
    lock_s = str(max(1, math.ceil(ctx.settings.busy_timeout_ms / 1000)))
    url = ctx.settings.database_url
    if not _is_postgresql(url):
        return {**common, "PERSISTENCE_MODULE": f"{recorders.__name__}:DurableSQLiteFactory",
                "SQLITE_DBNAME": str(ctx.data_dir / STATE_DB), "SQLITE_LOCK_TIMEOUT": lock_s}
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise StoreError("DATABASE_URL is PostgreSQL but psycopg is not installed: "
                         "pip install 'eventsourcing[postgres]' 'psycopg[binary]'") from None
    try:
        parts = conninfo_to_dict(url)
    except Exception as exc:
        raise StoreError(f"DATABASE_URL {redact(url)} is not a valid PostgreSQL URL: {exc}") from None
    return {
        **common,
        "PERSISTENCE_MODULE": f"{recorders.__name__}:DurablePostgresFactory",
        "DATABASE_URL": url,  # read by DurablePostgresFactory: the pool's connection string
        # The library insists on these five; the URL above still wins for the connection.
        "POSTGRES_DBNAME": str(parts.get("dbname") or ""),
        "POSTGRES_HOST": str(parts.get("host") or ""),
        "POSTGRES_PORT": str(parts.get("port") or "5432"),
        "POSTGRES_USER": str(parts.get("user") or ""),
        "POSTGRES_PASSWORD": str(parts.get("password") or ""),
        # How long to wait for a connection from the pool, in whole seconds: short, so a
        # server that went away surfaces (as StoreUnavailable) instead of stalling a worker,
        # and no longer than store_outage_s (rounded up: the library takes whole seconds).
        "POSTGRES_CONNECT_TIMEOUT": str(parts.get("connect_timeout")
                                        or max(1, math.ceil(min(3.0, ctx.settings.store_outage_s)))),
        # One worker process is one thread: one connection, one spare.
        "POSTGRES_POOL_SIZE": "1",
        "POSTGRES_MAX_OVERFLOW": "1",
        # The append takes the events table's EXCLUSIVE lock (ids in commit order for the
        # subscribers); waiting longer than busy_timeout is an outage, as on SQLite.
        "POSTGRES_LOCK_TIMEOUT": lock_s,
    }


def open_events(ctx: Context, *, create: bool = False) -> Events:
    """A fresh Application with fresh recorders (and, on PostgreSQL, a fresh pool)."""
    url = ctx.settings.database_url
    check_data_dir(ctx.data_dir, create=create)
    path = ctx.data_dir / STATE_DB
    if not _is_postgresql(url) and not path.exists() and not create:
        raise StoreError(f"no state database at {path}; run `submit-demo --data-dir {ctx.data_dir}` first")
    env = _events_env(ctx)
    if ctx.settings.snapshot_every < 1:
        raise JobError("snapshot_every must be at least 1")
    where = redact(url) if _is_postgresql(url) else str(path)
    try:
        with store_outages(ctx), _ddl_lock(ctx) as created:
            if created:
                env["CREATE_TABLE"] = "n"
            return Events(env, ctx.settings.snapshot_every)
    except StoreError:  # StoreUnavailable included: run rides that out
        raise
    except Exception as exc:  # the library wraps driver errors in its own classes
        raise StoreError(f"cannot open the event store {where}: {' '.join(str(exc).split())}") from None


@contextmanager
def _ddl_lock(ctx: Context) -> Iterator[bool]:
    """PostgreSQL: yields True when the library's tables are all there already (it is then
    told not to create them: its DDL at every start would briefly lock the events table
    against the other workers' appends). Otherwise the creation runs under an advisory
    lock: two processes creating them at once can trip over each other ("tuple
    concurrently updated"). SQLite: yields False, the library creates what is missing."""
    if not _is_postgresql(ctx.settings.database_url):
        yield False
        return
    store = connect(ctx.data_dir, ctx.settings)
    try:
        # The snapshots' table is created last (after the events' table, type and function).
        if store.one("SELECT to_regclass(?) IS NOT NULL AS there", (SNAPSHOTS_TABLE,))["there"]:
            yield True
            return
        store.execute("SELECT pg_advisory_lock(?)", (_DDL_LOCK,))
        yield False
    finally:
        store.close()  # ends the session: the advisory lock goes with it


#: An arbitrary 64-bit key for pg_advisory_lock: "events DDL" of this template.
_DDL_LOCK = 0x636F6E7469657674


def open_store(ctx: Context, *, create: bool = False) -> Store:
    store = connect(ctx.data_dir, ctx.settings, create=create)
    apply_schema(store, SCHEMA_FILE.read_text(encoding="utf-8"), SCHEMA_VERSION, MIGRATIONS)
    return store
