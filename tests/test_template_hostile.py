"""A generated project against hostile input and a planted password (its safe_read.py and redact()).

Projects are rendered once per module and run from their source tree (``PYTHONPATH=src``, the
toolkit's environment: psycopg included), so no install is needed. The parsers are also driven
in-process by Hypothesis: arbitrary bytes and structures give only the project's own JobError.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor import scaffold

PASSWORD = "s3cretpw"
URL = f"postgresql://bob:{PASSWORD}@127.0.0.1:1/db"
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> scaffold.Generated:
    return scaffold.generate("checkpoint", tmp_path_factory.mktemp("hostile") / "job",
                             {"project_name": "Hostile Input Job"})


@pytest.fixture(scope="module")
def file_project(tmp_path_factory: pytest.TempPathFactory) -> scaffold.Generated:
    return scaffold.generate("checkpoint", tmp_path_factory.mktemp("hostile") / "filejob",
                             {"project_name": "Hostile File Job", "checkpoint_store": "file"})


@pytest.fixture(scope="module")
def runtime(project: scaffold.Generated):
    """The generated package imported in-process (for the property tests)."""
    sys.path.insert(0, str(project.dest / "src"))
    try:
        yield importlib.import_module(project.package)
    finally:
        sys.path.remove(str(project.dest / "src"))


def run(gen: scaffold.Generated, *args: str, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DATABASE_URL")}
    base["PYTHONPATH"] = str(gen.dest / "src")
    return subprocess.run([sys.executable, "-m", gen.package, *args], cwd=gen.dest, env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def one_line_exit_2(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


# ---- the planted password ----------------------------------------------------------
def every_file_under(folder: Path) -> str:
    return "".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("url", [
    URL,
    f"{URL}?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
    f"host=127.0.0.1 port=1 user=bob password={PASSWORD} dbname=db",  # a key/value DSN
])
def test_a_planted_password_appears_in_no_output_and_no_file(project, tmp_path, url):
    data = tmp_path / "data"
    # run rides out a refused connection (its log line and final error name the URL too): briefly.
    env = {"DATABASE_URL": url, "PGCONNECT_TIMEOUT": "2", f"{project.package.upper()}_STORE_OUTAGE_S": "1"}
    seen = ""
    for args in (["submit-demo", "--records", "20"], ["run"], ["status"], ["status", "--json"],
                 ["drill", "--records", "20", "--kills", "1", "--json"], ["reset"]):
        done = run(project, *args, "--data-dir", str(data), env=env)
        seen += done.stdout + done.stderr
        if args[0] in ("submit-demo", "status"):
            one_line_exit_2(done)
            assert "***" in done.stderr or "only postgresql" in done.stderr
    assert PASSWORD not in seen
    assert PASSWORD not in (every_file_under(data) if data.exists() else "")


def test_tls_options_reach_the_driver_unchanged_and_the_error_hides_the_password(project):
    """What store.connect hands psycopg, parsed by libpq's own rules (conninfo_to_dict)."""
    script = f"""
import json, psycopg
from pathlib import Path
from psycopg.conninfo import conninfo_to_dict
from {project.package}.runtime import store
from {project.package}.settings import Settings
seen = []
def fake_connect(conninfo, **kwargs):
    seen.append(conninfo_to_dict(conninfo))
    raise psycopg.OperationalError("connection refused")
psycopg.connect = fake_connect
url = "{URL}?sslmode=verify-full&sslrootcert=/etc/ssl/certs/db-ca.pem"
try:
    store.connect(Path("data"), Settings.from_env({{"DATABASE_URL": url}}), create=True)
except store.StoreError as exc:
    print(json.dumps({{"seen": seen, "error": str(exc)}}))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=project.dest, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(project.dest / "src")}, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    (params,) = result["seen"]
    assert params["sslmode"] == "verify-full" and params["sslrootcert"] == "/etc/ssl/certs/db-ca.pem"
    assert params["password"] == PASSWORD  # the driver gets it, the message does not
    assert PASSWORD not in result["error"] and "bob:***@127.0.0.1" in result["error"]


def test_a_real_connection_attempt_with_tls_options_fails_in_one_line_without_the_password(project, tmp_path):
    url = f"{URL}?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem&connect_timeout=2"
    err = one_line_exit_2(run(project, "status", "--data-dir", str(tmp_path), env={"DATABASE_URL": url}))
    assert PASSWORD not in err and "sslmode=verify-full" in err


def test_the_readme_shows_tls_for_postgresql_and_rabbitmq(project):
    readme = (project.dest / "README.md").read_text()
    assert "sslmode=verify-full" in readme and "sslrootcert=" in readme and "amqps://" in readme


# ---- submit --file: hostile files, nothing queued -------------------------------------
HOSTILE_INPUTS = [
    ("deep.json", b"[" * 100_000 + b"]" * 100_000, "nested more than"),
    ("deep.jsonl", b'{"record_id": 1}\n{"record_id": 2, "x": ' + b"[" * 50 + b"]" * 50 + b"}\n", ":2: nested"),
    ("binary.json", b"\x89PNG\r\n\x1a\n\x00\x00", "UTF-8"),
    ("latin1.csv", "record_id,name\n1,ok\n2,caf\xe9\n".encode("latin-1"), ":3: not UTF-8"),
    ("nul.csv", b"record_id,name\n1,a\x00b\n", "NUL"),
    ("noid.csv", b"id,name\n1,a\n", "record_id"),
    ("ragged.csv", b"record_id,name\n1,a\n2,b,extra\n", ":3: 2 fields expected"),
    ("noid.json", b'[{"record_id": 1},\n {"name": "no id"}]', ":2: the record has no 'record_id'"),
    ("object.json", b'{"record_id": 1}', "JSON list"),
    ("bad.jsonl", b'{"record_id": 1}\n{"record_id": \n', ":2: not valid JSON"),
    ("hugefield.csv", b"record_id,blob\n1," + b"x" * 200_000 + b"\n", ":2: not valid CSV"),
    ("duplicate.jsonl", b'{"record_id": "a", "value": 1}\n{"record_id": "a", "value": 2}\n', ":2: duplicate record_id"),
    ("wrongtype.csv", b"record_id,value\na,1\nb,x\n", ":3: 'value' must be an integer"),
    ("orders.txt", b'{"record_id": "a", "value": 1}\n', "accepted: .jsonl"),
]


@pytest.mark.parametrize("name, content, word", HOSTILE_INPUTS, ids=[n for n, _, _ in HOSTILE_INPUTS])
def test_hostile_submit_files_exit_2_in_one_line_and_queue_nothing(project, tmp_path, name, content, word):
    path = tmp_path / name
    path.write_bytes(content)
    data = tmp_path / "data"
    err = one_line_exit_2(run(project, "submit", "--file", str(path), "--data-dir", str(data)))
    assert str(path) in err and word in err
    assert not (data / "state.db").exists()  # nothing half queued: the file is refused before the store opens


def test_jsonl_and_csv_inputs_queue_every_record(project, tmp_path):
    rows = [{"record_id": f"r{i}", "value": i} for i in range(25)]  # the demo job's field (job.RECORD_FIELDS)
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=["record_id", "value"])
    writer.writeheader()
    writer.writerows(rows)
    (tmp_path / "in.csv").write_text(buf.getvalue())
    for name in ("in.jsonl", "in.csv"):
        data = tmp_path / f"data-{name}"
        done = run(project, "submit", "--file", str(tmp_path / name), "--data-dir", str(data))
        assert done.returncode == 0, done.stderr
        status = json.loads(run(project, "status", "--json", "--data-dir", str(data)).stdout)
        assert status["total"] == 25


# ---- checkpoint files and JSON state -----------------------------------------------
def test_corrupt_checkpoint_files_are_refused_in_one_line(file_project, tmp_path):
    data = tmp_path / "data"
    assert run(file_project, "submit-demo", "--records", "30", "--data-dir", str(data)).returncode == 0
    assert run(file_project, "run", "--data-dir", str(data)).returncode == 0
    (data / "checkpoint.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (data / "checkpoint.json.1").write_bytes(b"\xff\xfe\x00\x00 binary")
    err = one_line_exit_2(run(file_project, "status", "--data-dir", str(data)))
    assert "checkpoint" in err and "nested more than" in err
    (data / "input.json").write_bytes(b"{" * 10)
    one_line_exit_2(run(file_project, "run", "--data-dir", str(data)))


@FAST
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_as_json_state_give_only_corrupt_state_errors(runtime, raw):
    state = importlib.import_module(f"{runtime.__name__}.runtime.state")
    errors = importlib.import_module(f"{runtime.__name__}.runtime.errors")
    codec = state.StateCodec("progress", 2)
    try:
        codec.loads(raw)
    except errors.JobError:
        pass


values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**9, 10**9), st.text(max_size=10)),
                      lambda inner: st.one_of(st.lists(inner, max_size=3),
                                              st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                      max_leaves=15)


@FAST
@given(data=st.dictionaries(st.text(max_size=8), values, max_size=5))
def test_json_state_round_trips(runtime, data):
    state = importlib.import_module(f"{runtime.__name__}.runtime.state")
    codec = state.StateCodec("progress", 1)
    assert codec.loads(codec.dumps(data)) == data


@FAST
@given(raw=st.binary(max_size=300), suffix=st.sampled_from([".json", ".jsonl", ".csv"]))
def test_arbitrary_bytes_as_an_input_file_give_only_job_errors(runtime, tmp_path_factory, raw, suffix):
    safe_read = importlib.import_module(f"{runtime.__name__}.runtime.safe_read")
    errors = importlib.import_module(f"{runtime.__name__}.runtime.errors")
    path = tmp_path_factory.mktemp("in") / f"input{suffix}"
    path.write_bytes(raw)
    try:
        records = safe_read.read_records(path)
    except errors.JobError as exc:
        assert "\n" not in str(exc)
    else:
        assert records and all("record_id" in r for r in records)


@FAST
@given(rows=st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), values, max_size=3), min_size=1, max_size=8),
       fmt=st.sampled_from([".json", ".jsonl"]))
def test_arbitrary_json_records_round_trip_or_are_refused(runtime, tmp_path_factory, rows, fmt):
    safe_read = importlib.import_module(f"{runtime.__name__}.runtime.safe_read")
    errors = importlib.import_module(f"{runtime.__name__}.runtime.errors")
    records = [{"record_id": f"r{i}", **row} for i, row in enumerate(rows)]
    path = tmp_path_factory.mktemp("in") / f"input{fmt}"
    path.write_text(json.dumps(records) if fmt == ".json" else "\n".join(map(json.dumps, records)))
    try:
        assert safe_read.read_records(path) == records
    except errors.JobError as exc:
        assert "nested more than" in str(exc)


@FAST
@given(rows=st.lists(st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\x00\r"), max_size=8),
                              min_size=2, max_size=2), min_size=1, max_size=8))
def test_csv_records_round_trip(runtime, tmp_path_factory, rows):
    safe_read = importlib.import_module(f"{runtime.__name__}.runtime.safe_read")
    records = [{"record_id": f"r{i}", "a": a, "b": b} for i, (a, b) in enumerate(rows)]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=["record_id", "a", "b"])
    writer.writeheader()
    writer.writerows(records)
    path = tmp_path_factory.mktemp("in") / "input.csv"
    path.write_bytes(buf.getvalue().encode("utf-8"))
    assert safe_read.read_records(path) == records
