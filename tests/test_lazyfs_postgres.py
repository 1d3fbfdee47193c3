"""PostgreSQL under power loss: its data directory on LazyFS (tests/pg_lazyfs.py), the whole server
SIGKILLed, every write it did not fsync dropped, then crash recovery. With fsync and synchronous_commit on,
every acknowledged commit is there; the negative controls (synchronous_commit off for the server or by
SET LOCAL in one transaction, fsync off) must lose commits or the cluster, or this drill proves nothing.

Skipped with the reason where LazyFS cannot run (`make lazyfs`); fails where PostgreSQL is missing.
"""

from __future__ import annotations

import pytest

from lazyfs_support import skip_reason
from pg_server import find_bin

REASON = skip_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"power-loss tests need LazyFS: {REASON}")
COMMITS = 100
# The WAL writer flushes asynchronous commits every wal_writer_delay (200 ms by default). The power cut
# comes about a millisecond after the last commit (with the default, benchmarks/bench_lazyfs.py lost the
# SET LOCAL transaction in 8 of 8 tries); a 10 s delay keeps that flush out of the window altogether, so a
# negative control never passes by luck (what it shows, an unflushed acknowledged commit, is the same).
SLOW_WAL_WRITER = {"wal_writer_delay": "10s"}


@pytest.fixture
def server():
    if not find_bin("initdb"):
        pytest.fail("PostgreSQL is not installed: `make test` installs it (make postgres)")
    from pg_lazyfs import postgres_on_lazyfs

    with postgres_on_lazyfs() as pg:
        yield pg


def commit_units(url: str, count: int, *, last_set_local_off: bool = False) -> None:
    """The table (committed durably in any case), then ``count`` units, one transaction each."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        conn.execute("CREATE TABLE IF NOT EXISTS unit (id int PRIMARY KEY)")
        conn.execute("RESET synchronous_commit")
        for i in range(count):
            with conn.transaction():
                if last_set_local_off and i == count - 1:
                    conn.execute("SET LOCAL synchronous_commit = off")
                conn.execute("INSERT INTO unit VALUES (%s)", (i,))


def surviving_units(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM unit").fetchone()[0])


def test_with_fsync_and_synchronous_commit_on_every_commit_survives_a_power_cut(server):
    server.start(fsync="on", synchronous_commit="on")
    commit_units(server.url, COMMITS)
    server.power_cut()
    server.start()
    assert surviving_units(server.url) == COMMITS


def test_synchronous_commit_off_loses_acknowledged_commits(server):
    server.start(fsync="on", synchronous_commit="off", **SLOW_WAL_WRITER)
    commit_units(server.url, COMMITS)
    server.power_cut()
    server.start()
    assert surviving_units(server.url) < COMMITS


def test_set_local_synchronous_commit_off_loses_that_transaction(server):
    server.start(fsync="on", synchronous_commit="on", **SLOW_WAL_WRITER)
    commit_units(server.url, COMMITS, last_set_local_off=True)
    server.power_cut()
    server.start()
    assert surviving_units(server.url) == COMMITS - 1


def test_fsync_off_loses_commits_or_the_cluster(server):
    server.start(fsync="off", synchronous_commit="on")
    commit_units(server.url, COMMITS)
    server.power_cut()
    try:
        server.start()
    except RuntimeError as exc:  # e.g. an empty postmaster.pid: created, its content never synced
        assert "did not start" in str(exc)
        return
    assert surviving_units(server.url) < COMMITS
