"""What a store holds, read without changing it: taken just before a power cut and just after, compared.

Between the two readings no process runs: the worker is dead (SIGKILL), the next one not yet
started. A kill does not lose the page cache, so what a new reader sees before the cut is what the
store had *committed* (SQLite shows a new connection committed transactions only). Whatever of it is
gone after the cut was committed and not durable: ``committed_lost``. A store that no longer opens,
or fails SQLite's ``PRAGMA integrity_check``, is ``store_corrupt``.

SQLite files are read through read-only connections (``mode=ro``): a read-write connection that
closes last checkpoints the WAL, and that checkpoint fsyncs, which would make a store that commits
with ``synchronous = NORMAL`` durable at every cut and hide exactly what the drill looks for.
After a cut, a read-only connection may be unable to recover the WAL's index by itself (the
``-shm`` file is never fsynced, so the cut drops it): SQLite then answers "disk I/O error" for a
store a restarted worker opens without trouble. Such a store is read from a copy of its files
on the ordinary disk instead, where a read-write connection recovers the WAL (or rolls back a
hot journal) as the next worker would, and the store itself is not touched.
Other files (checkpoint files) are compared by content; temporary files (``*.tmp``) and locks
(``*.lock``) promise nothing and are skipped, as are logs and SQLite's own ``-wal``, ``-shm``, ``-journal``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

SQLITE_MAGIC = b"SQLite format 3\x00"
#: Files that promise nothing across a crash, by the end of their name (a log is written as it goes).
SKIPPED = (".tmp", ".lock", "-wal", "-shm", "-journal", ".log")

Snapshot = dict[str, Any]  # relative path -> {"tables": {name: [rows, digest]}} or {"sha256": ...} or {"error": ...}


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


@contextmanager
def _reading(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection that reads the store as a restarted worker would find it, changing nothing."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error:
            conn.close()
            raise
    except sqlite3.Error:
        with tempfile.TemporaryDirectory(prefix="store-copy-") as where:
            copy = Path(where) / path.name
            for suffix in ("", "-wal", "-journal"):  # never -shm: the copy rebuilds its own index
                if Path(f"{path}{suffix}").exists():
                    shutil.copyfile(f"{path}{suffix}", f"{copy}{suffix}")
            with closing(sqlite3.connect(copy, timeout=5)) as conn:
                yield conn
        return
    with closing(conn):
        yield conn


def _tables(path: Path) -> dict[str, list[Any]]:
    """Each table's row count and a digest of its rows (order-free)."""
    with _reading(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        tables: dict[str, list[Any]] = {}
        for name in names:
            rows = sorted(repr(row) for row in conn.execute(f'SELECT * FROM "{name}"'))  # noqa: S608 (own names)
            tables[name] = [len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest()]
        return tables


def _files(directory: Path, skip: tuple[str, ...]) -> list[Path]:
    """The files under ``directory`` that can promise something: not temporary files, not SQLite's own,
    not under the ``skip`` directories (relative to ``directory``: what the strategy keeps no promise in)."""
    found = []
    for root, dirs, files in os.walk(directory):  # a directory that vanishes meanwhile is passed over
        top = Path(root) == Path(directory)
        if top:
            dirs[:] = [d for d in dirs if d not in skip]  # not even walked: Spark's scratch comes and goes
        found += [Path(root) / name for name in files if not name.endswith(SKIPPED) and not (top and name in skip)]
    return sorted(found)


def take(directory: Path, skip: tuple[str, ...] = ()) -> Snapshot:
    """Every store file under ``directory`` (but ``skip``): SQLite tables, other files' content."""
    found: Snapshot = {}
    for path in _files(directory, skip):
        name = str(path.relative_to(directory))
        try:
            if _is_sqlite(path):
                found[name] = {"tables": _tables(path)}
            else:
                found[name] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "bytes": path.stat().st_size}
        except (OSError, sqlite3.Error) as exc:
            found[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return found


def integrity(directory: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """Each SQLite store under ``directory`` (but ``skip``) that does not open or fails its integrity check,
    and each JSON file (a checkpoint file) that no longer parses."""
    problems = []
    for path in _files(directory, skip):
        if path.suffix == ".json":
            try:
                json.loads(path.read_bytes())
            except (OSError, ValueError) as exc:
                problems.append(f"{path.name} is not valid JSON ({path.stat().st_size} bytes): {exc}")
            continue
        if not _is_sqlite(path):
            continue
        try:
            with _reading(path) as conn:
                answer = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        except sqlite3.Error as exc:
            problems.append(f"{path.name} does not open: {type(exc).__name__}: {exc}")
            continue
        if answer != ["ok"]:
            problems.append(f"{path.name} fails PRAGMA integrity_check: {'; '.join(map(str, answer[:3]))}")
    return problems


def lost(before: Snapshot, after: Snapshot) -> list[str]:
    """What ``before`` held that ``after`` does not, one line per file or table."""
    found = []
    for name, was in before.items():
        now = after.get(name)
        if "error" in was:
            continue  # unreadable before the cut: nothing was seen committed there
        if now is None:
            found.append(f"{name} is gone")
        elif "error" in now:
            found.append(f"{name} no longer reads ({now['error']})")
        elif "sha256" in was:
            if now.get("sha256") != was["sha256"]:
                found.append(f"{name} changed ({was['bytes']} bytes before, {now.get('bytes', 0)} after)")
        else:
            for table, (rows, digest) in was["tables"].items():
                kept = now.get("tables", {}).get(table)
                if kept is None:
                    found.append(f"{name}: table {table} is gone ({rows} row(s) before the cut)")
                elif kept[1] != digest:
                    found.append(f"{name}: table {table} differs ({rows} row(s) before the cut, {kept[0]} after)")
    return found
