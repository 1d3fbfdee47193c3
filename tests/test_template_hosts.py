"""Generated projects on PostgreSQL with hosts that really differ, and the store operated.

A "host" here is what separates real machines as far as the job can tell: its own data
directory and its own host id (<PKG>_HOST_ID, owners.py), sharing only DATABASE_URL and
the simulated external service's directory (<PKG>_EXTERNAL_DIR). All on this machine,
on the throwaway PostgreSQL 15 of tests/pg_server.py (fsync=off: a drill reports exactly
one `durability` failure there, as in test_template_postgres.py).
"""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from suite_share import one_here_rest_in_soak

from advisor import scaffold
from pg_server import create_database
from drill_kills import planned_kills

pytestmark = pytest.mark.slow

#: (strategy, records for the drill): a state-machine order makes three external calls.
HOST_STRATEGIES = [("checkpoint", 600), ("idempotent-retry", 400), ("state-machine", 200)]
#: The drill with two hosts covers event sourcing too (one effects subscriber at a time,
#: by lease, so "both hosts called the service" is no check of sharing there).
DRILL_STRATEGIES = [*HOST_STRATEGIES, ("event-sourcing", 300), ("event-sourcing-idempotent", 300)]
PASSWORD = "hunter2-not-needed"  # the test server trusts local users; the URL carries one to see it redacted


@pytest.fixture
def database(postgres_url: str) -> str:
    """A fresh database on the session's server; its URL carries a password (ignored by trust auth)."""
    return create_database(postgres_url, "hosts").replace("postgres@", f"postgres:{PASSWORD}@")


def generate(tmp_path: Path, strategy: str) -> scaffold.Generated:
    return scaffold.generate(strategy, tmp_path / "job", {"project_name": "Hosts Job", "state_store": "postgresql"})


def cli(generated: scaffold.Generated, *args: object, env: dict[str, str] | None = None,
        answer: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The generated CLI in a child process; ``answer`` is typed into a real pseudo-terminal."""
    full_env = {**os.environ, "PYTHONPATH": str(generated.dest / "src"), **(env or {})}
    argv = [sys.executable, "-m", generated.package, *map(str, args)]
    if answer is None:
        return subprocess.run(argv, cwd=generated.dest, env=full_env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    controller, child_side = pty.openpty()
    try:
        proc = subprocess.Popen(argv, cwd=generated.dest, env=full_env, stdin=child_side,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(child_side)
        os.write(controller, answer.encode())
        out, err = proc.communicate(timeout=timeout)
    finally:
        os.close(controller)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def tables(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
        return {r[0] for r in rows}


@pytest.mark.parametrize("strategy,records", one_here_rest_in_soak(DRILL_STRATEGIES, keep=("state-machine", 200)))
def test_two_hosts_share_one_workload_with_kills(tmp_path: Path, database: str, strategy: str,
                                                 records: int) -> None:
    generated = generate(tmp_path, strategy)
    data = tmp_path / "drill"
    result = cli(generated, "drill", "--hosts", "2", "--workers", "3", "--records", records, "--kills", "4",
                 "--seed", "5", "--work-ms", "0.5", "--json", "--data-dir", data, env={"DATABASE_URL": database})
    report = json.loads(result.stdout)
    assert report["hosts"] == 2 and report["workers"] == 3, report
    assert report["lost"] == 0 and report["duplicate_effects"] == 0 and report["unexpected_effects"] == 0, report
    assert report["kills_landed"] == planned_kills(4, strategy) and report["incomplete_records"] == 0, report
    # fsync=off on the test server: the drill must say so, and find nothing else.
    assert [f["check"] for f in report["failures"]] == ["durability"], report["failures"]
    assert result.returncode == 1
    # Each simulated host had its own data directory; nothing of the state landed in any of them.
    assert sorted(p.name for p in data.glob("host-*")) == ["host-1", "host-2"]
    assert not list(data.rglob("state.db"))
    assert PASSWORD not in result.stdout + result.stderr


@pytest.mark.parametrize("strategy,records", one_here_rest_in_soak(HOST_STRATEGIES, keep=("checkpoint", 600)))
def test_both_hosts_do_part_of_the_work_nothing_lost_or_doubled(tmp_path: Path, database: str, strategy: str,
                                                                records: int) -> None:
    generated = generate(tmp_path, strategy)
    prefix = generated.package.upper() + "_"
    shared = tmp_path / "shared-service"  # where every host reaches the external service
    hosts = [tmp_path / "host-a", tmp_path / "host-b"]
    for d in (shared, *hosts):
        d.mkdir()
    base = {"DATABASE_URL": database, prefix + "EXTERNAL_DIR": str(shared)}
    submitted = cli(generated, "submit-demo", "--records", records, "--work-ms", "2", "--data-dir", hosts[0],
                    env=base)
    assert submitted.returncode == 0, submitted.stderr
    env = os.environ | {"PYTHONPATH": str(generated.dest / "src")}
    workers = [subprocess.Popen([sys.executable, "-m", generated.package, "run", "--data-dir", str(d)],
                                cwd=generated.dest, env=env | base | {prefix + "HOST_ID": f"host-{n}"},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for n, d in enumerate(hosts)]
    for w in workers:
        _, err = w.communicate(timeout=300)
        assert w.returncode == 0, err.decode()
    with sqlite3.connect(shared / "external.db") as conn:
        steps = conn.execute("SELECT COUNT(*), COUNT(DISTINCT record_id || '/' || step) FROM effects").fetchone()
        pids = {r[0] for r in conn.execute("SELECT DISTINCT pid FROM calls WHERE kind = 'apply'")}
    assert steps[0] == steps[1] and steps[0] >= records  # every effect once (state-machine: three per record)
    assert pids == {w.pid for w in workers}  # both hosts called the service: they shared the work
    for d in hosts:  # nothing of the service or the state was written into a host's own directory
        assert not (d / "external.db").exists() and not (d / "state.db").exists()
    status = json.loads(cli(generated, "status", "--json", "--data-dir", hosts[1], env=base).stdout)
    assert status["done"] == status["total"] == records


#: Some of each strategy's tables (event sourcing: the library's among them).
RESET_TABLES = {"checkpoint": {"tasks", "results", "intents", "schema_version"},
                "event-sourcing": {"es_tasks", "es_inputs", "submissions", "schema_version", "stored_events",
                                   "stored_snapshots"}}


@pytest.mark.parametrize("strategy", one_here_rest_in_soak(sorted(RESET_TABLES), keep="event-sourcing"))
def test_reset_status_and_errors_name_the_database(tmp_path: Path, database: str, strategy: str) -> None:
    generated = generate(tmp_path, strategy)
    env, data = {"DATABASE_URL": database}, tmp_path / "data"
    redacted = database.replace(PASSWORD, "***")
    assert cli(generated, "submit-demo", "--records", "20", "--data-dir", data, env=env).returncode == 0
    before = tables(database)
    assert RESET_TABLES[strategy] <= before, before

    status = cli(generated, "status", "--json", "--data-dir", data, env=env)
    assert json.loads(status.stdout)["store"] == f"postgresql {redacted}"
    assert f"store: postgresql {redacted}" in cli(generated, "status", "--data-dir", data, env=env).stdout

    # The workload lives in the database, not in --data-dir: a fresh directory does not help.
    again = cli(generated, "submit-demo", "--records", "20", "--data-dir", tmp_path / "elsewhere", env=env)
    assert again.returncode == 2 and redacted in again.stderr and "reset" in again.stderr
    assert "--data-dir" not in again.stderr and PASSWORD not in again.stderr
    drill = cli(generated, "drill", "--records", "20", "--kills", "0", "--data-dir", tmp_path / "d", env=env)
    assert drill.returncode == 2 and redacted in drill.stderr and "reset" in drill.stderr

    # No terminal, no --yes: refused; "no" typed in a terminal: kept; nothing dropped either way.
    refused = cli(generated, "reset", "--data-dir", data, env=env)
    assert refused.returncode == 2 and "--yes" in refused.stderr and "Traceback" not in refused.stderr
    declined = cli(generated, "reset", "--data-dir", data, env=env, answer="no\n")
    assert declined.returncode == 1 and "cancelled" in declined.stdout, declined.stderr
    assert tables(database) == before
    name = database.rpartition("/")[2]
    assert f"type the database name ({name})" in declined.stdout and PASSWORD not in declined.stdout

    done = cli(generated, "reset", "--yes", "--data-dir", data, env=env)
    assert done.returncode == 0, done.stderr
    assert tables(database) == set()
    assert cli(generated, "submit-demo", "--records", "20", "--data-dir", data, env=env).returncode == 0
    # The store is whole again (event sourcing: the library recreated its tables): the work runs.
    ran = cli(generated, "run", "--data-dir", data, env=env)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(cli(generated, "status", "--json", "--data-dir", data, env=env).stdout)["done"] == 20

    typed = cli(generated, "reset", "--data-dir", data, env=env, answer=f"{name}\n")
    assert typed.returncode == 0 and tables(database) == set(), typed.stderr


def test_a_too_new_schema_on_postgresql_is_refused_naming_the_database(tmp_path: Path, database: str) -> None:
    import psycopg

    generated = generate(tmp_path, "checkpoint")
    env, data = {"DATABASE_URL": database}, tmp_path / "data"
    assert cli(generated, "submit-demo", "--records", "5", "--data-dir", data, env=env).returncode == 0
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("UPDATE schema_version SET version = 999")
    for command in (["status"], ["run"]):
        result = cli(generated, *command, "--data-dir", data, env=env)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert "schema version 999" in result.stderr and database.replace(PASSWORD, "***") in result.stderr


def test_hosts_need_postgresql(tmp_path: Path) -> None:
    generated = scaffold.generate("checkpoint", tmp_path / "job", {"project_name": "Sqlite Hosts"})
    result = cli(generated, "drill", "--hosts", "2", "--workers", "2", "--data-dir", tmp_path / "d",
                 env={"DATABASE_URL": ""})
    assert result.returncode == 2 and "PostgreSQL" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "d").exists()
