"""The store-outage fault: how the drill keeps the state store away from its workers.

SQLite: a connection of the drill's holds the write lock; every worker's commit waits past
busy_timeout, then fails, until the drill lets go.

PostgreSQL, where the drill does not own the server: it cannot stop a server it did not
start, and it does not have to: to a worker an outage is its connection cut and every try
to work again failing until the store is back. So the drill cuts every worker's connection
(``pg_terminate_backend``: what a failover, a restart or a network cut does to a session)
and keeps each table of the project locked on a connection of its own, cutting again every
SWEEP_S: a worker that reconnects between two sweeps blocks on its first table instead of
slipping work through, and is cut there. When the outage ends the locks go with a rollback;
nothing the drill did outlives its connection (a drill killed mid-outage leaves no setting
behind). The workers are told apart by their connections' application name (workers.py sets
``PGAPPNAME``); a DATABASE_URL that names its own application name hides them, and the
outage then only blocks them until it ends.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ..runtime.store import is_postgresql

#: The application name of the drill's workers' connections (PGAPPNAME, workers.py).
WORKER_APP = "drill-worker"
#: How often the workers' connections are cut again while the outage lasts.
SWEEP_S = 0.02
#: How long the drill waits for a table's lock (a worker mid-transaction) before it tries later.
LOCK_WAIT_MS = 2000
CUT = ("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
       "WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = %s")


class Spells:
    """When the drill held the store away, for a thread beside its loop (bad_input.py) that must
    tell a refusal for what it sent from one for the store: a refusal during a spell proves nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count, self.held = 0, False

    def begin(self) -> None:
        with self._lock:
            self.count, self.held = self.count + 1, True

    def end(self) -> None:
        with self._lock:
            self.held = False

    def overlapped(self, count: int) -> bool:
        """A spell was held at some moment since the count read as ``count``."""
        with self._lock:
            return self.held or self.count != count


class _Held:
    """An outage the drill holds on ``conn``; its release ends the spell ``take`` began."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.spells: Spells | None = None  # told when the outage ends (take)

    def release(self) -> None:
        try:
            self.conn.execute("ROLLBACK")  # the locks go; the workers' next tries get through
        finally:
            self.conn.close()
            if self.spells is not None:
                self.spells.end()


class PgOutage(_Held):
    def __init__(self, conn: Any) -> None:
        super().__init__(conn)
        self.swept = 0.0
        self.cuts = 0

    def cut(self) -> None:
        # pg_stat_activity is read once per transaction, and the locks hold one open: without a fresh
        # reading a sweep would never see a connection opened since (it would wait on its lock, uncut).
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        self.cuts += int(self.conn.execute(CUT, (WORKER_APP,)).fetchone()[0] or 0)
        self.swept = time.monotonic()

    def sweep(self) -> None:
        if time.monotonic() - self.swept >= SWEEP_S:
            self.cut()


def _take_postgresql(url: str) -> PgOutage | None:
    """The workers cut off, every table locked."""
    import psycopg
    from psycopg import sql

    try:
        conn = psycopg.connect(url, autocommit=True, application_name="drill-outage", connect_timeout=10)
    except psycopg.Error:
        return None
    outage = PgOutage(conn)
    try:
        outage.cut()  # their transactions end with their sessions: nothing of theirs holds a lock now
        conn.execute("BEGIN")
        conn.execute(f"SET LOCAL lock_timeout = {LOCK_WAIT_MS}")
        tables = [row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        for table in tables:
            conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(table)))
        outage.cut()  # and those that came back meanwhile
    except psycopg.Error:
        outage.release()
        return None
    return outage


class SqliteLock(_Held):
    """SQLite: the write lock, held by a connection of the drill's."""

    def sweep(self) -> None:
        """Nothing to renew: the lock holds until released."""


def take(url: str, path: Path, spells: Spells) -> SqliteLock | PgOutage | None:
    """The outage begun (PostgreSQL when ``url`` names it, else the SQLite file at ``path``), a spell
    of ``spells`` until it is released. None: not now (a lock the drill could not get in time, no
    store yet): the drill tries again later."""
    spells.begin()  # before the lock: a refusal met while it is being taken counts too
    holder = _take_postgresql(url) if is_postgresql(url) else _take_sqlite(path)
    if holder is None:
        spells.end()
    else:
        holder.spells = spells
    return holder


def _take_sqlite(path: Path) -> SqliteLock | None:
    if not path.exists():
        return None
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error:
        conn.close()
        return None
    return SqliteLock(conn)
