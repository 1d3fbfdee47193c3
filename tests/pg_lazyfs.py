"""A throwaway PostgreSQL server whose data directory sits on LazyFS, for power-loss tests and benchmarks.

The server is the generated project's own (``drill/pg_power.py``, loaded by its path: it imports nothing
from the package), so that ``drill --power-loss`` on PostgreSQL and these tests rest on the same code.
``power_cut()`` SIGKILLs the postmaster and every child (nothing flushed, no shutdown checkpoint), then has
LazyFS drop every write the server did not fsync; ``start()`` recovers from what is left, as after a power
failure. Loopback only; stopped, unmounted and deleted at the end.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from lazyfs_support import binary, load_lazyfs

from advisor.probe.power_cut import module_path

MODULE = "continuity_pg_power"


def pg_power() -> ModuleType:
    if MODULE not in sys.modules:
        spec = importlib.util.spec_from_file_location(MODULE, module_path().with_name("pg_power.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[MODULE] = module
        spec.loader.exec_module(module)
    return sys.modules[MODULE]


class PowerLossPostgres:
    """The drill's throwaway server with the tests' spelling: ``start(**settings)``, ``power_cut()``."""

    def __init__(self, server: Any, fs: Any) -> None:
        self.server, self.fs, self.url = server, fs, server.url

    def start(self, **settings: str) -> None:
        """Start (again) with these settings (fsync, synchronous_commit...) on top of the previous ones."""
        self.server.start(settings)

    def power_cut(self) -> float:
        """kill -9 of the whole server, then LazyFS drops what it did not fsync; the clear-cache seconds."""
        assert self.fs is not None, "a server on LazyFS has power cuts; this one runs on the plain disk"
        self.server.cut()
        return float(self.fs.clear_cache())

    def stop(self) -> None:
        self.server.stop()

    def log_tail(self, lines: int = 15) -> str:
        return str(self.server.log_tail(lines))


@contextmanager
def postgres_on_lazyfs(cache_size: str = "256mb", *, lazyfs: bool = True) -> Iterator[PowerLossPostgres]:
    """A server, not started yet (start() with its settings), its data directory on LazyFS; ``url`` is the
    database ``postgres``. ``lazyfs=False``: the same server on the plain directory (a baseline; no
    power_cut())."""
    module = pg_power()
    reason = module.unavailable_reason()
    if reason:
        raise RuntimeError(f"{reason}; run `make postgres`")
    root = Path(tempfile.mkdtemp(prefix="advisor-pg-lazyfs-"))
    server = module.ThrowawayPostgres(root, on_lazyfs=lazyfs)
    try:
        server.init()  # on the plain disk, synced: its files are durable before the test begins
        with (load_lazyfs().lazyfs_mount(server.disk, server.mount, cache_size=cache_size, binary=binary())
              if lazyfs else contextlib.nullcontext()) as fs:
            try:
                yield PowerLossPostgres(server, fs)
            finally:
                server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
