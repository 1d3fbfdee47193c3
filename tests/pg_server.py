"""A throwaway PostgreSQL server on a loopback port, for tests of the multi-machine store.

Uses the machine's own PostgreSQL binaries (`make test` installs them with apt when missing):
initdb into a temp dir, pg_ctl start on a free 127.0.0.1 port, stop and delete at the end.
PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def find_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


@contextmanager
def postgres_server(*, fsync: bool = False) -> Iterator[str]:
    """Yield a DATABASE_URL for a fresh server with an empty database ``drill``.

    ``fsync=False`` (the default, for speed) makes every drill fail its durability check on
    purpose; a drill that must pass (a baseline, a mutation of another check) asks for it on."""
    initdb, pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
    if not (initdb and pg_ctl):
        raise RuntimeError("PostgreSQL binaries (initdb, pg_ctl) not found; run `make postgres`")
    root = Path(tempfile.mkdtemp(prefix="advisor-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        for p in (root, sock):
            os.chown(p, user.pw_uid, user.pw_gid)
    port = _free_port()
    run = lambda cmd: subprocess.run(_as_server_user(cmd), check=True, capture_output=True, timeout=120)  # noqa: E731
    try:
        run([initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        opts = (f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync={'on' if fsync else 'off'} "
                "-c max_connections=50")
        run([pg_ctl, "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start"])
        try:
            run([find_bin("createdb") or "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "drill"])
            yield f"postgresql://postgres@127.0.0.1:{port}/drill"
        finally:
            run([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def create_database(server_url: str, prefix: str) -> str:
    """A new, empty database on the server at ``server_url``; its URL (one per test: no
    state leaks between tests sharing the session's server)."""
    import uuid

    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base, _, _ = server_url.rpartition("/")
    return f"{base}/{name}"
