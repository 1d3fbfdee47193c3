"""Event sourcing, the library's persistence made durable: the SQLite and PostgreSQL factories
``PERSISTENCE_MODULE`` names, whose recorders write the due snapshots in the events' own
transaction, on SQLite with ``synchronous = FULL``, on PostgreSQL making ONE try (``run``
rides an outage out, outage.py).
"""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteConnection, SQLiteConnectionPool, SQLiteFactory
from eventsourcing.utils import Environment

#: The eventsourcing release this module is written against. The snapshot-in-the-same-
#: transaction hook below overrides the library's ``_insert_events`` (not a public
#: API), and on PostgreSQL its ``_insert_stored_events`` (the same insert, in binary), so the dependency is pinned to exactly this version and a generated test
#: (test_event_sourcing.py, "seam") fails loudly when the installed library differs.
EVENTSOURCING_VERSION = "9.5.6"


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
                               f"event_sourcing/recorders.py is written against eventsourcing=={EVENTSOURCING_VERSION}")
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

    class PostgresEventsRecorder(_single_try(PostgresApplicationRecorder)):  # type: ignore[misc]
        """The library's PostgreSQL application recorder. Its ``_insert_events`` hook runs
        in the events' transaction (the library's process recorder uses it for tracking
        records); we insert the due snapshots there, on the same cursor."""

        def _insert_events(self, curs: Any, stored_events: Any, **kwargs: Any) -> None:
            due = _snapshots_in_kwargs(kwargs)
            super()._insert_events(curs, stored_events, **kwargs)
            if due:
                recorder, stored = due
                # ON CONFLICT DO NOTHING: the events' insert that follows is what detects a
                # concurrent writer (a snapshot of version v exists only with the events up to
                # v, which then conflict too). A failing statement this early in the library's
                # pipeline would surface as a "pipeline aborted" OperationalError instead of
                # the conflict it is.
                curs.execute(_binary_insert(recorder, " ON CONFLICT DO NOTHING"), _pg_columns(stored))

        def _insert_stored_events(self, curs: Any, stored_events: Any, **kwargs: Any) -> None:
            """The library's insert (table lock, NOTIFY, one INSERT ... unnest of the rows),
            with the rows sent in binary, a column per array (``_binary_insert``): psycopg's
            text form of a composite array escapes every byte of every event's state with
            regular expressions, and the server then parses that text back; that was the
            largest part of an append's time that was neither the library's event objects
            nor the server's work (profiled, 2026-12-02)."""
            self._lock_table(curs)
            self._notify_channel(curs)
            curs.execute(_binary_insert(self), _pg_columns(stored_events))

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


#: How the pinned library's INSERT reads its rows: one array of its composite type.
_COMPOSITE_UNNEST = re.compile(r"unnest\(%s::[^()]+\[\]\)")
#: Ours: one array per column, in the composite's order and types (the library's table).
_COLUMN_UNNEST = ("unnest(%b::uuid[], %b::bigint[], %b::text[], %b::bytea[]) "
                  "AS rows(originator_id, originator_version, topic, state)")


def _binary_insert(recorder: Any, suffix: str = "") -> Any:
    """The recorder's INSERT ... SELECT ... FROM unnest(...) statement (+ ``suffix``), reading
    its rows from four arrays sent in binary (%b) instead of one array of the library's
    composite type: the same SQL otherwise (table, columns, RETURNING). psycopg dumps a
    composite field by field in Python; an array of uuids, of integers, of text or of bytes
    it dumps in one go (measured: 2-4 us less per event). Made once per recorder and suffix."""
    from psycopg.sql import SQL

    made = recorder.__dict__.setdefault("_binary_inserts", {})
    if suffix not in made:
        text = recorder.insert_events_statement.as_string(None)
        if len(_COMPOSITE_UNNEST.findall(text)) != 1 or text.count("%") != 1:
            raise RuntimeError(f"unexpected insert statement of eventsourcing=={EVENTSOURCING_VERSION}: {text}")
        made[suffix] = SQL(_COMPOSITE_UNNEST.sub(_COLUMN_UNNEST, text) + suffix)
    return made[suffix]


def _pg_columns(stored: Any) -> tuple[list[UUID], list[int], list[str], list[bytes]]:
    """Stored events (or snapshots) as the four column arrays of ``_binary_insert``."""
    ids: list[UUID] = []
    versions: list[int] = []
    topics: list[str] = []
    states: list[bytes] = []
    for s in stored:
        ids.append(s.originator_id if isinstance(s.originator_id, UUID) else UUID(s.originator_id))
        versions.append(s.originator_version)
        topics.append(s.topic)
        states.append(s.state)
    return ids, versions, topics, states


def __getattr__(name: str) -> Any:
    """PERSISTENCE_MODULE names ``<this module>:DurablePostgresFactory``; the library
    resolves it with getattr, which lands here, so the class is only built (and psycopg
    only imported) on PostgreSQL."""
    if name == "DurablePostgresFactory":
        return _postgres_factory()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
