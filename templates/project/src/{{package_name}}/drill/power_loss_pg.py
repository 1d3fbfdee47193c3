"""``drill --power-loss`` for a project on PostgreSQL: the same cuts, under a server of the drill's own.

The team's server is never touched: the drill starts a throwaway PostgreSQL on this machine whose data
directory sits on LazyFS (pg_power.py), with the durability settings read from the server
``DATABASE_URL`` names, and points the workers at it. At every crash the worker is dead first; the drill
waits until its server backend has finished what it had received (a COMMIT the worker sent just before
it died completes, or not, on the server's side), reads every table, kills the whole server with
SIGKILL, has LazyFS drop what the server did not fsync, starts it again (crash recovery) and reads every
table again. A row that was there before and is gone after was committed and not durable:
``committed_lost``. A server that no longer starts is ``store_corrupt``.

No commit is excused as "in progress" here (the SQLite drill's ``in_commit``): PostgreSQL shows a
transaction to other sessions only after its commit record is flushed when ``synchronous_commit`` is on,
so with the defaults a visible row is a durable one; with it off, a visible row may be lost, and that is
exactly what the drill must report.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..runtime.errors import JobError
from ..runtime.strategy import Context
from . import lazyfs, pg_power, store_snapshot
from .power_loss import TIMED_COMMITS, PowerLossRun
from .report_data import percentile
from .preflight import fresh_data_dir

#: LazyFS's cache for the server: it holds every page written between two cuts, and PostgreSQL writes
#: whole 16 MB WAL segments when it creates them.
CACHE_SIZE = "768mb"
#: The throwaway servers' directories: under the system's temporary directory, where the ``postgres``
#: user (the server runs as it when the drill runs as root) can reach them.
ROOT_PREFIX = "drill-power-loss-pg-"
OWNER_FILE = "drill.pid"
STORE = "postgresql"  # the snapshot's one "file": the server's tables


class PostgresPowerLossRun(PowerLossRun):
    excuses_in_commit = False  # see the module docstring

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server: pg_power.ThrowawayPostgres | None = None
        self.cache_size = CACHE_SIZE
        self.start_failure = ""
        self.settings_from = ""

    def run(self) -> dict[str, Any]:
        remove_orphaned_servers()
        data_dir = fresh_data_dir(self.data_dir_arg)
        settings, self.settings_from = pg_power.durability_settings(self.ctx.settings.database_url)
        root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX))
        (root / OWNER_FILE).write_text(str(os.getpid()))
        server = pg_power.ThrowawayPostgres(root)
        try:
            server.init()
            with lazyfs.lazyfs_mount(server.disk, server.mount, cache_size=CACHE_SIZE) as fs:
                self.fs, self.server = fs, server
                try:
                    server.start(settings)
                    self.latency = commit_latency(server.url)
                    self.emit({"event": "mounted", "mountpoint": str(server.mount), "backing": str(server.disk),
                               "server": server.url, "t": self.t()})
                    # The workers (their environment) and the drill's own reads go to the throwaway server.
                    self.ctx = Context(data_dir=self.ctx.data_dir, strategy=self.ctx.strategy,
                                       settings=replace(self.ctx.settings, database_url=server.url))
                    with _environ("DATABASE_URL", server.url):
                        return self.run_in(data_dir)
                finally:
                    server.stop()
        except lazyfs.LazyFSError as exc:
            raise JobError(f"the power-loss drill stopped: {exc} (its files: {data_dir})") from None
        except pg_power.PostgresUnavailable as exc:
            raise JobError(f"the power-loss drill's PostgreSQL server failed: {exc}") from None
        finally:
            self.fs = None
            shutil.rmtree(root, ignore_errors=True)

    # ------------------------------------------------------------ the store is a server
    def read_store(self) -> store_snapshot.Snapshot:
        assert self.server is not None
        if self.start_failure:
            return {STORE: {"error": self.start_failure}}
        try:
            self.server.wait_idle()
            return {STORE: {"tables": pg_power.table_digests(self.server.url)}}
        except Exception as exc:  # a server that does not answer: unreadable, said in the verdict
            return {STORE: {"error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}}

    def cut_power(self) -> float:
        assert self.server is not None and self.fs is not None
        self.server.cut()
        seconds = float(self.fs.clear_cache())
        try:
            self.server.start()
        except pg_power.PostgresUnavailable as exc:
            self.start_failure = f"PostgreSQL does not start on what the cut left: {exc}"
        return seconds

    def store_problems(self) -> list[str]:
        return [self.start_failure] if self.start_failure else []


    def more_failures(self, report: dict[str, Any]) -> list[dict[str, str]]:
        failures = super().more_failures(report)
        assert self.server is not None
        report["power_loss"]["mount"]["backing"] = "the throwaway server's directory, removed after the drill"
        report["power_loss"]["postgresql"] = {
            "version": self.server.version(), "settings": dict(self.server.settings),
            "settings_from": self.settings_from, "server_starts": self.server.starts,
        }
        return failures


def commit_latency(url: str) -> dict[str, Any]:
    """One-row commits timed on the throwaway server (on LazyFS, with the team's settings)."""
    import psycopg

    times = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE drill_commit_timing (n int)")
        for n in range(TIMED_COMMITS):
            started = time.perf_counter()
            with conn.transaction():
                conn.execute("INSERT INTO drill_commit_timing VALUES (%s)", (n,))
            times.append((time.perf_counter() - started) * 1000)
        conn.execute("DROP TABLE drill_commit_timing")
    return {"commits": TIMED_COMMITS, "store": STORE,
            "lazyfs": {"p50": round(percentile(times, 0.5) or 0, 3), "p95": round(percentile(times, 0.95) or 0, 3)}}


@contextlib.contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    was = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if was is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = was


def remove_orphaned_servers() -> list[Path]:
    """Throwaway servers a SIGKILLed drill left running (its pid gone): stopped, unmounted, deleted."""
    removed = []
    for root in Path(tempfile.gettempdir()).glob(ROOT_PREFIX + "*"):
        try:
            owner = int((root / OWNER_FILE).read_text())
            os.kill(owner, 0)
            continue  # a live drill's
        except ProcessLookupError:
            pass
        except (OSError, ValueError):
            if time.time() - root.stat().st_mtime < 60:
                continue  # being created right now
        with contextlib.suppress(OSError, ValueError, IndexError):
            postmaster = int((root / "mount" / "data" / "postmaster.pid").read_text().split()[0])
            os.kill(postmaster, signal.SIGKILL)
            time.sleep(0.5)  # its children see it gone and exit
        lazyfs.remove_stale_mounts(root)
        shutil.rmtree(root, ignore_errors=True)
        removed.append(root)
    return removed
