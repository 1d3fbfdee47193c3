"""Generated projects ride out a PostgreSQL crash: three workers, the server killed mid-run.

The server (tests/pg_crash.py) is stopped with ``pg_ctl stop -m immediate`` while the
workers run, left down for a few seconds and started again. Nobody restarts the
workers: each must notice the outage, wait, resume from the committed state and
finish with exit 0, with every effect applied exactly once. An outage longer than
``store_outage_s`` ends the worker with exit code 4 and a message naming the
database without its password.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from suite_share import one_here_rest_in_soak

from advisor import scaffold
from pg_crash import CrashablePostgres, crashable_postgres
from drill_kills import planned_kills

pytestmark = pytest.mark.slow

#: (strategy, records, work-ms): about ten seconds of work for three workers (event
#: sourcing: fewer records, its effects subscriber trailing the commands keeps the
#: workers busy past the crash).
OUTAGE_STRATEGIES = [("checkpoint", 1500, 6.0), ("idempotent-retry", 600, 15.0), ("state-machine", 300, 10.0),
                     ("event-sourcing", 400, 15.0), ("event-sourcing-idempotent", 400, 15.0)]
DOWN_S = 2.5  # how long the server stays down
EXIT_STORE_UNAVAILABLE = 4  # errors.py of the generated project


@pytest.fixture(scope="module")
def server() -> Iterator[CrashablePostgres]:
    with crashable_postgres() as pg:
        yield pg


@pytest.fixture
def database(server: CrashablePostgres) -> str:
    import psycopg

    if not server.running():  # a test that failed half-way left it down
        server.start()
    name = f"outage_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.url.rpartition("/")[0] + "/" + name


def generate(tmp_path: Path, strategy: str) -> scaffold.Generated:
    return scaffold.generate(strategy, tmp_path / "job", {"project_name": "Outage Job", "state_store": "postgresql"})


def project_env(generated: scaffold.Generated, url: str, **settings: object) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(generated.dest / "src")}
    for name in list(env):
        if name.startswith(generated.package.upper() + "_"):
            del env[name]
    env.update({f"{generated.package.upper()}_{k.upper()}": str(v) for k, v in settings.items()})
    return env


def cli(generated: scaffold.Generated, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", generated.package, *args], cwd=generated.dest, env=env,
                          capture_output=True, text=True, timeout=300)


def applied(data_dir: Path) -> int:
    """Effects at the simulated external service so far (it lives in SQLite, not in PostgreSQL)."""
    path = data_dir / "external.db"
    if not path.exists():
        return 0
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM effects").fetchone()[0])
    except sqlite3.OperationalError:  # the table is not there yet
        return 0
    finally:
        conn.close()


def crash_when(server: CrashablePostgres, data_dir: Path, at_effects: int, *, timeout_s: float = 120,
               mode: str = "immediate") -> bool:
    """Crash the server once ``at_effects`` effects are applied, keep it down DOWN_S, start it."""
    deadline = time.monotonic() + timeout_s
    while applied(data_dir) < at_effects:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    server.crash(mode)
    time.sleep(DOWN_S)
    server.start()
    return True


def verify(generated: scaffold.Generated, env: dict[str, str], data_dir: Path, records: int) -> dict:
    """The generated project's own check of the external service: lost, duplicate_effects, ..."""
    code = (f"import json; from pathlib import Path; from {generated.package}.job import demo_records, STEPS; "
            f"from {generated.package}.runtime.external import verify; "
            f"expected = {{(str(r['record_id']), s) for r in demo_records({records}) for s in STEPS}}; "
            f"print(json.dumps(verify(Path({str(data_dir)!r}), expected)))")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def expected_effects(strategy: str, records: int) -> int:
    return records * (3 if strategy == "state-machine" else 1)


@pytest.mark.parametrize("strategy,records,work_ms,mode", one_here_rest_in_soak([
    *((*case, "immediate") for case in OUTAGE_STRATEGIES),
    ("checkpoint", 1500, 6.0, "fast"),  # an orderly shutdown: sessions get AdminShutdown (57P01)
], keep=("event-sourcing-idempotent", 400, 15.0, "immediate")))
def test_three_workers_ride_out_a_postgresql_crash(tmp_path: Path, server: CrashablePostgres, database: str,
                                                   strategy: str, records: int, work_ms: float, mode: str) -> None:
    generated = generate(tmp_path, strategy)
    env = project_env(generated, database, store_outage_s=60, task_size=100)
    data_dir = tmp_path / "data"
    submitted = cli(generated, env, "submit-demo", "--records", str(records), "--work-ms", str(work_ms),
                    "--data-dir", str(data_dir))
    assert submitted.returncode == 0, submitted.stderr
    logs = [tmp_path / f"worker-{i}.log" for i in range(3)]
    workers = []
    for log in logs:
        with open(log, "wb") as out:
            workers.append(subprocess.Popen([sys.executable, "-m", generated.package, "run", "--data-dir",
                                             str(data_dir)], cwd=generated.dest, env=env,
                                            stdin=subprocess.DEVNULL, stdout=out, stderr=out))
    try:
        crashed = crash_when(server, data_dir, expected_effects(strategy, records) // 3, mode=mode)
        codes = [w.wait(timeout=240) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    texts = [log.read_text(errors="replace") for log in logs]
    assert crashed, "the workers never got a third of the way: " + "\n".join(texts)
    # Every worker finished on its own, none was restarted.
    assert codes == [0, 0, 0], "\n---\n".join(texts)
    # Each worker touches the store at least every batch: each one met the outage and said so.
    riders = [t for t in texts if "unreachable" in t and "retrying for up to 60 s" in t]
    assert len(riders) == 3, "not every worker said it was riding out the outage:\n" + "\n---\n".join(texts)
    assert all("state store reachable again after" in t for t in riders), "\n---\n".join(riders)
    assert all("Traceback" not in t for t in texts), "\n---\n".join(texts)
    effects = verify(generated, env, data_dir, records)
    assert effects["lost"] == 0 and effects["duplicate_effects"] == 0, effects
    assert effects["applied"] == expected_effects(strategy, records), effects
    status = cli(generated, env, "status", "--json", "--data-dir", str(data_dir))
    assert json.loads(status.stdout)["done"] == records, status.stdout


@pytest.mark.parametrize("strategy,records,work_ms", one_here_rest_in_soak(OUTAGE_STRATEGIES,
                                                                         keep=("idempotent-retry", 600, 15.0)))
def test_sigkill_drill_with_postgresql_crashed_mid_run(tmp_path: Path, server: CrashablePostgres, database: str,
                                                       strategy: str, records: int, work_ms: float) -> None:
    generated = generate(tmp_path, strategy)
    env = project_env(generated, database, store_outage_s=60, task_size=100)
    data_dir = tmp_path / "drill"
    outcome: dict[str, bool] = {}
    # The crash lands after the drill's first kills have begun (they start at 5 % of the effects).
    crasher = threading.Thread(target=lambda: outcome.update(
        crashed=crash_when(server, data_dir, expected_effects(strategy, records) * 2 // 5)))
    crasher.start()
    try:
        result = cli(generated, env, "drill", "--records", str(records), "--kills", "4", "--seed", "5",
                     "--workers", "3", "--work-ms", str(work_ms / 3), "--json", "--data-dir", str(data_dir))
    finally:
        crasher.join()
    assert outcome.get("crashed"), result.stderr
    report = json.loads(result.stdout)
    assert report["lost"] == 0 and report["duplicate_effects"] == 0, report
    assert report["incomplete_records"] == 0 and report["kills"] == planned_kills(4, strategy), report
    # fsync=off on the throwaway server: the drill's one expected failure (as in test_template_postgres.py).
    assert [f["check"] for f in report["failures"]] == ["durability"], report["failures"]
    workers_log = (data_dir / "drill-workers.log").read_text(errors="replace")
    assert "retrying for up to 60 s" in workers_log, workers_log[-3000:]
    # The drill saw the ride-outs (each restarts a unit in flight, allowed like a kill).
    assert report["store_outages_ridden"] >= 1, report


@pytest.mark.parametrize("strategy", one_here_rest_in_soak(["checkpoint", "event-sourcing"], keep="checkpoint"))
def test_an_outage_longer_than_the_limit_exits_4_naming_the_database(tmp_path: Path, server: CrashablePostgres,
                                                                     database: str, strategy: str) -> None:
    generated = generate(tmp_path, strategy)
    # A password in the URL (trust authentication ignores it): it must never be printed.
    url = database.replace("postgres@", "postgres:s3cret-pw@")
    env = project_env(generated, url, store_outage_s=3)
    data_dir = tmp_path / "data"
    assert cli(generated, env, "submit-demo", "--records", "200", "--work-ms", "20",
               "--data-dir", str(data_dir)).returncode == 0
    worker = subprocess.Popen([sys.executable, "-m", generated.package, "run", "--data-dir", str(data_dir)],
                              cwd=generated.dest, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while applied(data_dir) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        started = time.monotonic()  # before: the workers may see the cut before pg_ctl returns
        server.crash()
        out, err = worker.communicate(timeout=60)
        waited = time.monotonic() - started
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        server.start()
    assert worker.returncode == EXIT_STORE_UNAVAILABLE, err
    assert "retrying for up to 3 s" in err and "still unreachable after 3 s" in err, err
    assert "postgres:***@127.0.0.1" in err and "s3cret-pw" not in err and "Traceback" not in err, err
    assert waited >= 3, (waited, err)  # it did wait the configured time before giving up
    # ... and not much more: no driver or library retries of its own on top of it (event
    # sourcing's library would retry for about half a minute before `run` heard of it).
    assert waited < 3 + 8, (waited, err)
    # Nothing was lost: a worker started once the server is back finishes the job.
    env_ok = project_env(generated, url)
    assert cli(generated, env_ok, "run", "--data-dir", str(data_dir)).returncode == 0
    effects = verify(generated, env_ok, data_dir, 200)
    assert effects["lost"] == 0 and effects["duplicate_effects"] == 0 and effects["applied"] == 200, effects


@pytest.fixture(scope="module")
def generated_store(tmp_path_factory: pytest.TempPathFactory):
    """store.py of a generated PostgreSQL project, imported in-process."""
    import importlib

    generated = scaffold.generate("checkpoint", tmp_path_factory.mktemp("outage") / "job",
                                  {"project_name": "Outage Sorting Job", "state_store": "postgresql"})
    sys.path.insert(0, str(generated.dest / "src"))
    try:
        yield importlib.import_module(f"{generated.package}.runtime.store")
    finally:
        sys.path.remove(str(generated.dest / "src"))


def _errors():
    import psycopg
    from psycopg import errors as e

    refused = ('connection failed: connection to server at "127.0.0.1", port 5432 failed: Connection refused\n'
               '\tIs the server running on that host and accepting TCP/IP connections?')
    return [
        # (error, while connecting?, an outage to ride out?)
        (e.AdminShutdown("terminating connection due to administrator command"), False, True),  # pg_ctl -m fast
        (e.CrashShutdown("terminating connection because of crash of another server process"), False, True),
        (e.CannotConnectNow("the database system is starting up"), False, True),
        (e.TooManyConnections("sorry, too many clients already"), False, True),
        (e.ConnectionFailure("connection failure"), False, True),  # SQLSTATE class 08
        (psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly"), False, True),
        (psycopg.OperationalError("the connection is closed"), False, True),  # using it after the cut
        (psycopg.OperationalError(refused), True, True),  # down, restarting
        (psycopg.OperationalError("connection failed: FATAL:  the database system is not yet accepting "
                                  "connections"), True, True),  # recovering after a crash
        (psycopg.OperationalError('connection failed: FATAL:  database "jobz" does not exist'), True, False),
        (psycopg.OperationalError('connection failed: FATAL:  password authentication failed for user "bob"'),
         True, False),
        (psycopg.OperationalError("failed to resolve host 'db-hots': Name or service not known"), True, False),
        (e.InvalidPassword("password authentication failed"), False, False),  # 28P01: a mistake
        (e.SerializationFailure("could not serialize access"), False, False),  # 40001: not an outage
        (e.QueryCanceled("canceling statement due to statement timeout"), False, False),
        (e.UniqueViolation("duplicate key value"), False, False),  # a bug, not an outage
    ]


def test_postgresql_errors_are_sorted_into_outages_and_mistakes(generated_store) -> None:
    for error, connecting, outage in _errors():
        assert generated_store.postgresql_unavailable(error, connecting=connecting) is outage, error
