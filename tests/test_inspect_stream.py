"""`advisor inspect` on a stream-checkpoint project: the sink's tables (built with the generated
project's own schema.sql) and Spark's checkpoint location (offsets/, commits/, sources/0/ as Spark
writes them), read as "where would it resume after a kill, and why"."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.inspect.report import inspect_dir, render_text

FILES, PER_FILE = 5, 10


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from advisor.scaffold.generation import generate

    dest = tmp_path_factory.mktemp("stream") / "clicks"
    generate("stream-checkpoint", dest, {"project_name": "clicks"})
    return dest


def build(project: Path, tmp: Path, *, planned: int, finished: int, sink_committed: int) -> Path:
    """A data directory: FILES landing files; Spark planned batches 0..planned-1 and finished
    0..finished-1; the sink committed batches 0..sink_committed-1 (with their results)."""
    data = tmp / "data"
    landing = data / "landing"
    landing.mkdir(parents=True)
    conn = sqlite3.connect(data / "state.db")
    conn.executescript((project / "src" / "clicks" / "schema.sql").read_text())
    for f in range(FILES):
        path = landing / f"demo-{f:06d}.jsonl"
        path.write_text("".join(json.dumps({"record_id": f"r{f * PER_FILE + i:07d}", "value": i}) + "\n"
                                for i in range(PER_FILE)))
        conn.execute("INSERT INTO stream_files VALUES (?, ?, 0, 1.0)", (str(path.resolve()), PER_FILE))
    for b in range(sink_committed):
        conn.execute("INSERT INTO stream_batches VALUES (?, ?, 2.0)", (b, PER_FILE))
        conn.executemany("INSERT INTO stream_results VALUES (?, ?, '{}', 2.0)",
                         [(f"r{b * PER_FILE + i:07d}", b) for i in range(PER_FILE)])
    conn.commit()
    conn.close()
    checkpoint = data / "spark-checkpoint"
    for sub in ("offsets", "commits", "sources/0"):
        (checkpoint / sub).mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"5c2f0e1a-0000-4000-8000-000000000000"}')
    for b in range(planned):
        (checkpoint / "offsets" / str(b)).write_text(
            'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{}}\n' + json.dumps({"logOffset": b}))
        (checkpoint / "sources" / "0" / str(b)).write_text(
            "v1\n" + json.dumps({"path": f"file://{(landing / f'demo-{b:06d}.jsonl').resolve()}",
                                 "timestamp": 1700000000000, "batchId": b}))
    for b in range(finished):
        (checkpoint / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return data


def test_killed_before_the_sink_committed_replays_the_batch(project: Path, tmp_path: Path) -> None:
    data = build(project, tmp_path, planned=3, finished=2, sink_committed=2)
    report = inspect_dir(data)
    text = render_text(report)
    assert report["strategy"] == "stream-checkpoint", text
    assert "offsets logged up to batch 2, commit log up to batch 1" in text, text
    assert "batch 2 (demo-000002.jsonl) is replayed on restart and the sink has not committed it" in text, text
    assert len(report["in_doubt"]) == PER_FILE and report["in_doubt"][0]["key"] == "r0000020:", text
    assert report["resume"].startswith("the next run replays batch 2 whole"), text
    assert "then plans batch 3 from the 2 landing file(s) not read yet" in report["resume"], text
    assert {t["name"]: t["rows"] for t in report["tables"]}["stream_batches"] == 2


def test_killed_after_the_sink_committed_skips_the_replay(project: Path, tmp_path: Path) -> None:
    data = build(project, tmp_path, planned=3, finished=2, sink_committed=3)
    text = render_text(inspect_dir(data))
    assert "the sink already committed it" in text and "nothing is called again" in text, text
    assert "in doubt: nothing" in text, text


def test_between_batches_and_before_spark_ran(project: Path, tmp_path: Path) -> None:
    data = build(project, tmp_path / "a", planned=2, finished=2, sink_committed=2)
    report = inspect_dir(data)
    assert "batch 1 finished; the next run plans batch 2" in render_text(report)
    assert report["in_doubt"] == [] and not report["complete"]
    data = build(project, tmp_path / "b", planned=0, finished=0, sink_committed=0)
    assert "no batch planned yet" in render_text(inspect_dir(data))
    done = build(project, tmp_path / "c", planned=FILES, finished=FILES, sink_committed=FILES)
    report = inspect_dir(done)
    assert report["complete"] and "nothing to resume" in report["resume"]


def test_the_generated_project_itself(project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DIR is the project (its answers name stream-checkpoint): exit 0, the stream's words."""
    data = build(project, tmp_path, planned=3, finished=2, sink_committed=3)
    assert main(["inspect", str(project), "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("stream-checkpoint · SQLite") and "Spark checkpoint" in out, out
