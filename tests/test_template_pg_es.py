"""Event sourcing on PostgreSQL: both generated variants, DATABASE_URL set.

* three workers killed at random (the drill) lose nothing and double nothing;
* PostgreSQL itself crashed (``pg_ctl stop -m immediate``) under three running workers,
  started again seconds later: the workers finish on their own, nothing lost or doubled;
* the library seam es_store.py relies on, checked on PostgreSQL;
* the schema version check, on PostgreSQL.

The drill tests share the session's throwaway server (tests/pg_server.py), one fresh
database each; the crash test crashes a server of its own (tests/pg_crash.py). The
same crash under the CLI's `run` (outage.py riding it out, its log lines) is in
tests/test_template_pg_outage.py, with the other strategies.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from suite_share import one_here_rest_in_soak

from advisor import scaffold
from pg_crash import crashable_postgres
from pg_server import create_database
from drill_kills import planned_kills

pytestmark = pytest.mark.slow

VARIANTS = ["event-sourcing", "event-sourcing-idempotent"]


@pytest.fixture
def fresh_database(postgres_url: str) -> str:
    return create_database(postgres_url, "es")


def generate(strategy: str, dest: Path) -> scaffold.Generated:
    return scaffold.generate(strategy, dest, {"project_name": "Pg Es Job", "state_store": "postgresql"})


def cli(generated: scaffold.Generated, url: str, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(generated.dest / "src")}
    return subprocess.run([sys.executable, "-m", generated.package, *argv], cwd=generated.dest, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("strategy", one_here_rest_in_soak(VARIANTS, keep="event-sourcing"))
def test_three_worker_sigkill_drill_on_postgresql(tmp_path: Path, fresh_database: str, strategy: str) -> None:
    generated = generate(strategy, tmp_path / "job")
    assert "eventsourcing[postgres]==" in (generated.dest / "pyproject.toml").read_text()
    result = cli(generated, fresh_database, "drill", "--records", "600", "--kills", "5", "--seed", "7",
                 "--workers", "3", "--work-ms", "0.5", "--json", "--data-dir", str(tmp_path / "data"))
    report = json.loads(result.stdout)
    assert report["lost"] == 0 and report["duplicate_effects"] == 0, report
    assert report["kills"] == planned_kills(5, strategy) and report["incomplete_records"] == 0, report
    # fsync=off on the throwaway server (tests/pg_server.py): the drill reads it back and says so.
    assert [f["check"] for f in report["failures"]] == ["durability"], report["failures"]
    assert report["durability"]["state_store"] == "postgresql", report["durability"]
    assert result.returncode == 1 and report["ok"] is False
    assert not (tmp_path / "data" / "state.db").exists()  # events and positions live in PostgreSQL
    import psycopg

    with psycopg.connect(fresh_database) as conn:
        events = conn.execute("SELECT COUNT(*) FROM stored_events").fetchone()
    assert events is not None and events[0] >= 600  # one event per record, at least


def test_library_seam_holds_on_postgresql(tmp_path: Path, fresh_database: str) -> None:
    """The generated seam test, run against PostgreSQL: pinned version, and the snapshot
    written in the events' transaction by the PostgreSQL recorder's hook."""
    generated = generate("event-sourcing", tmp_path / "job")
    env = {**os.environ, "TEST_DATABASE_URL": fresh_database, "PYTHONPATH": str(generated.dest / "src")}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "seam",
                             "tests/test_event_sourcing.py"], cwd=generated.dest, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout, result.stdout  # sqlite AND postgresql


def test_schema_version_is_checked_on_postgresql(tmp_path: Path, fresh_database: str) -> None:
    generated = generate("event-sourcing", tmp_path / "job")
    data = str(tmp_path / "data")
    assert cli(generated, fresh_database, "submit-demo", "--records", "20", "--data-dir", data).returncode == 0
    import psycopg

    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    result = cli(generated, fresh_database, "status", "--data-dir", data)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "schema version 99, newer than this program's" in result.stderr


# ------------------------------------------------------------------ PostgreSQL crashed mid-run
#: One worker process that does what `run` does on a store outage: calls the strategy's
#: run again in the same process (fresh Application and connections), after a pause.
#: (The CLI's `run` wraps it the same way; this drives the strategy directly so that the
#: test holds the ES strategy's side of the contract: outages surface as StoreUnavailable,
#: and a re-entered run resumes from the committed state.)
WORKER = """
import sys, time
from pathlib import Path
from {pkg}.runtime.errors import StoreUnavailable
from {pkg}.settings import Settings
from {pkg}.runtime.shutdown import Shutdown
from {pkg}.runtime.strategy import Context, load

ctx = Context(data_dir=Path(sys.argv[1]), settings=Settings.from_env(), strategy=load())
outages, deadline = 0, time.monotonic() + 120
while True:
    try:
        code = ctx.strategy.run(ctx, Shutdown(5))
        break
    except StoreUnavailable as exc:
        outages += 1
        print(f"outage {{outages}}: {{exc}}", file=sys.stderr, flush=True)
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)
print(f"outages={{outages}}", flush=True)
sys.exit(code)
"""


def appended(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM stored_events").fetchone()[0])  # type: ignore[index]


def started_work(url: str, submitted: int, timeout: float = 120) -> None:
    """Return once the workers have appended events beyond the ``submitted`` ones."""
    deadline = time.monotonic() + timeout
    while appended(url) <= submitted:
        if time.monotonic() > deadline:
            raise AssertionError(f"the workers appended nothing in {timeout:g} s")
        time.sleep(0.05)


@pytest.mark.parametrize("strategy", one_here_rest_in_soak(VARIANTS, keep="event-sourcing-idempotent"))
def test_workers_finish_through_a_postgresql_crash(tmp_path: Path, strategy: str) -> None:
    records = 400
    generated = generate(strategy, tmp_path / "job")
    data = tmp_path / "data"
    with crashable_postgres() as server:
        submitted = cli(generated, server.url, "submit-demo", "--records", str(records), "--work-ms", "8",
                        "--data-dir", str(data))
        assert submitted.returncode == 0, submitted.stderr
        env = {**os.environ, "DATABASE_URL": server.url, "PYTHONPATH": str(generated.dest / "src")}
        code = WORKER.format(pkg=generated.package)
        submitted_events = appended(server.url)
        workers = [subprocess.Popen([sys.executable, "-c", code, str(data)], cwd=generated.dest, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for _ in range(3)]
        try:
            # The crash must land while the workers are appending and calling out: wait for their
            # first appends (a fixed pause was spent importing the library on a loaded machine,
            # and the crash then came and went before any worker had connected).
            started_work(server.url, submitted_events)
            assert all(w.poll() is None for w in workers), "the workers finished before the crash"
            server.crash()
            time.sleep(3)
            server.start()
            outputs = [w.communicate(timeout=240) for w in workers]
        finally:
            for w in workers:
                if w.poll() is None:
                    w.kill()
                    w.wait()
        codes = [w.returncode for w in workers]
        assert codes == [0, 0, 0], outputs
        outages = sum(int(out.rsplit("outages=", 1)[1]) for out, _ in outputs)
        assert outages >= 3, outputs  # every worker really lost its store, and came back
        status = cli(generated, server.url, "status", "--json", "--data-dir", str(data))
        assert json.loads(status.stdout)["done"] == records, status.stdout
    conn = sqlite3.connect(data / "external.db")
    try:
        effects, distinct = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT record_id || '/' || step) FROM effects").fetchone()
        records_applied = conn.execute("SELECT COUNT(DISTINCT record_id) FROM effects").fetchone()[0]
        # The default call kind is idempotent: a call cut off by the crash is sent again with its
        # key and the service acknowledges it as a duplicate instead of applying it twice.
        resent = conn.execute("SELECT COUNT(*) FROM calls WHERE kind = 'apply' AND outcome = 'duplicate'").fetchone()[0]
    finally:
        conn.close()
    assert records_applied == records  # nothing lost
    assert effects == distinct  # nothing doubled
    promise = subprocess.run(
        [sys.executable, "-c", f"from {generated.package}.event_sourcing import REDONE_CALLS_PER_KILL as n; print(n)"],
        cwd=generated.dest, env=env, capture_output=True, text=True, check=True)
    # At most the unit in flight each time a worker lost its store (as after a kill).
    assert resent <= int(promise.stdout) * outages, (resent, outages)
