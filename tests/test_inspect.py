"""`advisor inspect`: the recovery point of each strategy, read only.

Fast tests build a data directory by hand from the template's own schema files; the
`slow` ones generate each strategy's project, kill its worker mid-run and drill it.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from suite_share import one_here_rest_in_soak

from advisor.cli import main
from advisor.inspect.report import inspect_dir, recognize, render_text
from advisor.inspect.sources import InspectError, iter_files, open_sqlite_readonly
from advisor.redact import redact
from advisor.paths import templates_dir

SCHEMAS = templates_dir() / "includes" / "schema"
EXTERNAL_SCHEMA = """
CREATE TABLE calls (idempotency_key TEXT, record_id TEXT NOT NULL, step TEXT NOT NULL DEFAULT '',
                    kind TEXT NOT NULL, outcome TEXT NOT NULL, pid INTEGER NOT NULL, at DOUBLE PRECISION NOT NULL);
CREATE TABLE effects (record_id TEXT NOT NULL, step TEXT NOT NULL DEFAULT '', idempotency_key TEXT,
                      applied_at DOUBLE PRECISION NOT NULL, payload TEXT);
"""
#: The documented top-level keys of `advisor inspect --json` (docs/inspect.md): a stable shape.
JSON_KEYS = {"inspect_version", "project", "package", "data_dir", "note", "strategy", "variant", "store",
             "schema_version", "tables", "recovery_points", "more_recovery_points", "summary", "in_doubt",
             "complete", "resume", "external"}


def versioned(kind: str, data: dict[str, Any]) -> str:
    return json.dumps({"kind": kind, "version": 1, "data": data})


def records(n: int, first: int = 0) -> list[dict[str, Any]]:
    return [{"record_id": f"r{i:07d}", "value": i} for i in range(first, first + n)]


def external_db(data_dir: Path, applied: list[tuple[str, str]]) -> None:
    conn = sqlite3.connect(data_dir / "external.db")
    conn.executescript(EXTERNAL_SCHEMA)
    for key, rid in applied:
        conn.execute("INSERT INTO effects VALUES (?, '', ?, 1.0, '{}')", (rid, key))
        conn.execute("INSERT INTO calls VALUES (?, ?, '', 'apply', 'applied', 1, 1.0)", (key, rid))
    conn.commit()
    conn.close()


@pytest.fixture
def checkpoint_dir(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A checkpoint (table) data dir: task 0 at offset 300 of 500 held by a live worker on
    another host, 3 calls prepared (one got through), task 1 not started, one effect doubled.
    Schema version 4 (the input in task_inputs) unless the test asks for 3 (the input in the
    tasks row, as a store not yet migrated keeps it)."""
    version = getattr(request, "param", 4)
    d = tmp_path / "data"
    d.mkdir()
    conn = sqlite3.connect(d / "state.db")
    conn.executescript((SCHEMAS / "checkpoint.sql").read_text())
    if version == 3:
        conn.executescript("DROP TABLE task_inputs; ALTER TABLE tasks ADD COLUMN payload TEXT;"
                           "UPDATE schema_version SET version = 3;")
    now = time.time()
    for n, (status, offset, owner) in enumerate([("running", 300, "otherhost:4242"), ("pending", 0, None)]):
        payload = versioned("task-payload", {"records": records(500, n * 500), "work_ms": 0})
        conn.execute("INSERT INTO tasks (task_id, correlation_id, status, owner, processed_offset, total, "
                     "last_checkpoint_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 500, 3, ?, ?)",
                     (f"demo-{n:05d}", f"c{n}", status, owner, offset, now + n, now))
        if version == 3:
            conn.execute("UPDATE tasks SET payload = ? WHERE task_id = ?", (payload, f"demo-{n:05d}"))
        else:
            conn.execute("INSERT INTO task_inputs (task_id, payload) VALUES (?, ?)", (f"demo-{n:05d}", payload))
    for seq in (300, 301, 302):
        conn.execute("INSERT INTO intents VALUES (?, 'demo-00000', ?, 'prepared', 'i1', ?, NULL)",
                     (f"demo-00000/r{seq:07d}", seq, now))
    conn.commit()
    conn.close()
    applied = [(f"demo-00000/r{i:07d}", f"r{i:07d}") for i in range(301)] + [("again", "r0000005")]
    external_db(d, applied)
    return d


@pytest.fixture
def file_dir(tmp_path: Path) -> Path:
    """A file-variant data dir whose newest generation is corrupt: the previous one is used."""
    d = tmp_path / "data"
    d.mkdir()
    (d / "input.json").write_text(versioned("file-input", {"records": records(10), "work_ms": 0}))
    body = json.dumps({"kind": "file-checkpoint", "version": 3, "data": {
        "offset": 4, "job_state": {"sum": 6, "count": 4}, "prepared": None, "instance_id": None,
        "written_at": None, "claimed_at": None, "claimed_offset": 0}})
    (d / "checkpoint.json.1").write_text(json.dumps({"sha256": hashlib.sha256(body.encode()).hexdigest(), "body": body}))
    (d / "checkpoint.json").write_text(json.dumps({"sha256": "0" * 64, "body": body}))
    external_db(d, [(f"file-job/r{i:07d}", f"r{i:07d}") for i in range(5)])
    return d


# ------------------------------------------------------------------- pure logic
@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://bob:s3cret@db:5432/jobs", "postgresql://bob:***@db:5432/jobs"),  # user:password@
    ("postgres://:pw@db/jobs", "postgres://:***@db/jobs"),  # empty user
    ("postgresql://db/jobs?password=s3cret&sslmode=require", "postgresql://db/jobs?password=***&sslmode=require"),
    ("postgresql://bob@db/jobs", "postgresql://bob@db/jobs"),  # no password: unchanged
])
def test_redact(url: str, shown: str) -> None:
    assert redact(url) == shown


@pytest.mark.parametrize(("tables", "strategy"), [
    (["tasks", "results", "intents", "schema_version"], "checkpoint"),
    (["tasks", "processed", "results", "schema_version"], "idempotent-retry"),
    (["orders", "transitions", "step_log", "schema_version"], "state-machine"),
    (["stored_events", "stored_snapshots", "es_tasks", "es_subscribers", "es_inputs"], "event-sourcing"),
])
def test_recognize(tables: list[str], strategy: str) -> None:
    assert recognize(tables, "state.db") == strategy


def test_recognize_refuses_a_foreign_schema() -> None:
    with pytest.raises(InspectError, match="not a generated project's state"):
        recognize(["users", "orders"], "state.db")


# ------------------------------------------------------------------- behaviour
@pytest.mark.parametrize("checkpoint_dir", [4, 3], indirect=True, ids=["v4", "v3-input-in-task-row"])
def test_checkpoint_recovery_point_in_the_strategys_words(checkpoint_dir: Path) -> None:
    report = inspect_dir(checkpoint_dir)
    text = render_text(report)
    assert "task demo-00000 resumes at record 300 of 500 (checkpoint 3" in text
    assert "owner pid 4242 on host otherhost, lease until" in text
    assert "task demo-00001 not started" in text
    assert "in doubt: 3 call(s) maybe made, not done — 1 got through" in text
    assert "1 (record, step) applied twice (e.g. r0000005 2 times)" in text
    assert "699 of 1000 expected not applied yet" in text
    assert [p["id"] for p in report["recovery_points"] if p["highlight"]] == ["demo-00000"]
    # Version 4 moved the input into task_inputs; a version-3 store is read as it is (699 expected
    # calls missing above: the record ids were read from either place).
    assert report["schema_version"] in (3, 4)
    assert {t["name"]: t["rows"] for t in report["tables"]}["intents"] == 3


def test_a_running_task_without_intents_has_its_next_batch_in_doubt(checkpoint_dir: Path) -> None:
    """An idempotent (or plain) project keeps no intents: the batch past a running task's offset
    is what its holder may have called, checked against external.db like prepared intents."""
    with sqlite3.connect(checkpoint_dir / "state.db") as conn:
        conn.execute("DELETE FROM intents")
    (checkpoint_dir.parent / ".copier-answers.yml").write_text(
        "strategy: checkpoint\npackage_name: demo\neffect_kind: idempotent\nbatch_size: 50\n")
    report = inspect_dir(checkpoint_dir.parent)
    doubt = report["in_doubt"]
    assert [d["record_id"] for d in doubt] == [f"r{i:07d}" for i in range(300, 350)]
    assert sum(d["external"] == "applied" for d in doubt) == 1  # r0000300 got through
    text = render_text(report)
    assert "the calls of records 300..349 may have been made by its holder: re-sent with the same keys" in text
    assert "in doubt: 50 call(s) maybe made, not done — 1 got through" in text
    assert "looking up" not in report["resume"] and "50 call(s) of the batch past the offset" in report["resume"]


def test_json_shape_is_stable(checkpoint_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(checkpoint_dir), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == JSON_KEYS
    assert report["inspect_version"] == 1
    assert set(report["recovery_points"][0]) == {"id", "kind", "status", "done", "total", "highlight", "text",
                                                 "detail"}
    assert set(report["external"]) >= {"present", "applied", "duplicates", "calls", "lookups", "expected",
                                       "missing", "lost", "text"}


def test_file_variant_falls_back_to_the_previous_generation(file_dir: Path) -> None:
    report = inspect_dir(file_dir)
    text = render_text(report)
    assert "checkpoint.json (newest generation): checksum mismatch" in text
    assert "▶ checkpoint.json.1 (previous generation): checksum valid, offset 4 of 10" in text
    assert "the job resumes at record 4 of 10 from checkpoint.json.1 (falling back: checksum mismatch)" in text
    # after a fallback the batch after the older offset may have been called: looked up by key
    assert [d["record_id"] for d in report["in_doubt"]] == [f"r{i:07d}" for i in range(4, 10)]
    assert report["external"]["in_doubt_applied"] == 1  # r0000004 got through


def test_file_variant_shows_a_generation_set_aside_after_a_fallback(file_dir: Path) -> None:
    # The project moves an unreadable newest generation aside once it fell back from it.
    (file_dir / "checkpoint.json").rename(file_dir / "checkpoint.json.damaged")
    report = inspect_dir(file_dir)
    text = render_text(report)
    assert ("checkpoint.json.damaged (set aside): a newest generation a run could not read (checksum mismatch) "
            "and fell back from") in text
    assert "the job resumes at record 4 of 10 from checkpoint.json.1 (falling back: missing)" in text
    assert [p["status"] for p in report["recovery_points"]] == ["missing", "valid", "set aside"]


@pytest.mark.parametrize("wal_open", [True, False], ids=["writer-open-wal-and-shm", "closed-no-wal"])
def test_reading_changes_nothing(checkpoint_dir: Path, wal_open: bool) -> None:
    writer = None
    if wal_open:  # a live worker: -wal and -shm exist and must not be written by the reader
        writer = sqlite3.connect(checkpoint_dir / "state.db", isolation_level=None)
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute("UPDATE tasks SET processed_offset = 400 WHERE task_id = 'demo-00000'")
    else:
        conn = sqlite3.connect(checkpoint_dir / "state.db")
        conn.execute("PRAGMA journal_mode = WAL")  # a WAL database, cleanly closed: no -wal left
        conn.close()
    before = list(iter_files(checkpoint_dir))
    time.sleep(0.05)  # mtimes have a resolution: give a write the chance to show
    report = inspect_dir(checkpoint_dir)
    assert list(iter_files(checkpoint_dir)) == before
    assert report["recovery_points"][0]["done"] == (400 if wal_open else 300)  # the committed WAL is read
    if writer is not None:
        writer.close()


def test_the_readonly_connection_cannot_write(checkpoint_dir: Path) -> None:
    conn = open_sqlite_readonly(checkpoint_dir / "state.db")
    with pytest.raises(sqlite3.Error):
        conn.execute("DELETE FROM tasks")
    conn.close()


def _one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("advisor: error: "), err
    return err[0]


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: None, "does not exist"),  # a missing directory
    (lambda d: d.mkdir(), "neither a generated project"),  # an empty directory
    (lambda d: (d.mkdir(), (d / "state.db").write_bytes(os.urandom(4096))), "not a readable SQLite database"),
    (lambda d: (d.mkdir(), sqlite3.connect(d / "state.db").execute("CREATE TABLE users (id)")),
     "not a generated project's state (tables: users)"),  # a foreign SQLite database
    (lambda d: (d.mkdir(), (d / ".copier-answers.yml").write_text("strategy: checkpoint\npackage_name: x\n")),
     "nothing has run in"),  # a project before its first submit
])
def test_refusals_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     make: Callable[[Path], Any], message: str) -> None:
    d = tmp_path / "dir"
    make(d)
    before = list(iter_files(d)) if d.is_dir() else None
    assert message in _one_error_line(capsys, ["inspect", str(d)])
    assert (list(iter_files(d)) if d.is_dir() else None) == before


def test_postgres_url_is_redacted_in_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("DATABASE_URL", "postgresql://bob:s3cret@127.0.0.1:1/none")
    line = _one_error_line(capsys, ["inspect", str(tmp_path / "data")])
    assert "s3cret" not in line and "bob:***@" in line


# ------------------------------------------------------- generated projects (slow)
STRATEGIES = [("checkpoint", {}), ("checkpoint", {"checkpoint_store": "file"}), ("idempotent-retry", {}),
              ("state-machine", {}), ("event-sourcing", {}), ("event-sourcing-idempotent", {})]


def _run(dest: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(dest / "src")}
    env.pop("DATABASE_URL", None)
    return subprocess.run([sys.executable, "-m", "demo_job", *args], cwd=dest, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _effects(data_dir: Path) -> int:
    if not (data_dir / "external.db").exists():
        return 0
    conn = open_sqlite_readonly(data_dir / "external.db")
    try:
        return int(conn.execute("SELECT COUNT(*) FROM effects").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


def _mid_run(report: dict[str, Any]) -> bool:
    """Some recovery point is strictly between the start and the end."""
    points = report["recovery_points"]
    return any(p["done"] is not None and 0 < p["done"] < (p["total"] or 0) for p in points)


@pytest.mark.slow
@pytest.mark.parametrize(("strategy", "extra"), one_here_rest_in_soak(
    STRATEGIES, keep=("state-machine", {}), also=[("checkpoint", {"checkpoint_store": "file"})],
    ids=[s + ("-file" if e else "") for s, e in STRATEGIES]))
def test_inspect_a_generated_project(tmp_path: Path, strategy: str, extra: dict[str, str]) -> None:
    from advisor.scaffold.generation import generate

    dest = tmp_path / "proj"
    generate(strategy, dest, {"project_name": "demo job", **extra})

    # 1. After a drill (only drills ran): the project's newest drill directory, complete and clean.
    drill = _run(dest, "drill", "--records", "300", "--kills", "2", "--seed", "1", "--json")
    assert drill.stdout, drill.stderr
    report = inspect_dir(dest)
    assert report["note"] == "the newest drill's data directory"
    assert report["complete"], render_text(report)
    assert report["external"]["lost"] == 0 and report["external"]["duplicates"] == 0
    assert report["external"]["missing"] == 0 and report["in_doubt"] == []

    # 2. Before a run: queued, nothing applied.
    data = dest / "data"
    assert _run(dest, "submit-demo", "--records", "600", "--work-ms", "1", "--data-dir", "data").returncode == 0
    report = inspect_dir(dest)
    assert report["data_dir"] == str(data) and report["strategy"] == strategy
    assert not report["complete"] and report["external"]["applied"] == 0
    assert report["external"]["expected"] == 600 * (3 if strategy == "state-machine" else 1)

    # 3. Killed mid-run: the recovery point is between start and end, and reading it changes nothing.
    env = {**os.environ, "PYTHONPATH": str(dest / "src")}
    worker = subprocess.Popen([sys.executable, "-m", "demo_job", "run", "--data-dir", "data"], cwd=dest, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while _effects(data) < 150 and time.monotonic() < deadline and worker.poll() is None:
        time.sleep(0.01)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    before = list(iter_files(data))
    report = inspect_dir(dest)
    assert list(iter_files(data)) == before, "inspect wrote into the data directory"
    text = render_text(report)
    assert not report["complete"], text
    assert report["external"]["applied"] >= 150 and report["external"]["duplicates"] == 0, text
    assert _mid_run(report) or strategy in ("idempotent-retry", "state-machine"), text
    if strategy == "idempotent-retry":
        assert 0 < report["summary"]["tasks"].get("done", 0) < 600, text
    if strategy == "state-machine":
        assert 0 < report["summary"]["orders"].get("done", 0) < 600, text
    assert "resume" in text and any(p["highlight"] for p in report["recovery_points"]), text

    # 4. Run to the end: complete, nothing lost, nothing doubled.
    assert _run(dest, "run", "--data-dir", "data").returncode == 0
    report = inspect_dir(dest)
    assert report["complete"], render_text(report)
    assert (report["external"]["lost"], report["external"]["duplicates"], report["external"]["missing"]) == (0, 0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["checkpoint", "idempotent-retry", "state-machine", "event-sourcing"])
def test_inspect_a_project_on_postgresql(tmp_path: Path, postgres_url: str, strategy: str) -> None:
    """DATABASE_URL as the project understands it: the state from PostgreSQL, read only."""
    import uuid

    import psycopg

    from advisor.scaffold.generation import generate

    name = f"insp_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = f"{postgres_url.rpartition('/')[0]}/{name}"
    dest = tmp_path / "proj"
    generate(strategy, dest, {"project_name": "demo job", "state_store": "postgresql"})
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(dest / "src")}
    for args in (["submit-demo", "--records", "300"], ["run", "--limit", "120"]):
        done = subprocess.run([sys.executable, "-m", "demo_job", *args], cwd=dest, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    report = inspect_dir(dest, environ={"DATABASE_URL": url})
    assert report["store"]["kind"] == "postgresql" and report["strategy"] == strategy
    assert not (dest / "data" / "state.db").exists()
    assert report["external"]["applied"] >= 100 and report["external"]["duplicates"] == 0
    assert not report["complete"] and report["schema_version"] is not None, render_text(report)
    with psycopg.connect(url) as conn:  # the read-only transaction left nothing open or changed
        assert conn.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = %s AND pid != "
                            "pg_backend_pid()", (name,)).fetchone()[0] == 0


def test_a_foreign_external_db_is_refused(checkpoint_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (checkpoint_dir / "external.db").unlink()
    sqlite3.connect(checkpoint_dir / "external.db").execute("CREATE TABLE other (id)")
    assert "not the simulated external service's log" in _one_error_line(capsys, ["inspect", str(checkpoint_dir)])


def test_before_any_external_call(checkpoint_dir: Path) -> None:
    (checkpoint_dir / "external.db").unlink()
    report = inspect_dir(checkpoint_dir)
    assert report["external"]["present"] is False and report["external"]["missing"] == 1000
    assert {d["external"] for d in report["in_doubt"]} == {"not applied"}
    assert not (checkpoint_dir / "external.db").exists()


@pytest.mark.slow
def test_inspect_reads_the_shared_external_service(tmp_path: Path) -> None:
    """<PKG>_EXTERNAL_DIR (several hosts, one service): inspect looks where the project's workers called."""
    from advisor.scaffold.generation import generate

    dest, shared = tmp_path / "proj", tmp_path / "shared"
    shared.mkdir()
    generate("checkpoint", dest, {"project_name": "demo job"})
    env = {**os.environ, "PYTHONPATH": str(dest / "src"), "DEMO_JOB_EXTERNAL_DIR": str(shared)}
    for args in (["submit-demo", "--records", "40"], ["run"]):
        done = subprocess.run([sys.executable, "-m", "demo_job", *args], cwd=dest, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    assert (shared / "external.db").exists() and not (dest / "data" / "external.db").exists()
    report = inspect_dir(dest, environ={"DEMO_JOB_EXTERNAL_DIR": str(shared)})
    assert report["external"]["present"] and report["external"]["applied"] == 40, report["external"]
    assert inspect_dir(dest, environ={})["external"]["present"] is False  # without it: the data dir's, none
