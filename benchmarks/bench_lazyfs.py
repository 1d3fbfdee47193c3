"""Benchmark: what a power-loss drill costs and finds, LazyFS against the plain directory side by side.

    python benchmarks/bench_lazyfs.py [--commits 300] [--tries 5] [--rounds 3] [--no-postgres]

Figures (medians over ``--rounds``, LazyFS and plain alternating in each round):
- mount (LazyFS start until the mount is live) and clear-cache latency, empty and with 50 MB unsynced;
- the durable commit: SQLite WAL ``synchronous=FULL`` and PostgreSQL ``fsync=on, synchronous_commit=on``,
  one row per commit, on LazyFS and on the plain directory beneath it (ratio LazyFS / plain);
- what survives a power cut over ``--tries`` tries per setting, with the servers' default settings (no
  slowed WAL writer as in the tests): SQLite FULL/NORMAL/OFF, PostgreSQL on / synchronous_commit off /
  SET LOCAL off in the last transaction / fsync off.
No targets: figures only. Without LazyFS it prints why and exits 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from generated import Pair, fsync_us  # noqa: E402  (benchmarks/generated.py puts the checkout on sys.path)

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

from lazyfs_support import binary, load_lazyfs, skip_reason  # noqa: E402
from test_lazyfs import SQLITE_WRITER, copied, surviving_units  # noqa: E402

lazyfs = load_lazyfs()


def commit_row(pair: Pair) -> str:
    r = sorted(pair.ratios)
    return (f"LazyFS {statistics.median(pair.ours):.2f} ms, plain {statistics.median(pair.base):.2f} ms; ratio "
            f"LazyFS / plain {pair.ratio():.2f} ({r[0]:.2f}-{r[-1]:.2f}): LazyFS's fsync never reaches the disk")


def mount_and_clear(root: Path) -> tuple[float, float, float]:
    """(mount s, clear-cache ms with nothing unsynced, clear-cache ms with 50 MB unsynced)."""
    backing = root / "backing"
    backing.mkdir(parents=True)
    started = time.perf_counter()
    with lazyfs.lazyfs_mount(backing, root / "mnt", cache_size="128mb", binary=binary()) as fs:
        mounted = time.perf_counter() - started
        empty = fs.clear_cache() * 1000
        with open(root / "mnt" / "big", "wb") as f:
            for _ in range(50):
                f.write(os.urandom(1 << 20))
        full = fs.clear_cache() * 1000
    shutil.rmtree(root)
    return mounted, empty, full


def sqlite_survivors(root: Path, synchronous: str, commits: int) -> int:
    backing = root / "backing"
    backing.mkdir(parents=True)
    with lazyfs.lazyfs_mount(backing, root / "mnt", cache_size="64mb", binary=binary()) as fs:
        with subprocess.Popen([sys.executable, "-c", SQLITE_WRITER, str(root / "mnt/state.db"), synchronous,
                               str(commits)], stdout=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None and proc.stdout.readline()
            proc.send_signal(signal.SIGKILL)
        fs.clear_cache()
        survivors = surviving_units(copied(root / "mnt", root / "copy", "state.db"))
    shutil.rmtree(root)
    return survivors


def postgres_figures(args: argparse.Namespace, tmp: Path) -> None:
    from pg_lazyfs import postgres_on_lazyfs
    from test_lazyfs_postgres import commit_units, surviving_units as pg_survivors

    def commit_ms(url: str) -> float:
        import psycopg

        commit_units(url, 1)
        times = []
        with psycopg.connect(url, autocommit=True) as conn:
            for i in range(args.commits):
                started = time.perf_counter()
                conn.execute("INSERT INTO unit VALUES (%s)", (1000 + i,))
                times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times)

    def server_commit_ms(on_lazyfs: bool) -> float:
        with postgres_on_lazyfs(lazyfs=on_lazyfs) as pg:
            pg.start(fsync="on", synchronous_commit="on")
            return commit_ms(pg.url)

    postgres = Pair()
    for _ in range(args.rounds):
        postgres.round(lambda: server_commit_ms(True), lambda: server_commit_ms(False))
    print(f"PostgreSQL commit (fsync on, synchronous_commit on): {commit_row(postgres)}")

    modes = {
        "on": ({"fsync": "on", "synchronous_commit": "on"}, False),
        "synchronous_commit=off": ({"fsync": "on", "synchronous_commit": "off"}, False),
        "SET LOCAL off (last tx)": ({"fsync": "on", "synchronous_commit": "on"}, True),
        "fsync=off": ({"fsync": "off", "synchronous_commit": "on"}, False),
    }
    for name, (settings, set_local) in modes.items():
        outcomes = []
        for _ in range(args.tries):
            with postgres_on_lazyfs() as pg:
                pg.start(**settings)
                commit_units(pg.url, 100, last_set_local_off=set_local)
                pg.power_cut()
                try:
                    pg.start()
                    outcomes.append(str(pg_survivors(pg.url)))
                except RuntimeError:
                    fatal = [line for line in pg.log_tail(8).splitlines() if "FATAL" in line or "PANIC" in line]
                    outcomes.append("no start" + (f" ({fatal[-1].split(':  ', 1)[-1][:60]})" if fatal else ""))
        print(f"PostgreSQL {name}: rows of 100 after the power cut, per try: {', '.join(outcomes)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    reason = skip_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    print(f"load: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="bench_lazyfs_") as tmp_name:
        tmp = Path(tmp_name)
        figures = [mount_and_clear(tmp / f"m{i}") for i in range(args.rounds)]
        mount_s, empty_ms, full_ms = (statistics.median(f[i] for f in figures) for i in range(3))
        print(f"mount {mount_s:.2f} s; clear-cache {empty_ms:.1f} ms (nothing unsynced), "
              f"{full_ms:.1f} ms (50 MB unsynced)")
        sqlite = Pair()
        for i in range(args.rounds):
            backing = tmp / f"backing{i}"
            backing.mkdir()
            with lazyfs.lazyfs_mount(backing, tmp / f"mnt{i}", cache_size="64mb", binary=binary()):
                sqlite.round(lambda: fsync_us(tmp / f"mnt{i}", args.commits) / 1000,
                             lambda: fsync_us(tmp / f"plain{i}", args.commits) / 1000)
        print(f"SQLite commit (WAL, synchronous=FULL): {commit_row(sqlite)}")
        for synchronous in ("FULL", "NORMAL", "OFF"):
            counts = [sqlite_survivors(tmp / f"s{synchronous}{i}", synchronous, 100) for i in range(args.tries)]
            print(f"SQLite synchronous={synchronous}: rows of 100 after the power cut, per try: {counts}")
        if not args.no_postgres:
            postgres_figures(args, tmp)
    print(f"load: {os.getloadavg()[0]:.1f} (1 min)")
    left = lazyfs.lazyfs_mounts(Path(tempfile.gettempdir()))
    if left:
        print(f"a LazyFS mount outlived the benchmark: {left}")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
