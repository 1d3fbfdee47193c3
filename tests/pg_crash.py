"""A throwaway PostgreSQL server that a test may crash and start again.

tests/pg_server.py's server is shared by a whole test session; crashing it would
break every other test. This one belongs to one test: ``crash()`` is
``pg_ctl stop -m immediate`` (the server dies without a shutdown checkpoint, as on
a power cut or an OOM kill, and recovers from its WAL when started), ``start()``
brings it back on the same port. Loopback only, deleted at the end.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pg_server import _as_server_user, _free_port, find_bin


class CrashablePostgres:
    def __init__(self, root: Path, port: int) -> None:
        self.root, self.port = root, port
        self.data = root / "data"
        self.url = f"postgresql://postgres@127.0.0.1:{port}/drill"
        self._pg_ctl = find_bin("pg_ctl") or "pg_ctl"

    def _run(self, *args: str) -> None:
        subprocess.run(_as_server_user([self._pg_ctl, "-D", str(self.data), *args]), check=True,
                       capture_output=True, timeout=120)

    def start(self) -> None:
        opts = (f"-p {self.port} -k {self.root / 'sock'} -c listen_addresses=127.0.0.1 -c fsync=off "
                f"-c max_connections=50")
        self._run("-o", opts, "-l", str(self.root / "log"), "-w", "start")

    def crash(self, mode: str = "immediate") -> None:
        """Immediate stop: every connection is cut, nothing is flushed. ``fast``: an orderly
        shutdown instead, sessions told why (SQLSTATE 57P01, admin shutdown)."""
        self._run("-m", mode, "-w", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()


@contextmanager
def crashable_postgres() -> Iterator[CrashablePostgres]:
    """A fresh server with an empty database ``drill``; stopped and deleted afterwards."""
    initdb = find_bin("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL binaries (initdb, pg_ctl) not found; run `make postgres`")
    root = Path(tempfile.mkdtemp(prefix="advisor-pg-crash-"))
    (root / "sock").mkdir()
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        user = pwd.getpwnam("postgres")
        for p in (root, root / "sock"):
            os.chown(p, user.pw_uid, user.pw_gid)
    server = CrashablePostgres(root, _free_port())
    try:
        subprocess.run(_as_server_user([initdb, "-D", str(server.data), "-U", "postgres", "--auth=trust", "-E",
                                        "UTF8", "--no-sync"]), check=True, capture_output=True, timeout=120)
        server.start()
        try:
            subprocess.run([find_bin("createdb") or "createdb", "-h", "127.0.0.1", "-p", str(server.port), "-U",
                            "postgres", "drill"], check=True, capture_output=True, timeout=60)
            yield server
        finally:
            if server.running():
                server.crash()
    finally:
        shutil.rmtree(root, ignore_errors=True)
