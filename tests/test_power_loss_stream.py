"""The stream project under power loss (issue 21, point 3): Spark never fsyncs its checkpoint location.

* On LazyFS, without Spark (fast): entries written the way Spark writes them (no fsync) come back empty
  after a cut; ``sync_batch`` (the sink calls it before committing a batch) keeps every entry up to that
  batch; ``mend`` (run calls it before the query starts) removes the newest entries a cut emptied and
  leaves a readable checkpoint; one whose older entries were never synced it refuses to touch.
* ``@pytest.mark.soak``: the generated stream project passes ``drill --power-loss`` (every crash restarts
  Spark's JVM: minutes), and the same project with the sink's sync removed fails it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from lazyfs_support import binary, load_lazyfs, skip_reason
from test_power_loss_drill import SEEDS, _mounts_under, _mutated

from advisor import scaffold
from advisor.probe.power_cut import module_path

pytestmark = [pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

SYNC_MODULE = (module_path().parents[1] / "{% if runtime_module == 'stream_checkpoint' %}stream_checkpoint{% endif %}"
               / "checkpoint_sync.py")
BEFORE_COMMIT = "before_commit=_syncing(ctx))"


def checkpoint_sync() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stream_checkpoint_sync", SYNC_MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def spark_entry(path: Path, body: str) -> None:
    """As Spark's checkpoint manager writes one: a temp file renamed into place, a checksum beside it,
    nothing fsynced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(f"v1\n{body}")
    os.replace(tmp, path)
    path.with_name(f".{path.name}.crc").write_bytes(b"crc\x00\x00\x00\x01" + len(body).to_bytes(4, "big"))


def write_batch(location: Path, batch_id: int) -> None:
    """What Spark writes for one micro-batch before the sink runs: the previous commit, this offset, the source log."""
    if batch_id > 0:
        spark_entry(location / "commits" / str(batch_id - 1), json.dumps({"nextBatchWatermarkMs": 0}))
    offset = json.dumps({"batchWatermarkMs": 0}) + "\n" + json.dumps({"logOffset": batch_id})
    spark_entry(location / "offsets" / str(batch_id), offset)
    spark_entry(location / "sources" / "0" / str(batch_id), json.dumps({"path": f"file:/landing/{batch_id}"}))


def _empty(path: Path) -> bool:
    return path.exists() and path.stat().st_size == 0


def test_synced_batches_survive_a_cut_and_mend_leaves_a_readable_checkpoint(tmp_path: Path) -> None:
    sync = checkpoint_sync()
    (tmp_path / "disk").mkdir()
    with load_lazyfs().lazyfs_mount(tmp_path / "disk", tmp_path / "mnt", binary=binary()) as fs:
        location = tmp_path / "mnt" / "spark-checkpoint"
        spark_entry(location / "metadata", json.dumps({"id": "q"}))
        for batch in range(3):  # batches 0-2: each synced by the sink before its commit
            write_batch(location, batch)
            sync.sync_batch(location, batch)
        spark_entry(location / "commits" / "2", "{}")  # batch 2 committed by Spark, batch 3 planned:
        spark_entry(location / "offsets" / "3", "{}")  # neither synced when the power goes out
        spark_entry(location / "sources" / "0" / "3", "{}")
        fs.clear_cache()
        for kept in ("metadata", "offsets/2", "sources/0/2", "commits/1", "offsets/0"):
            assert (location / kept).read_bytes().startswith(b"v1"), kept
        assert _empty(location / "commits" / "2") and _empty(location / "offsets" / "3")

        removed = sync.mend(location)
        assert sorted(removed) == ["commits/2", "offsets/3", "sources/0/3"], removed
        assert not (location / "commits" / ".2.crc").exists()  # its checksum with it
        assert sync.mend(location) == []  # what is left reads: batch 2 is replayed, the sink skips it


def test_without_the_sync_a_cut_empties_the_whole_checkpoint_and_mend_cannot_save_it(tmp_path: Path) -> None:
    """The negative control: what Spark alone leaves after a power cut (the drill found exactly this)."""
    sync = checkpoint_sync()
    (tmp_path / "disk").mkdir()
    with load_lazyfs().lazyfs_mount(tmp_path / "disk", tmp_path / "mnt", binary=binary()) as fs:
        location = tmp_path / "mnt" / "spark-checkpoint"
        spark_entry(location / "metadata", json.dumps({"id": "q"}))
        for batch in range(3):
            write_batch(location, batch)
        fs.clear_cache()
        assert all(_empty(location / name) for name in ("metadata", "offsets/0", "offsets/1", "commits/0"))
        with pytest.raises(sync.CheckpointLost, match="cannot be mended"):
            sync.mend(location)  # older entries empty too: replanning them could pair old ids with new input
        assert _empty(location / "offsets" / "2")  # nothing removed


def test_a_checkpoint_elsewhere_is_left_to_its_file_system() -> None:
    sync = checkpoint_sync()
    assert sync.local_dir("s3a://bucket/checkpoint") is None and sync.local_dir("hdfs://nn/x") is None
    assert sync.local_dir("file:///data/ck") == Path("/data/ck") and sync.local_dir("/data/ck") == Path("/data/ck")


# ------------------------------------------------------------ the generated project, in make soak
STREAM_FLAGS = ("--sweep-prefix", 1, "--sweep-sample", 0, "--random-cuts", 1)


def _drill(project: Path, package: str, data: Path, *flags: object) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DATABASE_URL")
           and not k.startswith(("PYTEST_", "COV_"))}
    env["PYTHONPATH"] = str(project / "src")
    result = subprocess.run([sys.executable, "-m", package, "drill", "--power-loss", "--json", "--no-shrink",
                             "--data-dir", str(data), *map(str, flags)], cwd=project, env=env,
                            capture_output=True, text=True, timeout=3600)
    assert result.stdout.strip(), result.stderr[-3000:]
    report: dict = json.loads(result.stdout)
    report["_exit"] = result.returncode
    return report


@pytest.fixture(scope="module")
def stream_project(tmp_path_factory: pytest.TempPathFactory) -> scaffold.Generated:
    return scaffold.generate("stream-checkpoint", tmp_path_factory.mktemp("stream-power") / "job",
                             {"project_name": "Stream Power"})


@pytest.mark.soak
@pytest.mark.parametrize("seed", SEEDS)
def test_the_stream_project_passes_the_power_loss_drill(stream_project: scaffold.Generated, seed: int,
                                                        tmp_path: Path) -> None:
    report = _drill(stream_project.dest, stream_project.package, tmp_path / "d", "--seed", seed, *STREAM_FLAGS)
    assert report["failures"] == [] and report["_exit"] == 0, report["failures"]
    assert report["lost"] == report["duplicate_effects"] == report["incomplete_records"] == 0, report
    assert report["power_loss"]["cuts"] == report["kills"] + 1 >= 4
    assert _mounts_under(tmp_path) == []


@pytest.mark.soak
def test_the_stream_project_without_its_checkpoint_sync_fails_the_power_loss_drill(
        stream_project: scaffold.Generated, tmp_path: Path) -> None:
    package = stream_project.package
    strategy = f"src/{package}/stream_checkpoint/__init__.py"
    mutated = _mutated(stream_project.dest, tmp_path / "mutated", strategy, BEFORE_COMMIT, "before_commit=None)")
    report = _drill(dataclasses.replace(stream_project, dest=mutated).dest, package, tmp_path / "d", "--seed", 1,
                    *STREAM_FLAGS)
    checks = {f["check"] for f in report["failures"]}
    assert report["_exit"] == 1 and checks & {"worker_failures", "lost", "incomplete"}, report["failures"]
    log = (tmp_path / "d" / "drill-workers.log").read_text(errors="replace")
    assert "cannot be mended" in log  # the driver said why it would not start
