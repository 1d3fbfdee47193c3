"""Event sourcing, the event store: the streams (``Task``, ``Payment``), the
library's ``Application`` (``Events``) and our own tables (``es_tasks``,
``es_inputs``, ...) next to it in the same database: ``state.db`` (SQLite, a
durable factory) or the PostgreSQL database ``DATABASE_URL`` names (the library's
PostgreSQL persistence, psycopg 3).

Aggregates' mutators compute from the event only: replaying a stream never
calls out. The strategy's interface is ``event_sourcing/__init__.py``.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing import persistence as es_persistence
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteConnection, SQLiteConnectionPool, SQLiteFactory
from eventsourcing.utils import Environment

from ..runtime import correlation
from .. import job
from .. import settings as settings_module
from ..runtime.errors import JobError, StoreError, StoreUnavailable, redact
from ..runtime.store import STATE_DB, Store, apply_schema, check_data_dir, connect, postgresql_unavailable
from ..runtime.strategy import Context

#: The eventsourcing release this module is written against. The snapshot-in-the-same-
#: transaction hook below overrides the library's ``_insert_events`` (not a public
#: API), so the dependency is pinned to exactly this version and a generated test
#: (test_event_sourcing.py, "seam") fails loudly when the installed library differs.
EVENTSOURCING_VERSION = "9.5.6"

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


# ----------------------------------------------------------------------- domain
def stream_id(task_id: str) -> UUID:
    """A stream id derived from the task id: every process finds the same stream."""
    return uuid5(NAMESPACE_URL, f"continuity-task:{task_id}")


class Task(Aggregate):
    """One stream per task. Methods decorated with @event are the mutators: their
    bodies run when the event is created AND on every replay, so they compute
    from the event only (no I/O, no clock, no external call)."""

    @staticmethod
    def create_id(task_id: str) -> UUID:
        return stream_id(task_id)

    @event("Started")
    def __init__(self, task_id: str, total: int) -> None:
        self.task_id, self.total = task_id, total
        self.next_seq, self.running, self.failed = 0, dict(job.INITIAL_STATE), None

    @event("RecordProcessed")
    def record_processed(self, seq: int, record_id: str, output: dict, effects: list,
                         key: str | None = None) -> None:
        # `effects`: what job.process_record asked effect() to do, performed later by
        # the effects subscriber. `key`: the command's idempotency key (ledger variant).
        self.next_seq = seq + 1
        self.running = job.fold(self.running, output)  # the job's running state (job.py's fold: pure)

    @event("Failed")
    def fail(self, reason: str) -> None:
        self.failed = reason

    def state(self) -> dict[str, Any]:
        """What a rebuild must reproduce (compared by tests and `rebuild`)."""
        return {"task_id": self.task_id, "total": self.total, "next_seq": self.next_seq,
                "running": self.running, "failed": self.failed, "version": self.version}


class Payment(Aggregate):
    """Idempotent variant: one stream per idempotency key, holding the first result."""

    @staticmethod
    def create_id(key: str) -> UUID:
        return uuid5(NAMESPACE_URL, f"continuity-payment:{key}")

    @event("Accepted")
    def __init__(self, key: str, request_hash: str, result: dict, task_id: str, seq: int) -> None:
        self.key, self.request_hash, self.result = key, request_hash, result
        self.task_id, self.seq = task_id, seq


def _snapshots_in_kwargs(kwargs: dict[str, Any]) -> tuple[Any, list[Any]] | None:
    """(snapshot recorder, stored snapshots) that Events.save passes down to the recorder."""
    return kwargs.pop("due_snapshots", None)


class _SQLiteEventsRecorder(SQLiteApplicationRecorder):
    """The library's SQLite application recorder; its events' transaction (cursor c)
    inserts the due snapshots too, through the snapshot store's own recorder."""

    def _insert_events(self, c: Any, stored_events: Any, **kwargs: Any) -> Any:
        due = _snapshots_in_kwargs(kwargs)
        ids = super()._insert_events(c, stored_events, **kwargs)
        if due:
            snapshot_recorder, stored = due
            snapshot_recorder._insert_events(c, stored)
        return ids


class _DurablePool(SQLiteConnectionPool):
    """The library sets journal_mode=WAL but leaves `synchronous` at SQLite's
    compiled default; we set FULL on every connection it opens, as store.py does."""

    def _create_connection(self) -> SQLiteConnection:
        conn = super()._create_connection()
        with conn.cursor() as cur:
            cur.execute("PRAGMA synchronous = FULL")
        return conn


class DurableSQLiteFactory(SQLiteFactory):
    """`PERSISTENCE_MODULE` points here: the library's SQLite factory, durable pool."""

    application_recorder_class = _SQLiteEventsRecorder

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        old = self.datastore.pool
        self.datastore.pool = _DurablePool(db_name=old.db_name, lock_timeout=old.lock_timeout)
        old.close()


#: The PostgreSQL recorders' methods the library retries by itself: 10 tries, 0.2 s apart,
#: each waiting up to POSTGRES_CONNECT_TIMEOUT for a pool connection. With the server down
#: that is about half a minute before `run` hears of the outage: longer than a short
#: store_outage_s, and not counted in it. Our recorders make ONE try; `run` (outage.py)
#: does the retrying, with fresh connections, within store_outage_s, and logs it.
RETRIED_BY_THE_LIBRARY = ("insert_events", "select_events", "select_notifications", "max_notification_id")


def _single_try(recorder: type) -> type:
    """A subclass of the library's ``recorder`` whose retried methods are the undecorated
    originals (the library's ``retry`` keeps them as ``__wrapped__``, functools.wraps).
    Fails at once if the pinned library no longer decorates them so (the seam test)."""
    plain: dict[str, Any] = {}
    for name in RETRIED_BY_THE_LIBRARY:
        method = getattr(recorder, name, None)
        if method is None:
            continue
        original = getattr(method, "__wrapped__", None)
        if original is None:
            raise RuntimeError(f"eventsourcing {recorder.__name__}.{name} is no longer wrapped by its retry: "
                               f"event_sourcing/event_store.py is written against eventsourcing=={EVENTSOURCING_VERSION}")
        plain[name] = original
    return type(recorder.__name__, (recorder,), plain)


def _postgres_factory() -> type:
    """The PostgreSQL factory, built on first use: psycopg and psycopg_pool are
    only imported (and only need to be installed) when DATABASE_URL is PostgreSQL."""
    # (`global`: one class per process, so the library's topic cache stays consistent.)
    global _PG_FACTORY
    if _PG_FACTORY is not None:
        return _PG_FACTORY
    from eventsourcing.postgres import PostgresAggregateRecorder, PostgresApplicationRecorder, PostgresFactory
    from psycopg.sql import SQL

    class PostgresEventsRecorder(_single_try(PostgresApplicationRecorder)):  # type: ignore[misc]
        """The library's PostgreSQL application recorder. Its ``_insert_events`` hook runs
        in the events' transaction (the library's process recorder uses it for tracking
        records); we insert the due snapshots there, on the same cursor."""

        def _insert_events(self, curs: Any, stored_events: Any, **kwargs: Any) -> None:
            due = _snapshots_in_kwargs(kwargs)
            super()._insert_events(curs, stored_events, **kwargs)
            if due:
                recorder, stored = due
                rows = [recorder.construct_pg_stored_event(s.originator_id, s.originator_version, s.topic, s.state)
                        for s in stored]
                # ON CONFLICT DO NOTHING: the events' insert that follows is what detects a
                # concurrent writer (a snapshot of version v exists only with the events up to
                # v, which then conflict too). A failing statement this early in the library's
                # pipeline would surface as a "pipeline aborted" OperationalError instead of
                # the conflict it is.
                curs.execute(recorder.insert_events_statement + SQL(" ON CONFLICT DO NOTHING"), (rows,))

    class DurablePostgresFactory(PostgresFactory):
        """`PERSISTENCE_MODULE` points here for PostgreSQL: the library's factory with
        (1) table names without the application's prefix (stored_events, as on SQLite),
        (2) the whole DATABASE_URL as the pool's connection string, so its TLS and
        other libpq options (sslmode, sslrootcert, ...) reach every connection: the
        library's own settings only carry dbname/host/port/user/password."""

        application_recorder_class = PostgresEventsRecorder
        aggregate_recorder_class = _single_try(PostgresAggregateRecorder)  # the snapshots' recorder

        def __init__(self, env: Any) -> None:
            super().__init__(Environment("", dict(env)))  # "" -> the library's "stored_" prefix
            pool = self.datastore.pool
            pool.conninfo = env.get("DATABASE_URL") or ""
            # An empty value would override the URL's (or libpq's PG* defaults): drop it.
            pool.kwargs = {k: v for k, v in (pool.kwargs or {}).items() if v not in ("", None)}

    _PG_FACTORY = DurablePostgresFactory
    return _PG_FACTORY


_PG_FACTORY: type | None = None


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
        return {**common, "PERSISTENCE_MODULE": f"{__name__}:DurableSQLiteFactory",
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
        "PERSISTENCE_MODULE": f"{__name__}:DurablePostgresFactory",
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


def __getattr__(name: str) -> Any:
    """PERSISTENCE_MODULE names ``<this module>:DurablePostgresFactory``; the library
    resolves it with getattr, which lands here, so the class is only built (and psycopg
    only imported) on PostgreSQL."""
    if name == "DurablePostgresFactory":
        return _postgres_factory()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
