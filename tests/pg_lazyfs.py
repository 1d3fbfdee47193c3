"""A throwaway PostgreSQL server whose data directory sits on LazyFS, for power-loss tests.

``power_cut()`` SIGKILLs the postmaster and every child (nothing flushed, no shutdown checkpoint), then has
LazyFS drop every write the server did not fsync; ``start()`` recovers from what is left, as after a power
failure. initdb writes the cluster into the backing directory before the mount (through LazyFS it takes
twice as long, 9-10 s against 4-5 s here; its files are durable before the test begins either way), so every
write the server makes afterwards goes through LazyFS. Loopback only; stopped, unmounted and deleted at the end.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lazyfs_support import binary, load_lazyfs
from pg_server import _as_server_user, _free_port, find_bin


class PowerLossPostgres:
    """The postmaster runs as this process's child (not through pg_ctl) so that after a SIGKILL it is reaped
    at once: a dead postmaster left as a zombie keeps its PID alive and the restarted server refuses to start."""

    def __init__(self, root: Path, fs: object) -> None:
        self.root, self.fs, self.port = root, fs, _free_port()
        self.data = root / "mnt" / "data"
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.settings: dict[str, str] = {}
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, **settings: str) -> None:
        """Start (again) with these settings (fsync, synchronous_commit...) on top of the previous ones."""
        self.settings.update(settings)
        cmd = [find_bin("postgres") or "postgres", "-D", str(self.data), "-p", str(self.port), "-k",
               str(self.root / "sock"), "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=20"]
        for key, value in self.settings.items():
            cmd += ["-c", f"{key}={value}"]
        user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None  # it refuses to run as root
        with open(self.root / "log", "ab") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True, user=user.pw_uid if user else None,
                                          group=user.pw_gid if user else None, extra_groups=[] if user else None)
        deadline = time.monotonic() + 120  # crash recovery replays the WAL first
        while subprocess.run([find_bin("pg_isready") or "pg_isready", "-q", "-U", "postgres", "-h", "127.0.0.1", "-p",
                              str(self.port)]).returncode != 0:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start on LazyFS:\n{self.log_tail()}")
            time.sleep(0.05)

    def power_cut(self) -> float:
        """kill -9 of the whole server, then LazyFS drops what it did not fsync; the clear-cache seconds."""
        assert self._proc is not None and self.fs is not None, "start() on LazyFS first"
        pids = [self._proc.pid, *_children(self._proc.pid)]
        for pid in pids:  # the postmaster first: it would restart a child that died before it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._proc.wait()
        self._proc = None
        _await_exit(pids[1:])
        return float(self.fs.clear_cache())  # type: ignore[attr-defined]

    def stop(self) -> None:
        """Immediate shutdown (SIGQUIT), SIGKILL if it hangs."""
        if self._proc is None:
            return
        children = _children(self._proc.pid)
        self._proc.send_signal(signal.SIGQUIT)
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            for pid in [self._proc.pid, *children]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self._proc.wait()
        self._proc = None
        _await_exit(children)

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join((self.root / "log").read_text(errors="replace").splitlines()[-lines:])


def _children(parent: int) -> list[int]:
    """The children of a single-threaded process, in one read (no /proc scan: the cut must be quick, or the
    WAL writer gets time to flush what an asynchronous commit left behind)."""
    try:
        return [int(pid) for pid in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()]
    except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN: scan every process's parent
        found = []
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(proc.name))
        return found


def _await_exit(pids: list[int], timeout: float = 10.0) -> None:
    """Until each process is dead (a zombie counts: dead, its files closed, waiting for init to reap it)."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            except OSError:
                break
            time.sleep(0.01)


@contextmanager
def postgres_on_lazyfs(cache_size: str = "256mb", *, lazyfs: bool = True) -> Iterator[PowerLossPostgres]:
    """A server, not started yet (start() with its settings), its data directory on LazyFS; ``url`` is the
    database ``postgres``. ``lazyfs=False``: the same server on the plain directory (a baseline; no
    power_cut())."""
    initdb = find_bin("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL binaries (initdb, pg_ctl) not found; run `make postgres`")
    root = Path(tempfile.mkdtemp(prefix="advisor-pg-lazyfs-"))
    backing = root / "backing"
    for path in (backing, root / "sock"):
        path.mkdir()
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        user = pwd.getpwnam("postgres")
        for path in (root, backing, root / "sock"):
            os.chown(path, user.pw_uid, user.pw_gid)
    try:
        subprocess.run(_as_server_user([initdb, "-D", str(backing / "data"), "-U", "postgres", "--auth=trust", "-E",
                                        "UTF8", "--no-sync"]), check=True, capture_output=True, timeout=120)
        os.sync()  # the cluster's files are on disk before LazyFS serves them
        with (load_lazyfs().lazyfs_mount(backing, root / "mnt", cache_size=cache_size, binary=binary()) if lazyfs
              else contextlib.nullcontext()) as fs:
            server = PowerLossPostgres(root, fs)
            if fs is None:
                server.data = backing / "data"
            try:
                yield server
            finally:
                server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
