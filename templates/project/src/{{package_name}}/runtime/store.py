"""The state database: SQLite by default, PostgreSQL when DATABASE_URL says so.

SQLite durability settings (stated in the README):

* ``journal_mode=WAL``: readers (``status``, the drill) never block the writer;
* ``synchronous=FULL``: a commit is fsynced before it returns, so a checkpoint reported
  committed survives a power cut, not only a process kill;
* ``busy_timeout``: a writer waits for the lock instead of failing at once: several worker
  processes can share one file.

These are not taken on trust: :meth:`Store.durability` reads back what the connection really
runs with (SQLite's pragmas; PostgreSQL's ``fsync`` and ``synchronous_commit``), the generated
tests assert on it, and the drill observes it in every worker (durability.py).

SQL is written once, with ``?`` placeholders and portable types (TEXT, INTEGER, DOUBLE
PRECISION, ``ON CONFLICT DO NOTHING``); for PostgreSQL the placeholders become ``%s``. Never
put a literal ``?`` inside a statement.

Errors are sorted in one place (:meth:`Store._user_error`, :func:`connect`): a store that
cannot be reached *for now* (PostgreSQL restarting, shutting down or refusing connections, a
connection cut; SQLite still locked after ``busy_timeout`` or answering "disk I/O error") raises
:class:`StoreUnavailable`, which ``run`` rides out (outage.py); a store that is wrong (corrupt,
unreadable, too new, a bad URL or password) raises a plain :class:`StoreError`, never retried.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import faults, metrics, probe_hook
from .errors import StoreError, StoreUnavailable, redact
from .pg_errors import postgresql_unavailable
from ..settings import PACKAGE, Settings

STATE_DB = "state.db"
#: PostgreSQL: seconds a connection attempt may take (when the URL does not say).
CONNECT_TIMEOUT_S = 10

_commits = 0
_after_next_commit: Callable[[], None] | None = None


def commits() -> int:
    """How many commits this process has made: outage.py tells a new outage from a
    continuing one by whether the store took a commit in between."""
    return _commits


def after_next_commit(callback: Callable[[], None]) -> None:
    """Call ``callback`` once, at the next successful commit (outage.py: "reachable again");
    it replaces one not called yet."""
    global _after_next_commit
    _after_next_commit = callback


def note_commit(seconds: float | None = None) -> None:
    """Count a successful commit (Store.transaction does, with its duration; a strategy that
    commits through another library, event sourcing, calls it after its own commits)."""
    global _commits, _after_next_commit
    _commits += 1
    metrics.checkpoint(seconds)
    if _after_next_commit is not None:
        callback, _after_next_commit = _after_next_commit, None
        callback()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def check_data_dir(data_dir: Path, *, create: bool) -> Path:
    """The data directory must be a directory; ``create`` makes it if missing."""
    if data_dir.exists() and not data_dir.is_dir():
        raise StoreError(f"--data-dir {data_dir} is not a directory")
    if not data_dir.exists():
        if not create:
            raise StoreError(f"--data-dir {data_dir} does not exist; run `submit-demo --data-dir {data_dir}` first")
        try:
            data_dir.mkdir(parents=True, exist_ok=True)  # exist_ok: another process made it just now
        except OSError as exc:
            raise StoreError(f"cannot create --data-dir {data_dir}: {exc.strerror}") from None
    return data_dir


def is_postgresql(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def describe(data_dir: Path, settings: Settings, *, files: bool = False) -> str:
    """Which store holds the state, for ``status`` and messages: the PostgreSQL URL
    without its password, else the SQLite file (``files``: the strategy's own files)."""
    if files:
        return f"files in {data_dir}"
    if is_postgresql(settings.database_url):
        return f"postgresql {redact(settings.database_url)}"
    return f"sqlite {data_dir / STATE_DB}"


def workload_held(store: Store | None, data_dir: Path) -> str:
    """Why the demo workload cannot be submitted: the message names where the existing
    workload really lives (the database with PostgreSQL, not the data directory)."""
    if store is not None and store.dialect == "postgresql":
        return (f"the state database {store.where} already holds a workload; empty it with "
                f"`python -m {PACKAGE} reset`, or point DATABASE_URL at another database")
    return (f"{data_dir} already holds a workload; use a new --data-dir "
            f"(or empty it with `python -m {PACKAGE} reset --data-dir {data_dir}`)")


class Store:
    """A thin wrapper over one DB-API connection: ``?`` SQL, dict rows, explicit transactions."""

    def __init__(self, conn: Any, dialect: str, where: str) -> None:
        # ``where`` is printed in messages and reports: never with the URL's password.
        self.conn, self.dialect, self.where = conn, dialect, redact(where)

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgresql" else sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        # A plain try (not a context manager): this runs for every statement, ~20 per task
        # of a queue consumer, and a generator-based ``with`` costs more than the statement.
        try:
            return self.conn.execute(self._sql(sql), tuple(params))
        except Exception as exc:
            self._user_error(exc)
            raise

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement, many rows: one round of parsing instead of one per row."""
        try:
            # sqlite3 connections have executemany; psycopg has it on cursors.
            target = self.conn if self.dialect == "sqlite" else self.conn.cursor()
            target.executemany(self._sql(sql), [tuple(r) for r in rows])
        except Exception as exc:
            self._user_error(exc)
            raise

    def _user_error(self, exc: Exception) -> None:
        """Turn what the user can fix (a corrupt file, a lost server) into StoreError, and
        what passes by itself (a lock held too long, a server restart) into StoreUnavailable;
        return (the caller re-raises ``exc`` itself) for any other error."""
        if isinstance(exc, sqlite3.OperationalError):
            if "locked" in str(exc) or "busy" in str(exc):
                raise StoreUnavailable(f"state database {self.where} is locked by another process "
                                       f"(waited busy_timeout): {exc}") from None
            # SQLITE_IOERR: the disk or the file system failed a read, a write or the WAL index
            # (a network volume reattaching, a file system just remounted after a power cut).
            # Ridden out like a lock: if it lasts, the worker exits 4 naming the database.
            if "disk I/O error" in str(exc):
                raise StoreUnavailable(f"state database {self.where}: the disk or file system answered an "
                                       f"I/O error ({exc})") from None
            return
        if isinstance(exc, sqlite3.DatabaseError):
            if "not a database" in str(exc) or "malformed" in str(exc):
                raise StoreError(f"state database {self.where} is unreadable: {exc}") from None
            return
        if self.dialect != "postgresql" or isinstance(exc, StoreError):
            return
        # PostgreSQL: a cut connection or a server restarting passes; the rest is the user's to fix.
        if postgresql_unavailable(exc):
            raise StoreUnavailable(f"state store {self.where} unreachable: {_one_line(exc)}") from None
        if type(exc).__name__ in ("OperationalError", "InterfaceError"):
            raise StoreError(f"state database {self.where}: {exc}") from None

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cur = self.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        rows = self.all(sql, params)
        return rows[0] if rows else None

    @contextmanager
    def transaction(self) -> Iterator[Store]:
        """One atomic unit. SQLite: BEGIN IMMEDIATE takes the write lock up front, so two
        workers never both read-then-write the same row (no lock upgrade deadlock)."""
        began = time.perf_counter()
        self.execute("BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN")
        try:
            yield self
        except BaseException as exc:
            if isinstance(exc, StoreError):
                metrics.checkpoint_failed(exc)  # runtime/metrics.py: two in a row is an alert
            try:
                self.conn.execute("ROLLBACK")  # explicit: the connection is in autocommit mode
            except Exception:
                # The connection is gone (a server restart): the server rolled the transaction
                # back itself. Or it is wedged: cut in the middle of an ``executemany``, psycopg
                # refuses every statement ("cannot exit pipeline mode while busy") and its flags
                # do not say broken. The server rolls back when the session ends, so that
                # connection is closed; either way the error that got us here is the one to report.
                if not (self._lost() or isinstance(exc, StoreUnavailable)):
                    raise
                self._close_quietly()
            raise
        else:
            if probe_hook.observer is not None and self.dialect == "postgresql":
                probe_hook.observer.committing(self)  # the drill reads what this COMMIT runs with
            faults.point("commit")  # a crash point of the drill's sweep (faults.py); nothing when not drilled
            try:
                self.execute("COMMIT")
            except StoreError as exc:
                metrics.checkpoint_failed(exc)
                raise
            note_commit(time.perf_counter() - began)

    def _lost(self) -> bool:
        """True when the PostgreSQL connection is closed or broken (psycopg's flags)."""
        return self.dialect == "postgresql" and bool(getattr(self.conn, "closed", False)
                                                     or getattr(self.conn, "broken", False))

    def durability(self) -> dict[str, str]:
        """What this connection really commits with, read back (not what we asked for)."""
        if self.dialect == "sqlite":
            return sqlite_settings(self.conn)
        # The server's settings, as this session sees them (SHOW answers one row, one column).
        return {name: str((self.one(f"SHOW {name}") or {}).get(name)) for name in ("fsync", "synchronous_commit")}

    def close(self) -> None:
        self.conn.close()

    def _close_quietly(self) -> None:
        try:
            self.conn.close()
        except Exception:  # already closed or broken: nothing left to release
            pass


def connect(data_dir: Path, settings: Settings, *, create: bool = False) -> Store:
    """Open the state store (without touching its schema)."""
    url = settings.database_url
    # The data directory holds external.db (and logs) with PostgreSQL too.
    check_data_dir(data_dir, create=create)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg  # only needed for PostgreSQL
        except ImportError:
            raise StoreError("DATABASE_URL is PostgreSQL but psycopg is not installed: pip install 'psycopg[binary]'") from None
        # A server that does not answer at all (its host down, a network partition) would hold
        # a connect for the system's TCP timeout, minutes past any store_outage_s: libpq's
        # connect_timeout bounds it, unless the URL or PGCONNECT_TIMEOUT already does.
        bound: dict[str, Any] = ({} if "connect_timeout" in url or os.environ.get("PGCONNECT_TIMEOUT")
                                 else {"connect_timeout": CONNECT_TIMEOUT_S})
        try:
            conn = psycopg.connect(url, autocommit=True, **bound)
        except psycopg.Error as exc:
            # The URL goes to libpq unchanged (sslmode=verify-full, sslrootcert=... included);
            # the message shows it without its password, the driver's text on one line.
            error = StoreUnavailable if postgresql_unavailable(exc, connecting=True) else StoreError
            raise error(f"cannot connect to {redact(url)}: {_one_line(exc)}") from None
        store = Store(conn, "postgresql", url)
        try:
            _tell_probe(store)
        except BaseException:
            store.close()
            raise
        return store
    if url and not url.startswith("sqlite"):
        raise StoreError(f"DATABASE_URL={url!r}: only postgresql://... is supported (unset it for SQLite)")
    path = data_dir / STATE_DB
    if not path.exists() and not create:
        raise StoreError(f"no state database at {path}; run `submit-demo --data-dir {data_dir}` first")
    try:
        # isolation_level=None: we issue BEGIN/COMMIT ourselves (Store.transaction).
        conn = sqlite3.connect(path, isolation_level=None, timeout=settings.busy_timeout_ms / 1000)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path}: {exc}") from None
    store = Store(conn, "sqlite", str(path))
    try:
        store.execute(f"PRAGMA busy_timeout = {int(settings.busy_timeout_ms)}")
        store.execute("PRAGMA journal_mode = WAL")
        store.execute("PRAGMA synchronous = FULL")
    except BaseException:
        store.close()  # locked: a worker riding the lock out must not leak a connection per try
        raise
    return store


def _tell_probe(store: Store) -> None:
    """In a drilled worker, report the server's settings: a PostgreSQL connection
    cannot be observed from the client side the way SQLite's can (probe_hook.py)."""
    if probe_hook.observer is not None:
        probe_hook.observer.saw_postgresql(store.durability())


#: PRAGMA synchronous answers: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA.
SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def sqlite_settings(conn: Any) -> dict[str, str]:
    """What a SQLite connection commits with, read back from SQLite itself."""
    level = conn.execute("PRAGMA synchronous").fetchone()[0]
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    return {"synchronous": SYNCHRONOUS_NAMES.get(int(level), str(level)), "journal_mode": str(mode).lower()}


def apply_schema(store: Store, schema_sql: str, version: int, migrations: Mapping[int, str]) -> int:
    """Create the schema, or migrate it to ``version``; refuse a newer one.

    ``schema.sql`` creates the current schema and records its version in
    ``schema_version``. ``migrations[v]`` is the SQL that turns version ``v - 1``
    into version ``v``; each runs in its own transaction with the version bump.
    """
    with store.transaction():
        _lock_schema(store)
        exists = _has_table(store, "schema_version")
        if not exists:
            for statement in split_sql(schema_sql, store.dialect):
                store.execute(statement)
            return version
        row = store.one("SELECT version FROM schema_version")
    current = int(row["version"]) if row else 0
    if current > version:
        raise StoreError(f"state database {store.where} has schema version {current}, newer than this "
                         f"program's {version}; upgrade the program")
    while current < version:
        step = migrations.get(current + 1)
        if step is None:
            raise StoreError(f"no migration from schema version {current} to {current + 1}")
        with store.transaction():
            _lock_schema(store)
            row = store.one("SELECT version FROM schema_version")
            if row and int(row["version"]) > current:  # another worker migrated meanwhile
                current = int(row["version"])
                continue
            for statement in split_sql(step, store.dialect):
                store.execute(statement)
            store.execute("UPDATE schema_version SET version = ?", (current + 1,))
        current += 1
    return current


def create_table(store: Store, sql: str) -> None:
    """A table outside the versioned schema (a call ledger, a log), created if missing: under the
    schema lock on PostgreSQL; on SQLite the statement alone (no commit for the drill's kills)."""
    if store.dialect == "sqlite":
        store.execute(sql)
        return
    with store.transaction():
        _lock_schema(store)
        store.execute(sql)


#: Any constant: the key of the advisory lock that lets one worker at a time create or migrate the schema.
SCHEMA_LOCK_KEY = 7_212_024


def _lock_schema(store: Store) -> None:
    """PostgreSQL: workers starting at once would each create a table (or migrate the schema),
    all but one failing on a unique violation of the catalog (CREATE TABLE races). An advisory
    lock held to the end of the transaction lets one do it while the others wait, then see it
    done. SQLite needs nothing: BEGIN IMMEDIATE already lets one writer in at a time."""
    if store.dialect == "postgresql":
        store.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK_KEY,))


def _has_table(store: Store, name: str) -> bool:
    if store.dialect == "sqlite":
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    else:
        # This connection's schema only: a table of the same name elsewhere is not ours.
        sql = "SELECT 1 FROM information_schema.tables WHERE table_name = ? AND table_schema = current_schema()"
    return store.one(sql, (name,)) is not None


#: The one SQLite-only clause a schema file may use: a table kept as one b-tree ordered by its
#: primary key (no rowid, no separate index of the key). PostgreSQL has no such clause.
SQLITE_ONLY = re.compile(r"\)\s*WITHOUT\s+ROWID\s*$", re.IGNORECASE)


def split_sql(script: str, dialect: str = "sqlite") -> list[str]:
    """Statements of a schema file: ``--`` comments dropped, split on ``;``; on PostgreSQL
    without SQLite's ``WITHOUT ROWID`` (the same table otherwise)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    statements = [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
    if dialect == "postgresql":
        statements = [SQLITE_ONLY.sub(")", s) for s in statements]
    return statements
