"""Durability, observed rather than assumed.

Two halves:

* :func:`problems` judges settings read back from a store (``Store.durability()``
  in store.py, or what a drill observed): SQLite needs ``synchronous`` FULL or
  EXTRA and ``journal_mode`` WAL; PostgreSQL needs ``fsync`` and
  ``synchronous_commit`` on; checkpoint files need every renamed file fsynced
  first and its directory fsynced after.
* :class:`Probe`, installed by ``__main__`` in a worker that a drill starts (the
  drill sets :data:`PROBE_ENV`; nothing is installed otherwise). It wraps
  ``sqlite3.connect`` (every state-store connection reads back the ``synchronous``
  it really commits with on EVERY commit, one pragma read, no I/O; its
  ``journal_mode`` at the first commit and every :data:`JOURNAL_EVERY`), ``os.fsync`` (files and directories counted apart) and
  ``os.replace``/``os.rename`` (a renamed file that was not fsynced, or a rename
  whose directory is not fsynced before the next write, is a violation). On
  PostgreSQL, store.py calls :meth:`Probe.committing` inside every transaction just
  before its COMMIT (``probe_hook``): the settings read there are the ones that
  commit, a ``SET LOCAL synchronous_commit = off`` included. It sees what the
  strategy code did, whatever that code says about itself: a deleted fsync or a
  weakened pragma, even after the first commit, shows up here. Its account of the
  worker itself (how the run ended, what it still held, the messages it acked) is
  witness.py's.

The probe writes ``<dir>/<pid>.json`` whenever it first sees something (a new
setting, the first checkpoint write, a violation) and at exit, so a worker killed
by SIGKILL has already left what it saw. Its own writes use the unwrapped
functions and are not fsynced: a process kill does not lose the page cache.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..runtime import probe_hook
from ..runtime.errors import CorruptStateError
from . import witness
from ..runtime.safe_read import read_json
from ..runtime.store import STATE_DB, SYNCHRONOUS_NAMES
from ..settings import ENV_PREFIX

#: Set by the drill for its workers: the directory the probe reports into.
PROBE_ENV = ENV_PREFIX + "DRILL_PROBE"
#: Suffix of the marker a worker keeps in the probe's directory: one byte, "1" while a COMMIT runs.
IN_COMMIT = ".committing"


def committing(marker: Path) -> bool:
    """Was the worker whose marker this is inside a COMMIT when it stopped? (Its one byte says so.)"""
    try:
        return marker.read_bytes()[:1] == b"1"
    except OSError:
        return False

DURABLE_SYNCHRONOUS = ("FULL", "EXTRA")
#: SQLite's journal_mode is read at a connection's first commit and then every this many.
JOURNAL_EVERY = 64
#: PostgreSQL: what a transaction is about to commit with, in one round trip (fsync is the
#: server's; synchronous_commit can be changed per session and per transaction).
PG_COMMIT_SETTINGS = "SELECT current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS synchronous_commit"
MAX_VIOLATIONS = 5  # per process: the first few say enough


def problems(observed: dict[str, Any]) -> list[str]:
    """What is weaker than a committed checkpoint surviving a power cut, one sentence each."""
    found = []
    if "synchronous" in observed and observed["synchronous"] not in DURABLE_SYNCHRONOUS:
        found.append(f"SQLite synchronous = {observed['synchronous']} (a commit can be lost on power loss; "
                     "FULL is required)")
    if "journal_mode" in observed and observed["journal_mode"] != "wal":
        found.append(f"SQLite journal_mode = {observed['journal_mode']} (WAL is required)")
    if "fsync" in observed and observed["fsync"] != "on":
        found.append(f"PostgreSQL fsync = {observed['fsync']} (the server does not flush commits)")
    if "synchronous_commit" in observed and observed["synchronous_commit"] in ("off",):
        found.append(f"PostgreSQL synchronous_commit = {observed['synchronous_commit']} "
                     "(a commit returns before it is durable)")
    return found


#: Statements that write: outside a transaction, SQLite commits each one when it ends.
WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER"})


def writes(sql: str) -> bool:
    """A statement that writes (outside a transaction, in autocommit, its own commit)."""
    words = sql.split(None, 1)
    return bool(words) and words[0].upper() in WRITES


# ------------------------------------------------------------------ the probe
class Probe:
    """Installed once per worker process in drill mode; see the module docstring."""

    def __init__(self, report_dir: Path, state_db_name: str) -> None:
        self.path = report_dir / f"{os.getpid()}.json"
        #: There while a state-store commit runs (a COMMIT, or a write outside a transaction, which
        #: commits by itself): a worker killed with it there may have died between writing its commit
        #: and syncing it, before the commit returned (power_loss.py reads it).
        self.in_commit = report_dir / f"{os.getpid()}{IN_COMMIT}"
        self._in_commit_fd: int | None = None  # opened at the first commit, kept open
        self.state_db_name = state_db_name
        self.started_ns = time.time_ns()
        self.connections: list[dict[str, str]] = []  # distinct settings seen on state-store commits
        self.files = {"file_fsyncs": 0, "dir_fsyncs": 0, "renames": 0, "synced_renames": 0}
        self.violations: list[str] = []
        # (dev, ino, mtime_ns, size) of files fsynced by this process: a renamed file must be one of
        # them, unchanged since its fsync.
        self.synced: set[tuple[int, int, int, int]] = set()
        self.unsynced_dirs: dict[tuple[int, int], str] = {}  # renamed-into directories awaiting fsync
        self.postgresql: list[dict[str, str]] = []
        #: Store outages this worker rode out (outage.py): each restarts the unit of work in
        #: flight, like a kill, so the drill counts them with the kills.
        self.outages = 0
        #: When the last outage was seen (a failed attempt, outage.py): the worker's calls to the
        #: service since then say its run started again and took work (checks/exits.py).
        self.last_outage_at = 0.0
        #: State-store commits whose settings were read (every one: SQLite and PostgreSQL).
        self.commits_read = 0
        #: The worker's own account (witness.py): owner id, how its run ended, acks.
        self.account = witness.Account()
        self.real: dict[str, Any] = {"fsync": os.fsync, "replace": os.replace, "rename": os.rename,
                                     "connect": sqlite3.connect}

    # ---- installing
    def install(self) -> Probe:
        os.fsync = self._fsync  # type: ignore[assignment]
        os.replace = self._wrap_rename(self.real["replace"])  # type: ignore[assignment]
        os.rename = self._wrap_rename(self.real["rename"])  # type: ignore[assignment]
        sqlite3.connect = self._connect  # type: ignore[assignment]
        self.account.watch_acks(self)
        atexit.register(self.finish)
        return self

    def watch(self) -> Probe:
        """Install for a ``with`` block in this process (the drill watches ``submit``)."""
        return self.install()

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish("returned")
        self.uninstall()

    def uninstall(self) -> None:
        """Put the real functions back (tests install a probe in-process)."""
        os.fsync, os.replace, os.rename = self.real["fsync"], self.real["replace"], self.real["rename"]
        sqlite3.connect = self.real["connect"]
        self.account.unwatch_acks()
        atexit.unregister(self.finish)
        if self._in_commit_fd is not None:
            os.close(self._in_commit_fd)
            self._in_commit_fd = None

    def finish(self, moment: str = "exited") -> None:
        for where in self.unsynced_dirs.values():
            self.violate(f"{moment} without fsyncing directory {where} after renaming a file into it")
        self.unsynced_dirs.clear()
        self.write()

    # ---- SQLite
    def _connect(self, database: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(str(database)).name != self.state_db_name or "factory" in kwargs:
            return self.real["connect"](database, *args, **kwargs)
        probe = self

        class Observed(sqlite3.Connection):
            """A state-store connection that reports its settings when it commits."""

            commits = 0
            journal_mode = ""

            def _committing(self) -> None:
                # synchronous at EVERY commit (one pragma read, no I/O): weakened after the first
                # commit, it is seen at the next. journal_mode (a costlier read, and leaving WAL
                # needs the database to itself) at the first commit and every JOURNAL_EVERY.
                probe.commits_read += 1
                self.commits += 1
                if self.commits % JOURNAL_EVERY == 1:
                    self.journal_mode = str(super().execute("PRAGMA journal_mode").fetchone()[0]).lower()
                level = super().execute("PRAGMA synchronous").fetchone()[0]
                probe.saw_sqlite({"synchronous": SYNCHRONOUS_NAMES.get(int(level), str(level)),
                                  "journal_mode": self.journal_mode})

            def commits_by_itself(self, sql: str) -> bool:
                # Autocommit (isolation_level None, as store.py connects): a write outside BEGIN ...
                # COMMIT is committed when it ends. (Otherwise the sqlite3 module opens a transaction.)
                return self.isolation_level is None and not self.in_transaction and writes(sql)

            def execute(self, sql: str, *params: Any) -> Any:  # type: ignore[override]
                # store.py commits with an explicit COMMIT; a write outside a transaction (the
                # plain kind's call ledger writes so: durable before the call) commits by itself.
                if sql[:6].upper() != "COMMIT" and not self.commits_by_itself(sql):
                    return super().execute(sql, *params)
                self._committing()
                with probe.committing_now():
                    return super().execute(sql, *params)

            def executemany(self, sql: str, *params: Any) -> Any:  # type: ignore[override]
                if not self.commits_by_itself(sql):
                    return super().executemany(sql, *params)
                self._committing()
                with probe.committing_now():
                    return super().executemany(sql, *params)

            def commit(self) -> None:  # the eventsourcing library commits with commit()
                self._committing()
                with probe.committing_now():
                    super().commit()

        return self.real["connect"](database, *args, factory=Observed, **kwargs)

    @contextlib.contextmanager
    def committing_now(self) -> Iterator[None]:
        """The marker says "1" while the COMMIT runs: one byte written in place before and after, on
        the drill's own disk (a file created and removed around every commit cost a drilled commit
        a fifth of its time)."""
        if self._in_commit_fd is None:
            self._in_commit_fd = os.open(self.in_commit, os.O_CREAT | os.O_WRONLY, 0o644)
        os.pwrite(self._in_commit_fd, b"1", 0)
        try:
            yield
        finally:
            os.pwrite(self._in_commit_fd, b"0", 0)

    def saw_sqlite(self, settings: dict[str, str]) -> None:
        if settings not in self.connections:
            self.connections.append(settings)
            self.write()

    def saw_postgresql(self, settings: dict[str, str]) -> None:
        if settings not in self.postgresql:
            self.postgresql.append(settings)
            self.write()

    def committing(self, store: Any) -> None:
        """store.py, inside a PostgreSQL transaction, just before COMMIT (probe_hook.py)."""
        self.commits_read += 1
        self.saw_postgresql({k: str(v) for k, v in (store.one(PG_COMMIT_SETTINGS) or {}).items()})

    def saw_outage(self) -> None:
        self.outages += 1
        self.last_outage_at = time.time()
        self.write()

    # ---- the worker's own account (witness.py), told by cli.py's `run`
    def run_started(self, ctx: Any) -> None:
        self.account.run_started(ctx)
        self.write()

    def run_ended(self, ctx: Any, signal_name: str | None, code: int) -> None:
        self.account.run_ended(ctx, signal_name, code)
        self.write()

    def saw_acks(self, correlation_ids: list[str]) -> None:
        if self.account.acked(correlation_ids):
            self.write()  # a message acked before its work was committed: said before a kill can land

    # ---- files
    def _fsync(self, fd: Any) -> None:
        self.real["fsync"](fd)
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            self.files["dir_fsyncs"] += 1
            if self.unsynced_dirs.pop((st.st_dev, st.st_ino), None) is not None and not self.files["synced_renames"]:
                self.files["synced_renames"] = 1
                self.write()  # the first complete checkpoint write: say so before a kill can land
        else:
            self.files["file_fsyncs"] += 1
            for where in self.unsynced_dirs.values():  # the next write began: the last rename was never made durable
                self.violate(f"renamed a file into {where} and went on without fsyncing the directory")
            self.unsynced_dirs.clear()
            self.synced.add((st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size))

    def _wrap_rename(self, real: Any) -> Any:
        def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            try:
                st = os.stat(src)
            except OSError:
                st = None
            real(src, dst, *args, **kwargs)
            if st is None:
                return
            self.files["renames"] += 1
            # A file written before this process started was made durable by an earlier one.
            if (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size) not in self.synced \
                    and st.st_mtime_ns >= self.started_ns:
                self.violate(f"renamed {Path(str(src)).name} to {Path(str(dst)).name} without fsyncing it first")
            parent = Path(str(dst)).resolve().parent
            pst = os.stat(parent)
            self.unsynced_dirs[(pst.st_dev, pst.st_ino)] = str(parent)
        return rename

    def violate(self, message: str) -> None:
        if len(self.violations) < MAX_VIOLATIONS and message not in self.violations:
            self.violations.append(message)
            self.write()

    # ---- reporting
    def write(self) -> None:
        doc = {"pid": os.getpid(), "sqlite": self.connections, "postgresql": self.postgresql,
               "files": self.files, "violations": self.violations, "outages": self.outages,
               "commits_read": self.commits_read, "last_outage_at": self.last_outage_at, **self.account.report()}
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(doc, sort_keys=True), encoding="utf-8")
            self.real["replace"](tmp, self.path)
        except OSError:
            pass  # the data dir went away (the drill is over): nothing left to tell


#: The probe of this process, when a drill installed one.
active: Probe | None = None


def install_if_drilled() -> None:
    """Called by ``__main__``: install the probe when the drill asked for it."""
    global active
    where = os.environ.get(PROBE_ENV)
    if not where or active is not None:
        return
    report_dir = Path(where)
    report_dir.mkdir(parents=True, exist_ok=True)
    active = probe_hook.observer = Probe(report_dir, STATE_DB).install()


def collect(report_dir: Path) -> dict[str, Any]:
    """The drill's side: merge what every worker process reported."""
    merged: dict[str, Any] = {"processes": 0, "sqlite": [], "postgresql": [],
                              "files": {"file_fsyncs": 0, "dir_fsyncs": 0, "renames": 0, "synced_renames": 0},
                              "violations": [], "outages": 0, "commits_read": 0, "workers": []}
    for path in sorted(report_dir.glob("*.json")):
        try:
            doc = read_json(path, "durability report")  # bounded (safe_read.py)
        except CorruptStateError:
            continue  # a report cut short by the kill itself: the next write would have replaced it
        merged["processes"] += 1
        merged["outages"] += int(doc.get("outages", 0))
        merged["commits_read"] += int(doc.get("commits_read", 0))
        merged["workers"].append(witness.worker_entry(doc))
        for kind in ("sqlite", "postgresql"):
            for seen in doc.get(kind, []):
                if seen not in merged[kind]:
                    merged[kind].append(seen)
        for key in merged["files"]:
            merged["files"][key] += int(doc.get("files", {}).get(key, 0))
        for message in doc.get("violations", []):
            if message not in merged["violations"]:
                merged["violations"].append(message)
    return merged
