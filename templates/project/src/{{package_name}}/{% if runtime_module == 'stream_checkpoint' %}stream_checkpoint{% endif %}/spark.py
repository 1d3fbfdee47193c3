"""The Spark Structured Streaming job: read the landing directory, write through the sink.

Shaped like Spark's own examples (examples/src/main/python/sql/streaming/ in
apache/spark): build the session, read the stream, write it with a checkpoint
location, await termination.

* **Source** — the landing directory (``<data-dir>/landing``): JSON Lines files
  that ``submit-demo`` and ``submit --file`` write atomically (temp file, then
  rename; Spark must never see half a file). Read as whole files
  (``wholetext``), one landing file per micro-batch (``maxFilesPerTrigger=1``),
  so the sink can name the file and line of bad input. Replayable: Spark records
  which files each batch holds in ``<checkpoint>/offsets/`` before running it.
* **Trigger** — ``run``: ``availableNow`` (process what is there, stop, exit 0);
  ``run --follow``: a processing-time trigger every ``trigger_interval_s``.
* **Checkpoint** — ``checkpoint_location`` (default ``<data-dir>/spark-checkpoint``;
  any Hadoop-compatible URI: ``hdfs://…``, ``s3a://…``). ``spark.local.dir`` and the
  JVM's temp dir live in ``<data-dir>/spark-local`` (a killed driver leaves nothing
  in /tmp; the next run empties it).
* **Master** — ``spark-submit --master …`` decides; run with plain ``python``, the
  ``spark_master`` setting (default ``local[2]``) is passed the way spark-submit
  would be (``PYSPARK_SUBMIT_ARGS``), never hard-coded with ``.master()``, which
  would override ``spark-submit --master``.
* **Start-up** — a restart is what recovery waits for, so a local driver started
  here is tuned for it: on loopback only (``LOCAL_CONF``; on a cluster the executors
  must reach the driver, so spark-submit's settings decide), C1 and the serial
  collector (``LOCAL_JVM_OPTIONS``), ``SPARK_HOME`` handed to spark-submit's scripts,
  no web UI, and Spark's classes mapped from the class archive once ``prepare-spark``
  has written it (class_archive.py). Nothing here touches the checkpoint, the offsets
  log or the sink's transaction. ``benchmarks/bench_stream.py`` (in the Continuity Advisor) times a
  restart in parts against the settings before these.
* **Signals** — the JVM is started in a session of its own (``start_new_session``):
  a SIGTERM/SIGINT sent to the driver's whole process group (Ctrl-C, ``kill --
  -PGID``, systemd's default KillMode) reaches the Python driver only. Otherwise
  the JVM dies first (exit 1, the batch in hand abandoned). The driver waits for
  the batch in the sink, stops the query and the JVM, and exits 0. A killed driver
  takes the JVM with it: the JVM exits when its stdin (a pipe from the driver)
  closes.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import settings as settings_module
from ..runtime import metrics
from ..runtime.errors import JobError
from ..runtime.shutdown import Shutdown
from . import class_archive
from .sink import IdempotentSink
from ..runtime.strategy import Context

LANDING = "landing"
CHECKPOINT = "spark-checkpoint"
LOCAL = "spark-local"


def landing_dir(data_dir: Path) -> Path:
    return data_dir / LANDING


def checkpoint_location(ctx: Context) -> str:
    return ctx.settings.checkpoint_location or str((ctx.data_dir / CHECKPOINT).resolve())


#: Spark settings of every driver: no web UI (nothing of ours listens), no progress bars in
#: spark-driver.log, two shuffle partitions (Spark's 200 would be 200 tasks for a few records).
SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
}
#: Only when the master is local (the executors are threads of this JVM, nobody connects from
#: another host): the driver listens on loopback, not on the address the hostname resolves to.
LOCAL_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
#: Only when this process starts the JVM with a local master: start-up over peak speed. A restart
#: is what recovery waits for, and most of its CPU is the JIT compiling Spark's start-up code
#: (C1 alone: -XX:TieredStopAtLevel=1) and the parallel collector's threads (on 2 cores, the
#: serial collector). A local micro-batch of a few thousand records does not need C2's code.
#: Measured side by side in benchmarks/bench_stream.py.
LOCAL_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
#: How long `prepare-spark` waits for the JVM to write the class archive as it exits (~15 s quiet).
ARCHIVE_WRITE_S = 600.0


def launch_env(local_master: bool) -> dict[str, str]:
    """Variables for spark-submit's scripts: SPARK_HOME known (otherwise bin/find-spark-home starts
    one more Python to look for it), and on a local master the loopback address (SPARK_LOCAL_IP)."""
    env = {"SPARK_HOME": spark_home()}
    if local_master:
        env["SPARK_LOCAL_IP"] = os.environ.get("SPARK_LOCAL_IP") or "127.0.0.1"
    return env


def spark_home() -> str:
    import pyspark

    return os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).parent)


def build_session(ctx: Context, *, archive_at_exit: Path | None = None) -> Any:
    """A SparkSession whose JVM runs in its own session; spark-submit's master wins. A local JVM
    maps its classes from the class archive when there is one (class_archive.py), or, for
    ``prepare-spark``, writes one to ``archive_at_exit`` as it exits."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    local = (ctx.data_dir / LOCAL).resolve()
    shutil.rmtree(local, ignore_errors=True)  # what a killed driver left behind
    # What rmtree could not remove is a dead JVM's scratch (after a power cut, entries LazyFS or a real
    # disk keeps in odd states): harmless to a new JVM, and no reason for the driver not to start.
    (local / "tmp").mkdir(parents=True, exist_ok=True)
    # Plain python: pass what spark-submit would (a PYSPARK_SUBMIT_ARGS of your own wins).
    # Under spark-submit (PYSPARK_GATEWAY_PORT set) its --master and --conf decide.
    given = os.environ.get("PYSPARK_SUBMIT_ARGS")
    ours_local = (given is None and "PYSPARK_GATEWAY_PORT" not in os.environ
                  and ctx.settings.spark_master.startswith("local"))
    java_options = [*(LOCAL_JVM_OPTIONS if ours_local else ()), f"-Djava.io.tmpdir={local / 'tmp'}"]
    if ours_local:
        java_options += _class_archive_options(ctx, archive_at_exit)
    ours = shlex.join(["--master", ctx.settings.spark_master, "--conf", f"spark.local.dir={local}",
                       f"--driver-java-options={' '.join(java_options)}", "pyspark-shell"])
    conf = SparkConf().setAppName(f"{settings_module.PACKAGE}-stream").set("spark.local.dir", str(local))
    for key, value in {**SESSION_CONF, **(LOCAL_CONF if ours_local else {})}.items():
        conf.set(key, value)
    log = open(ctx.data_dir / "spark-driver.log", "ab")  # the JVM's own output
    env = {**({} if "PYSPARK_GATEWAY_PORT" in os.environ else launch_env(ours_local)),
           "PYSPARK_SUBMIT_ARGS": given or ours}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)  # launch_gateway hands os.environ to spark-submit
    try:
        gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True, "stdout": log, "stderr": log})
    finally:
        log.close()
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value
    SparkContext(conf=conf, gateway=gateway)
    spark = SparkSession.builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def archive_fingerprint() -> list[str]:
    """What a class archive depends on: Spark's jars (its version and home), the Java that runs
    it, and the JVM options a local driver gets."""
    import pyspark

    java = os.path.realpath(shutil.which("java") or "java")
    return [pyspark.__version__, spark_home(), java, os.environ.get("JAVA_HOME", ""), *LOCAL_JVM_OPTIONS]


def _class_archive_options(ctx: Context, archive_at_exit: Path | None) -> list[str]:
    if archive_at_exit is not None:
        return [f"-XX:ArchiveClassesAtExit={archive_at_exit}"]
    archive = class_archive.usable(ctx.settings, archive_fingerprint())
    return [] if archive is None else [f"-XX:SharedArchiveFile={archive}", "-XX:+VerifySharedSpaces"]


def stop_session(spark: Any, *, wait_s: float = 20.0) -> None:
    """Stop Spark and wait for its JVM: nothing outlives the driver. ``wait_s``: longer when the
    JVM writes a class archive as it exits (a minute or more on a busy machine)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    spark.stop()
    if proc is not None:  # launched by us (spark-submit owns its own JVM)
        gateway.shutdown()
        proc.stdin.close()  # the JVM exits on EOF
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        SparkContext._gateway = None
        SparkContext._jvm = None


def start_query(spark: Any, ctx: Context, write_batch: Any, *, follow: bool, checkpoint: str | None = None) -> Any:
    """Read the landing directory as a stream; every micro-batch goes to ``write_batch``."""
    lines = (spark.readStream
             .format("text")
             .option("wholetext", True)
             .option("maxFilesPerTrigger", 1)
             .load(str(landing_dir(ctx.data_dir).resolve()))
             .selectExpr("_metadata.file_path AS path", "value"))
    writer = (lines.writeStream
              .foreachBatch(write_batch)
              .option("checkpointLocation", checkpoint or checkpoint_location(ctx)))
    if follow:
        writer = writer.trigger(processingTime=f"{ctx.settings.trigger_interval_s} seconds")
    else:
        writer = writer.trigger(availableNow=True)
    return writer.start()


#: ``run`` starts another availableNow query at most this many times when landing files are left.
MORE_ROUNDS = 3


def _mend(ctx: Context) -> None:
    """Before a query starts: the newest checkpoint entries a power cut left empty removed (checkpoint_sync.py)."""
    from .checkpoint_sync import CheckpointLost, local_dir, mend

    location = local_dir(checkpoint_location(ctx))
    try:
        removed = mend(location) if location is not None else []
    except CheckpointLost as exc:
        raise JobError(str(exc)) from None
    if removed:
        print(f"Spark's checkpoint: removed {', '.join(removed)} (left empty by a power cut: the batch is planned "
              "again and the sink skips what it committed)", flush=True)


def run_stream(ctx: Context, sink: IdempotentSink, shutdown: Shutdown, *, follow: bool,
               left: Callable[[], int] = lambda: 0, archive_at_exit: Path | None = None) -> int:
    """Run the query to its end (``run``) or until a signal (``run --follow``). ``left`` counts the
    submitted records not done yet: an availableNow query that resumes a killed run re-runs the
    unfinished batch first and may stop before the files that landed later, so ``run`` starts the
    query again (the same checkpoint, nothing redone) while records are left."""
    spark = build_session(ctx, archive_at_exit=archive_at_exit)
    try:
        for round_ in range(1 + (0 if follow else MORE_ROUNDS)):
            _mend(ctx)
            _await(start_query(spark, ctx, sink.write, follow=follow), sink, shutdown)
            waiting = 0 if shutdown.requested else left()
            if not waiting:
                break
            if round_ < MORE_ROUNDS:
                print(f"the query ended with {waiting} record(s) not done: starting it again", flush=True)
        return 0
    finally:
        started = time.monotonic()
        stop_session(spark, wait_s=20.0 if archive_at_exit is None else ARCHIVE_WRITE_S)
        if shutdown.requested:
            print(f"stopped after the current batch ({time.monotonic() - started:.1f} s to stop Spark)", flush=True)


def _await(query: Any, sink: IdempotentSink, shutdown: Shutdown) -> None:
    """Until the query ends or a signal asks to stop (then after the batch in hand)."""
    try:
        while query.isActive and not shutdown.requested:
            metrics.beat()  # runtime/metrics.py: a streaming driver waiting for files is alive
            query.awaitTermination(0.2)
        if shutdown.requested and query.isActive:
            with sink.busy:  # the batch in hand reaches its commit first
                pass
            query.stop()
    except Exception as failed:  # the query died: StreamingQueryException
        if sink.error is not None:
            raise sink.error from None  # bad input: the file and line, not a JVM stack
        raise JobError(f"the streaming query failed: {str(failed).splitlines()[0]}") from None
    if sink.error is not None:
        raise sink.error
