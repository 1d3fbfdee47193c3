"""Generated projects on PostgreSQL: the same code, DATABASE_URL set, two workers killed at random.

Each test gets its own database on the session's throwaway server (tests/pg_server.py),
so the generated tables never meet anyone else's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from suite_share import one_here_rest_in_soak

from advisor import scaffold
from pg_server import create_database
from drill_kills import planned_kills

pytestmark = pytest.mark.slow


@pytest.fixture
def fresh_database(postgres_url: str) -> str:
    return create_database(postgres_url, "gen")


# (strategy, records): a state-machine order makes three external calls, so fewer of them.
# The event-sourcing strategies on PostgreSQL: tests/test_template_pg_es.py (three workers, PostgreSQL crashed).
PG_STRATEGIES = [("checkpoint", 1000), ("idempotent-retry", 600), ("state-machine", 300)]


@pytest.mark.parametrize("strategy,records", one_here_rest_in_soak(PG_STRATEGIES, keep=("checkpoint", 1000)))
def test_drill_on_postgresql_with_two_workers(tmp_path: Path, fresh_database: str, strategy: str,
                                              records: int) -> None:
    generated = scaffold.generate(strategy, tmp_path / "job",
                                  {"project_name": "Pg Job", "state_store": "postgresql"})
    env = {**os.environ, "DATABASE_URL": fresh_database, "PYTHONPATH": str(generated.dest / "src")}
    result = subprocess.run(
        [sys.executable, "-m", generated.package, "drill", "--records", str(records), "--kills", "4", "--seed", "3",
         "--workers", "2", "--work-ms", "0.5", "--json", "--data-dir", str(tmp_path / "data")],
        cwd=generated.dest, env=env, capture_output=True, text=True, timeout=300)
    report = json.loads(result.stdout)
    assert report["lost"] == 0 and report["duplicate_effects"] == 0, report
    assert report["kills"] == planned_kills(4, strategy) and report["incomplete_records"] == 0, report
    # The throwaway server runs with fsync=off (tests/pg_server.py, for speed). The drill reads
    # the server's settings back on every worker connection and must say so: its only failure.
    assert [f["check"] for f in report["failures"]] == ["durability"], report["failures"]
    assert "fsync = off" in report["failures"][0]["message"], report["failures"]
    assert report["durability"]["state_store"] == "postgresql", report["durability"]
    assert result.returncode == 1 and report["ok"] is False
    # The state really is in PostgreSQL: no state.db was written.
    assert not (tmp_path / "data" / "state.db").exists()
    status = subprocess.run([sys.executable, "-m", generated.package, "status", "--json", "--data-dir",
                             str(tmp_path / "data")], cwd=generated.dest, env=env, capture_output=True, text=True)
    counts = json.loads(status.stdout)
    # Every unit is done; a resubmission under a new correlation id may be new work (idempotent
    # retry queues it again, its keys keep the effects single), so there may be more than the input.
    assert counts["done"] == counts["total"] >= records, counts


def test_unreachable_postgresql_is_a_clear_error(tmp_path: Path) -> None:
    generated = scaffold.generate("checkpoint", tmp_path / "job", {"project_name": "Pg Down Job"})
    env = {**os.environ, "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2",
           "PYTHONPATH": str(generated.dest / "src")}
    result = subprocess.run([sys.executable, "-m", generated.package, "submit-demo", "--records", "5",
                             "--data-dir", str(tmp_path / "data")], env=env, capture_output=True, text=True)
    assert result.returncode == 2 and "cannot connect" in result.stderr and "Traceback" not in result.stderr


SUBMIT_ONCE = """
import json, sys
from {pkg}.runtime.submission import submit_records
ids = submit_records([{{"record_id": f"o-{{i}}", "value": i}} for i in range(40)], data_dir=sys.argv[1],
                     correlation_id="delivered-four-times")
print(json.dumps({{"ids": list(ids), "added": ids.added}}))
"""


@pytest.mark.parametrize("strategy", [s for s, _ in PG_STRATEGIES])
def test_one_submission_delivered_four_times_at_once_is_queued_once(tmp_path: Path, fresh_database: str,
                                                                     strategy: str) -> None:
    generated = scaffold.generate(strategy, tmp_path / "job", {"project_name": "Pg Submit Job"})
    env = {**os.environ, "DATABASE_URL": fresh_database, "PYTHONPATH": str(generated.dest / "src")}
    data = str(tmp_path / "data")
    code = SUBMIT_ONCE.format(pkg=generated.package)
    # Four processes at once: on PostgreSQL the loser of the correlation id's insert waits for
    # the winner's commit and answers with its task ids (correlation.claim).
    procs = [subprocess.Popen([sys.executable, "-c", code, data], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        answers.append(json.loads(out))
    assert sum(a["added"] for a in answers) == 1, answers
    assert len({json.dumps(a["ids"]) for a in answers}) == 1 and answers[0]["ids"], answers
    run = subprocess.run([sys.executable, "-m", generated.package, "run", "--data-dir", data], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    status = subprocess.run([sys.executable, "-m", generated.package, "status", "--json", "--data-dir", data],
                            env=env, capture_output=True, text=True)
    assert json.loads(status.stdout)["total"] == json.loads(status.stdout)["done"] == 40


OPEN_LEDGER_AT = """
import sys, time
from pathlib import Path
from {pkg}.runtime.effects import Ledger
from {pkg}.runtime.store import connect
from {pkg}.settings import Settings
store = connect(Path(sys.argv[1]), Settings.from_env(), create=True)
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # connected: every process opens it at once
Ledger(store).close()
"""


def test_workers_starting_at_once_on_a_fresh_database_create_the_call_ledger_once(tmp_path: Path,
                                                                                   fresh_database: str) -> None:
    """The plain calls' ledger lives outside the versioned schema; without the schema lock, workers
    that create it at the same moment race on PostgreSQL's catalog and all but one die with a
    unique violation (two workers of a fresh deploy did)."""
    generated = scaffold.generate("checkpoint", tmp_path / "job", {"project_name": "Pg Ledger Job",
                                                                   "effect_kind": "plain"})
    env = {**os.environ, "DATABASE_URL": fresh_database, "PYTHONPATH": str(generated.dest / "src")}
    code = OPEN_LEDGER_AT.format(pkg=generated.package)
    at = f"{time.time() + 3:.3f}"  # after every process has imported the package
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "data"), at], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    errors = [err for proc in procs for _, err in [proc.communicate(timeout=120)] if proc.returncode != 0]
    assert errors == [], errors[0][-600:]


OUTAGE_SWEEP = """
import sys, time
import psycopg
from pathlib import Path
from {pkg}.drill import store_away
url = sys.argv[1]
holder = store_away.take(url, Path(sys.argv[2]), store_away.Spells())
assert holder is not None
late_worker = psycopg.connect(url, autocommit=True, application_name=store_away.WORKER_APP)
bystander = psycopg.connect(url, autocommit=True, application_name="someone-else")
time.sleep(store_away.SWEEP_S * 2)
holder.sweep()
def alive(conn):
    try:
        conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False
print(alive(late_worker), alive(bystander), holder.cuts)
holder.release()
"""


def test_the_drills_outage_cuts_a_worker_connection_opened_while_it_holds_the_store(tmp_path: Path,
                                                                                     fresh_database: str) -> None:
    """The outage's locks keep one transaction open, and PostgreSQL reads pg_stat_activity once per
    transaction: each sweep must look again, or a worker that reconnects mid-outage waits uncut."""
    generated = scaffold.generate("checkpoint", tmp_path / "job", {"project_name": "Pg Sweep Job"})
    env = {**os.environ, "PYTHONPATH": str(generated.dest / "src")}
    result = subprocess.run([sys.executable, "-c", OUTAGE_SWEEP.format(pkg=generated.package), fresh_database,
                             str(tmp_path / "state.db")], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    late_worker_alive, bystander_alive, cuts = result.stdout.split()
    assert (late_worker_alive, bystander_alive) == ("False", "True") and int(cuts) >= 1, result.stdout
