"""Read-only access to a generated project's state: where it is, and opening it without a trace.

SQLite goes through sqlite-utils on a connection opened read-only:

* ``mode=ro&readonly_shm=1`` when the database has its ``-wal`` and ``-shm`` files (a
  worker ran, or is running): SQLite reads the WAL without writing its shared-memory
  index, so not even the ``-shm`` file's contents or mtime change;
* ``immutable=1`` when there is no ``-wal`` file (every commit is in the main file):
  a plain ``mode=ro`` would create ``-wal``/``-shm`` files for a WAL database.

PostgreSQL (``DATABASE_URL=postgresql://…``, as the generated project understands it)
goes through psycopg in a READ ONLY transaction; the password is never printed.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from advisor.errors import AdvisorError
from advisor.redact import redact
from advisor.safe_read import load_yaml

STATE_DB = "state.db"
EXTERNAL_DB = "external.db"
ANSWERS_FILE = ".copier-answers.yml"
FILE_INPUT = "input.json"
FILE_CHECKPOINTS = ("checkpoint.json", "checkpoint.json.1")
#: Where the project moves an unreadable newest generation after falling back from it.
FILE_SET_ASIDE = "checkpoint.json.damaged"
DRILL_INPUT = "drill-input.json"


class InspectError(AdvisorError):
    """The directory is not a generated project's (or its data dir), or its state cannot be read."""


def one_line(exc: BaseException) -> str:
    """A driver's (multi-line) message on one line, any password redacted."""
    return " ".join(redact(str(exc)).split())


class Source(Protocol):
    """What the strategy readers need from a state store (SQLite or PostgreSQL)."""

    kind: str
    location: str

    def tables(self) -> list[str]: ...

    def count(self, table: str) -> int: ...

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


# ----------------------------------------------------------------------- SQLite
def open_sqlite_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection that writes nothing, creates nothing (see the module doc)."""
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    mode = "mode=ro&readonly_shm=1" if wal.exists() and shm.exists() else "immutable=1"
    try:
        conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?{mode}", uri=True, timeout=2.0)
        conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error as exc:
        raise InspectError(f"{path}: cannot open the database read-only ({exc})") from None
    return conn


class SQLiteSource:
    """A state database through sqlite-utils: table introspection, counts, ``rows_where``."""

    kind = "sqlite"

    def __init__(self, path: Path) -> None:
        import sqlite_utils

        self.location = str(path)
        self.conn = open_sqlite_readonly(path)
        self.db = sqlite_utils.Database(self.conn, recursive_triggers=False, execute_plugins=False)
        self._tables = self._read(self.db.table_names)

    def _read(self, read: Any, *args: Any, **kwargs: Any) -> Any:
        """Retry a read that meets a writer mid-checkpoint; a non-database is a clear error."""
        for attempt in range(20):
            try:
                return read(*args, **kwargs)
            except sqlite3.OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or attempt == 19:
                    raise InspectError(f"{self.location}: cannot read ({exc})") from None
                time.sleep(0.05)
            except sqlite3.DatabaseError as exc:
                raise InspectError(f"{self.location} is not a readable SQLite database ({exc}); "
                                   "is it a generated project's state.db?") from None
        raise AssertionError("unreachable")

    def tables(self) -> list[str]:
        return list(self._tables)

    def count(self, table: str) -> int:
        return int(self._read(lambda: self.db[table].count))

    def rows_where(self, table: str, where: str | None = None, params: Sequence[Any] = (),
                   order_by: str | None = None, limit: int | None = None, select: str = "*") -> list[dict[str, Any]]:
        return list(self._read(lambda: list(self.db[table].rows_where(
            where, list(params), order_by=order_by, limit=limit, select=select))))

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return list(self._read(lambda: list(self.db.query(sql, list(params)))))

    def close(self) -> None:
        self.conn.close()


# ------------------------------------------------------------------- PostgreSQL
class PostgresSource:
    """``DATABASE_URL=postgresql://…``: one READ ONLY transaction, rolled back at the end."""

    kind = "postgresql"

    def __init__(self, url: str) -> None:
        self.location = redact(url)
        try:
            import psycopg
        except ImportError:
            raise InspectError("DATABASE_URL is PostgreSQL but psycopg is not installed: "
                               "pip install 'psycopg[binary]'") from None
        try:
            self.conn = psycopg.connect(url, autocommit=False, connect_timeout=5)
            self.conn.read_only = True
        except psycopg.Error as exc:
            raise InspectError(f"cannot connect to {self.location}: {one_line(exc)}") from None
        self._tables = [r["table_name"] for r in self.rows(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")]

    def tables(self) -> list[str]:
        return list(self._tables)

    def count(self, table: str) -> int:
        if table not in self._tables:
            raise InspectError(f"{self.location}: no table {table}")
        return int(self.rows(f'SELECT COUNT(*) AS n FROM "{table}"')[0]["n"])

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        import psycopg

        try:
            cur = self.conn.execute(sql.replace("?", "%s"), tuple(params))
            names = [d.name for d in cur.description or ()]
            return [dict(zip(names, row)) for row in cur.fetchall()]
        except psycopg.Error as exc:
            raise InspectError(f"{self.location}: {one_line(exc)}") from None

    def close(self) -> None:
        try:
            self.conn.rollback()
        finally:
            self.conn.close()


# ----------------------------------------------------------------- where it is
@dataclass
class Location:
    """What DIR turned out to be."""

    data_dir: Path
    project_dir: Path | None = None
    answers: dict[str, Any] = field(default_factory=dict)
    note: str | None = None  # e.g. "the newest drill directory"


def read_answers(project: Path) -> dict[str, Any]:
    # Bounded like every file the advisor reads (size, nesting, no YAML aliases).
    data = load_yaml(project / ANSWERS_FILE, "template answers file") or {}
    if not isinstance(data, dict) or not isinstance(data.get("strategy"), str):
        raise InspectError(f"{project / ANSWERS_FILE} names no strategy; is {project} a generated project?")
    return data


def has_state(d: Path) -> bool:
    return (d / STATE_DB).is_file() or (d / FILE_INPUT).is_file() or any((d / n).is_file() for n in FILE_CHECKPOINTS)


def drill_dirs(d: Path) -> list[Path]:
    """A project's drill data directories (data/drill-<time>-…), oldest first."""
    return sorted(p for p in d.glob("drill-*") if p.is_dir()) if d.is_dir() else []


def locate(directory: Path, data_dir: Path | None = None, *, postgres: bool = False) -> Location:
    """DIR is a generated project (its .copier-answers.yml) or a data directory itself."""
    if not directory.exists():
        raise InspectError(f"{directory} does not exist")
    if not directory.is_dir():
        raise InspectError(f"{directory} is not a directory; give a generated project or its data directory")
    if (directory / ANSWERS_FILE).is_file():
        answers = read_answers(directory)
        if data_dir is None:
            data_dir = directory / "data"
        elif not data_dir.is_absolute() and not data_dir.exists():
            data_dir = directory / data_dir  # the project resolves --data-dir from its own directory
        location = Location(data_dir=data_dir, project_dir=directory, answers=answers)
    else:
        location = Location(data_dir=data_dir or directory)
    d = location.data_dir
    if not d.is_dir():
        if location.project_dir is not None:
            package = location.answers.get("package_name", "<package>")
            raise InspectError(f"{d} does not exist: nothing has run in {directory} yet; queue work first "
                               f"(cd {directory} && PYTHONPATH=src python -m {package} submit-demo --records 2000)")
        raise InspectError(f"--data-dir {d} does not exist")
    if has_state(d) or postgres:
        return location
    drills = [p for p in drill_dirs(d) if has_state(p)]
    if drills:
        location.data_dir, location.note = drills[-1], "the newest drill's data directory"
        return location
    if location.project_dir is None:
        raise InspectError(f"{d} is neither a generated project (no {ANSWERS_FILE}) nor its data directory "
                           f"(no {STATE_DB}, {FILE_INPUT} or checkpoint.json); give the project's directory "
                           "or --data-dir")
    raise InspectError(f"{d} holds no state yet; queue work first (cd {directory} && PYTHONPATH=src python -m "
                       f"{location.answers.get('package_name', '<package>')} submit-demo --records 2000)")


def iter_files(d: Path) -> Iterator[tuple[str, int, int]]:
    """(name, size, mtime_ns) of every file in ``d``: what 'read-only' promises to leave alone."""
    for p in sorted(d.iterdir()):
        if p.is_file():
            st = p.stat()
            yield p.name, st.st_size, st.st_mtime_ns
