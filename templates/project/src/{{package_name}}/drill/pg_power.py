"""A throwaway PostgreSQL server whose data directory sits on LazyFS: the power-loss drill's store for a
project that runs on PostgreSQL (power_loss_pg.py).

The drill never cuts the power under the team's own server. It starts a server of its own on this
machine (its PostgreSQL programs: ``initdb``, ``postgres``), loopback only, with the durability settings
read from the server ``DATABASE_URL`` names (``fsync``, ``synchronous_commit``, ``full_page_writes``,
``wal_sync_method``, the WAL writer's delays): what is proven is the team's configuration, on a copy.
``initdb`` writes the cluster on the plain disk before LazyFS is mounted over it, so every write the
server makes afterwards goes through LazyFS; ``cut()`` SIGKILLs the postmaster and every child (no
shutdown checkpoint, nothing flushed), the caller drops LazyFS's cache, ``start()`` runs crash recovery.

Standard library only (psycopg is imported where it is used): the toolkit's tests load this file by its
path, as they do lazyfs.py.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

#: The server settings that decide whether an acknowledged commit survives a power cut, copied from the
#: team's server. The WAL writer's delays matter with ``synchronous_commit = off``: they bound how long
#: an acknowledged commit stays in memory only.
DURABILITY_SETTINGS = ("fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "wal_writer_delay",
                       "wal_writer_flush_after", "commit_delay", "commit_siblings")
START_TIMEOUT_S = 120  # crash recovery replays the WAL before the server accepts connections
HOW_TO_GET = ("install PostgreSQL's server programs (Debian/Ubuntu: apt-get install postgresql-15, or put the "
              "directory holding initdb and postgres on PATH)")


class PostgresUnavailable(RuntimeError):
    """The throwaway server cannot be made or started here; the message says why and what to do."""


def find_bin(name: str) -> str | None:
    """``name`` on PATH, else in the newest /usr/lib/postgresql/<major>/bin (Debian's layout)."""
    found = shutil.which(name)
    if found:
        return found

    def major(path: str) -> tuple[int, ...]:
        match = re.search(r"/postgresql/([\d.]+)/", path)
        return tuple(int(p) for p in match.group(1).split(".")) if match else (0,)

    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=major, reverse=True)
    return candidates[0] if candidates else None


def unavailable_reason() -> str | None:
    """None when a throwaway server can run here; else what is missing and how to get it."""
    missing = [name for name in ("initdb", "postgres", "pg_isready") if find_bin(name) is None]
    if missing:
        return f"{', '.join(missing)} not found: {HOW_TO_GET}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "PostgreSQL refuses to run as root and there is no 'postgres' user to run it as"
    return None


def durability_settings(url: str) -> tuple[dict[str, str], str]:
    """The durability settings of the server at ``url`` and where they came from. A server that cannot
    be reached leaves PostgreSQL's defaults, and the second value says so."""
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=10, autocommit=True) as conn:
            # current_setting() answers in the form -c accepts back ("200ms", "1MB", "on").
            found = {name: str(conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0])  # type: ignore[index]
                     for name in DURABILITY_SETTINGS}
            return found, "the server DATABASE_URL names"
    except Exception as exc:  # any failure to read them: PostgreSQL's defaults, said in the report
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return {}, f"PostgreSQL's defaults (the server DATABASE_URL names could not be read: {first})"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ThrowawayPostgres:
    """A server in ``root``: ``disk`` (the cluster, what survives a cut), ``mount`` (LazyFS over it, the
    server's data directory while it runs), ``sock`` (its Unix socket, on the plain disk), ``log``.
    The postmaster is this process's child, not pg_ctl's, so a SIGKILLed one is reaped at once: a dead
    postmaster left as a zombie keeps its PID file's PID alive and the restarted server refuses to start."""

    def __init__(self, root: Path, *, on_lazyfs: bool = True) -> None:
        self.root = root
        self.disk, self.mount, self.sock, self.log = root / "disk", root / "mount", root / "sock", root / "server.log"
        #: The data directory the server runs on: through LazyFS, or (a baseline) on the plain disk.
        self.data = (self.mount if on_lazyfs else self.disk) / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.settings: dict[str, str] = {}
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None  # it refuses to run as root

    def _as_server_user(self, cmd: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *cmd] if self._user else cmd

    def init(self) -> None:
        """The cluster, written on the plain disk and synced before LazyFS serves it."""
        for path in (self.disk, self.sock):
            path.mkdir(parents=True, exist_ok=True)
        if self._user:
            for path in (self.root, self.disk, self.sock):
                os.chown(path, self._user.pw_uid, self._user.pw_gid)
        initdb = find_bin("initdb") or "initdb"
        done = subprocess.run(self._as_server_user([initdb, "-D", str(self.disk / "data"), "-U", "postgres",
                                                    "--auth=trust", "-E", "UTF8", "--no-sync"]),
                              capture_output=True, text=True, timeout=START_TIMEOUT_S)
        if done.returncode != 0:
            raise PostgresUnavailable(f"initdb failed: {(done.stderr or done.stdout).strip()[-500:]}")
        os.sync()

    def start(self, settings: dict[str, str] | None = None) -> None:
        """Start (again: after a cut this is crash recovery) with ``settings`` on top of the previous ones."""
        self.settings.update(settings or {})
        cmd = [find_bin("postgres") or "postgres", "-D", str(self.data), "-p", str(self.port), "-k",
               str(self.sock), "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=40"]
        for key, value in self.settings.items():
            cmd += ["-c", f"{key}={value}"]
        uid = self._user.pw_uid if self._user else None
        gid = self._user.pw_gid if self._user else None
        with open(self.log, "ab") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True, user=uid, group=gid,
                                          extra_groups=[] if self._user else None)
        deadline = time.monotonic() + START_TIMEOUT_S
        ready = [find_bin("pg_isready") or "pg_isready", "-q", "-U", "postgres", "-h", "127.0.0.1", "-p",
                 str(self.port)]
        while subprocess.run(ready).returncode != 0:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise PostgresUnavailable(f"the throwaway PostgreSQL did not start:\n{self.log_tail()}")
            time.sleep(0.05)
        self.starts += 1

    def wait_idle(self, timeout_s: float = 15.0) -> None:
        """Until no other session is running a statement or holding a transaction open: the backend of a
        worker that was just SIGKILLed finishes what it was doing (a COMMIT it had received) and exits."""
        import psycopg

        deadline = time.monotonic() + timeout_s
        with psycopg.connect(self.url, autocommit=True) as conn:
            while time.monotonic() < deadline:
                busy = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                                    "AND pid <> pg_backend_pid() AND state <> 'idle'").fetchone()
                if busy is None or busy[0] == 0:
                    return
                time.sleep(0.02)

    def cut(self) -> None:
        """kill -9 of the postmaster and every child, before anything of theirs can flush (the caller
        then drops LazyFS's cache)."""
        if self._proc is None:
            return
        pids = [self._proc.pid, *_children(self._proc.pid)]
        for pid in pids:  # the postmaster first: it would restart a child that died before it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._proc.wait()
        self._proc = None
        _await_exit(pids[1:])

    def stop(self) -> None:
        """Immediate shutdown (SIGQUIT), SIGKILL if it hangs."""
        if self._proc is None:
            return
        children = _children(self._proc.pid)
        self._proc.send_signal(signal.SIGQUIT)
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.cut()
            return
        self._proc = None
        _await_exit(children)

    def version(self) -> str:
        """"PostgreSQL 15.18 (Debian ...)" from ``postgres (PostgreSQL) 15.18 (Debian ...)``."""
        done = subprocess.run([find_bin("postgres") or "postgres", "--version"], capture_output=True, text=True)
        return done.stdout.strip().replace("postgres (PostgreSQL)", "PostgreSQL", 1)

    def log_tail(self, lines: int = 12) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"


def _children(parent: int) -> list[int]:
    """The children of a single-threaded process, in one read (no /proc scan: the cut must be quick, or
    the WAL writer gets time to flush what an asynchronous commit left behind)."""
    try:
        return [int(pid) for pid in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()]
    except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN: scan every process's parent
        found = []
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(proc.name))
        return found


def _await_exit(pids: list[int], timeout_s: float = 10.0) -> None:
    """Until each process is dead (a zombie counts: dead, its files closed, waiting for init to reap it)."""
    deadline = time.monotonic() + timeout_s
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            except OSError:
                break
            time.sleep(0.01)


def table_digests(url: str) -> dict[str, list[Any]]:
    """Each user table's row count and an order-free digest of its rows (their text form, computed by the
    server: the same rows read the same whatever their types)."""
    import hashlib

    import psycopg
    from psycopg import sql

    tables: dict[str, list[Any]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        names = conn.execute("SELECT schemaname, tablename FROM pg_tables WHERE schemaname NOT IN "
                             "('pg_catalog', 'information_schema') ORDER BY 1, 2").fetchall()
        for schema, table in names:
            query = sql.SQL("SELECT t::text FROM {}.{} AS t").format(sql.Identifier(schema), sql.Identifier(table))
            rows = sorted(row[0] for row in conn.execute(query))
            tables[f"{schema}.{table}"] = [len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest()]
    return tables
