"""Stream checkpoint: the stream engine's own checkpoint, and a sink that makes replays harmless.

The recovery point (the three questions):

* **Where** — two places, each owned by one party. Spark's checkpoint location
  holds the source offsets (which landing files each micro-batch reads, logged
  *before* the batch runs) and the commit log (which batches finished). The
  state store holds the sink's results and the ids of the batches it committed,
  written in one transaction (sink.py).
* **How often** — once per micro-batch (one landing file of ``batch_size``
  records here; ``maxFilesPerTrigger``).
* **No duplicates, no omissions** — a batch is replayed after a kill until
  Spark's commit log has it; the sink skips a batch id it already committed, and
  the external calls of a half-done batch carry idempotency keys derived from the
  record, so the service applies each once.

The job is in spark.py, the sink in sink.py; this module is the
interface every strategy gives the CLI, ``status`` and the drill (strategy.py).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..runtime import correlation, effects
from .. import job
from ..runtime.errors import JobError
from .. import settings as settings_module
from ..settings import Settings
from ..runtime.shutdown import Shutdown
from ..runtime.store import Store, apply_schema, connect, workload_held
from ..runtime.strategy import Context, Submitted, percent

NAME = "stream-checkpoint"
#: One driver per checkpoint location (Spark refuses two active queries on one).
MULTI_WORKER = False
#: A kill in the middle of a micro-batch replays it whole: the calls it had made
#: are sent again with the same keys (an idempotent service answers 'duplicate'), at
#: most one batch, i.e. one landing file of batch_size records; none for the other
#: kinds (looked up, or in doubt: effects.py).
REDONE_CALLS_PER_KILL = effects.promise(Settings.from_env().batch_size * len(job.STEPS))
#: Where ``drill --aim`` kills (fault-injection points in sink.py: faults.window).
WINDOWS = {
    "after_effects": "the batch's external calls were made; the sink has not committed",
    "after_sink_commit": "the sink committed results + batch id; Spark has not written its commit log",
}


def window_passes(records: int, settings: Settings) -> int:
    """How many times a run over ``records`` demo records passes each window: once per micro-batch,
    one landing file of ``batch_size`` records (a replayed batch the sink skips passes none). The
    drill draws aimed kills to fit (drill/schedule.py) and refuses more kills than this."""
    return -(-records // max(1, settings.batch_size))


#: The drill's fault kinds this project does not take (drill/schedule.py), and why: the report says so.
DRILL_SKIPS = {
    "service-fail": "the sink does not retry a failed call: the micro-batch fails, the query stops and the next "
                    "`run` replays the batch (no retry inside a batch yet)",
    "service-timeout": "the sink does not retry a failed call (see service-fail)",
    "store-outage": "Spark's own checkpoint files hold the stream's progress; the sink's store is not ridden out",
    "other-host": "one Spark driver per checkpoint location: no claims or leases to hand over",
    "resubmit-same": "the drill's input is the demo's landing files (no correlation id); a file submitted twice "
                     "under one id is tested by test_submit.py",
    "submit-crash": "the drill's input is the demo's landing files (no correlation id to submit again under)",
    "malformed-input": "the drill's input is the demo's landing files, written by the drill itself; `submit --file` "
                       "refusing a flawed file whole is tested by test_submit.py",
    "second-start": "one Spark driver per checkpoint location, and `run` takes no lock against a second one (Spark's "
                    "own commit log refuses some conflicting batches): run one at a time",
}

#: No timed kill aimed at a recovery (drill/schedule.py): the driver's recovery is a JVM start
#: that makes no call for seconds, so such a kill would only land in Spark's start again.
KILLS_IN_RECOVERY = False
#: Nor the kills at each of a worker's first writes in turn (drill/moments.py): each restart is a JVM start.
CUT_FIRST_WRITES = False

#: run() prints its own line (records, micro-batches, replays skipped): cli.py's summary is not added.
PRINTS_RUN_SUMMARY = True
#: The drill lines the README, `drill --help` and the printed next step all show (one set of numbers):
#: aimed at the window after the sink's commit, and once into each critical window (--aim all).
DRILL_EXAMPLES = ("--records 600 --kills 3 --seed 1 --aim after_sink_commit", "--records 400 --kills 3 --aim all")
#: What `reset` drops in the state store (strategy.py): every table schema.sql creates.
STORE_TABLES = ("stream_files", "stream_batches", "stream_skipped", "stream_results", "schema_version")
#: What `reset` removes from the data directory: the landing files and Spark's own state there
#: (a checkpoint_location elsewhere is not touched).
STATE_FILES = ("landing", "spark-checkpoint", "spark-local", "spark-driver.log")

SCHEMA_FILE = Path(__file__).parent.with_name("schema.sql")  # src/<package>/schema.sql
SCHEMA_VERSION = 2
#: MIGRATIONS[v] turns schema version v - 1 into v.
MIGRATIONS: dict[int, str] = {
    2: correlation.TABLE,  # submissions by correlation id
}


#: What ``drill --power-loss`` does not hold to "nothing committed is lost": Spark's checkpoint (Spark never
#: fsyncs it; checkpoint_sync.py syncs what the sink relies on and mends the newest entries a cut emptied, and
#: the verdict judges the outcome) and Spark's scratch space.
POWER_CUT_UNPROMISED = ("spark-checkpoint", "spark-local")  # spark.CHECKPOINT, spark.LOCAL


def open_store(ctx: Context, *, create: bool = False) -> Store:
    store = connect(ctx.data_dir, ctx.settings, create=create)
    apply_schema(store, SCHEMA_FILE.read_text(encoding="utf-8"), SCHEMA_VERSION, MIGRATIONS)
    return store


def write_landing_file(data_dir: Path, name: str, records: list[dict[str, Any]]) -> Path:
    """Atomically: a temp file (hidden from Spark by its leading '.') renamed into place."""
    from .spark import landing_dir

    where = landing_dir(data_dir)
    where.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=where)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())
    final = where / name
    os.replace(tmp, final)
    dir_fd = os.open(where, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return final


def _register(ctx: Context, files: list[tuple[Path, int]], work_ms: float) -> None:
    store = open_store(ctx, create=True)
    try:
        with store.transaction():
            for path, n in files:
                store.execute("INSERT INTO stream_files (path, records, work_ms, submitted_at) VALUES (?, ?, ?, ?)",
                              (str(path.resolve()), n, work_ms, time.time()))
    finally:
        store.close()


def submit(ctx: Context, records: list[dict[str, Any]], *, work_ms: float = 0.0,
           correlation_id: str | None = None) -> Submitted:
    """Without a correlation id: the demo workload as landing files of ``batch_size``
    records (one micro-batch each), on a data directory that holds none yet. With one:
    the records as one landing file for the next micro-batch, unless that id was
    submitted before (then its file's name comes back and nothing lands)."""
    if correlation_id is not None:
        return _submit_correlated(ctx, records, work_ms, correlation_id)
    store = open_store(ctx, create=True)
    try:
        row = store.one("SELECT COUNT(*) AS n FROM stream_files")
    finally:
        store.close()
    if row and int(row["n"]):
        raise JobError(f"{workload_held(store, ctx.data_dir)}; `submit --file` adds a file to the stream")
    size = ctx.settings.batch_size
    files = []
    for start in range(0, len(records), size):
        chunk = records[start:start + size]
        files.append((write_landing_file(ctx.data_dir, f"demo-{start // size:06d}.jsonl", chunk), len(chunk)))
    _register(ctx, files, work_ms)
    return Submitted([path.name for path, _ in files])


def _submit_correlated(ctx: Context, records: list[dict[str, Any]], work_ms: float, correlation_id: str) -> Submitted:
    # The file's name comes from the correlation id: a delivery killed after its file
    # landed but before this commit lands the same file under the same name again, and
    # Spark's file source reads a path once.
    name = f"sub-{hashlib.sha256(correlation.check(correlation_id).encode()).hexdigest()[:24]}.jsonl"
    store = open_store(ctx, create=True)
    try:
        with store.transaction():
            existing = correlation.claim(store, correlation_id, len(records))
            if existing is not None:
                return Submitted(existing, added=False)
            final = write_landing_file(ctx.data_dir, name, records)
            store.execute("INSERT INTO stream_files (path, records, work_ms, submitted_at) VALUES (?, ?, ?, ?) "
                          "ON CONFLICT (path) DO NOTHING", (str(final.resolve()), len(records), work_ms, time.time()))
            correlation.record(store, correlation_id, [final.name])
    finally:
        store.close()
    return Submitted([final.name])


def require_spark() -> None:
    """pyspark is an optional dependency (the ``spark`` extra): without it, one clear line, exit 2."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise JobError("pyspark is not installed in this Python: run `make setup` in the project (a .venv with "
                       "it), or `pip install -e '.[spark]'`, then try again") from None


def run(ctx: Context, shutdown: Shutdown, *, limit: int | None = None, follow: bool = False,
        archive_at_exit: Path | None = None) -> int:
    require_spark()
    from .spark import run_stream
    from .sink import IdempotentSink

    store = open_store(ctx)  # refuses a data dir nobody submitted to
    try:
        row = store.one("SELECT COALESCE(MAX(work_ms), 0) AS w FROM stream_files")
    finally:
        store.close()
    _send_released(ctx)
    sink = IdempotentSink(lambda: open_store(ctx), ctx.external, work_ms=float(row["w"]) if row else 0.0,
                          make_effects=lambda external: effects.Effects(external, ctx.data_dir, ctx.settings),
                          before_commit=_syncing(ctx))
    code = run_stream(ctx, sink, shutdown, follow=follow, left=lambda: _left(ctx), archive_at_exit=archive_at_exit)
    print(f"{sink.records} records in {sink.batches} micro-batch(es); "
          f"{sink.skipped} replayed batch(es) skipped", flush=True)
    return code


def _send_released(ctx: Context) -> None:
    """The calls a person answered "not applied" (``reconcile``), sent before the stream starts: their
    batches are committed, so no replay sends them (the other strategies' ``run`` does the same)."""
    external = ctx.external()
    calls = effects.Effects(external, ctx.data_dir, ctx.settings)
    try:
        calls.send_released(lambda line: print(line, flush=True))
    finally:
        calls.close()
        external.close()


def _syncing(ctx: Context) -> Callable[[int], None] | None:
    """What the sink calls before each commit: Spark's checkpoint entries for the batch synced
    (checkpoint_sync.py); nothing for a checkpoint location on another file system."""
    from .checkpoint_sync import local_dir, sync_batch
    from .spark import checkpoint_location

    location = local_dir(checkpoint_location(ctx))
    return None if location is None else (lambda batch_id: sync_batch(location, batch_id))


def _left(ctx: Context) -> int:
    counts = status(ctx)
    return max(0, int(counts["total"]) - int(counts["done"]))


def status(ctx: Context) -> dict[str, Any]:
    store = open_store(ctx)
    try:
        total = int((store.one("SELECT COALESCE(SUM(records), 0) AS n FROM stream_files") or {"n": 0})["n"])
        done = int((store.one("SELECT COUNT(DISTINCT record_id) AS n FROM stream_results") or {"n": 0})["n"])
        batches = store.one("SELECT COUNT(*) AS n, MIN(committed_at) AS first, MAX(committed_at) AS last "
                            "FROM stream_batches") or {}
        skipped = int((store.one("SELECT COUNT(*) AS n FROM stream_skipped") or {"n": 0})["n"])
    finally:
        store.close()
    last, first = batches.get("last"), batches.get("first")
    elapsed = (last - first) if last and first else 0
    task = {"task_id": "stream", "status": "done" if total and done >= total else "running" if done else "pending",
            "done": done, "total": total, "percent": round(percent(done, total), 1),
            "last_checkpoint_age_s": round(time.time() - last, 3) if last else None,
            "rate_per_s": round(done / elapsed, 1) if elapsed > 0 else None,
            "attempts": int(batches.get("n") or 0), "error": None}
    return {"strategy": NAME, "total": total, "done": done, "percent": round(percent(done, total), 1),
            "failed": 0, "tasks": [task], "batches": int(batches.get("n") or 0),
            "replayed_batches_skipped": skipped}


def drill_report(ctx: Context) -> dict[str, Any]:
    """Extra keys of this strategy's drill report."""
    return {"replayed_batches_skipped": status(ctx)["replayed_batches_skipped"]}


def expected_effects(records: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(str(r["record_id"]), step) for r in records for step in job.STEPS}


def stored_results(ctx: Context) -> list[tuple[str, Any]]:
    store = open_store(ctx)
    try:
        rows = store.all("SELECT record_id, result FROM stream_results ORDER BY batch_id, record_id")
    finally:
        store.close()
    return [(str(r["record_id"]), json.loads(r["result"])) for r in rows]


def stored_final_states(ctx: Context) -> None:
    """None: the sink keeps per-record results, no running state."""
    return None


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    run_parser = sub.choices["run"]
    run_parser.add_argument("--follow", action="store_true",
                            help="keep running: a micro-batch every trigger_interval_s for new landing files")
    drill_parser = sub.choices["drill"]
    drill_parser.set_defaults(func=_needs_spark(drill_parser.get_default("func")))
    prepare = sub.add_parser("prepare-spark", parents=[common],
                             help="write the class archive a local Spark driver starts from (a restart in about "
                                  "half the time; once per machine or image)")
    prepare.set_defaults(func=_cmd_prepare_spark)


def _needs_spark(command: Any) -> Any:
    """The drill runs Spark drivers: say what is missing before it starts one."""
    def checked(args: argparse.Namespace, ctx: Context) -> int:
        require_spark()
        return int(command(args, ctx))
    return checked


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """What cli.py's `run` hands to run() besides the limit: it starts the run as for every
    strategy (signals, metrics, store outages ridden out, the drill's account of the run)."""
    return {"follow": args.follow}


def _cmd_prepare_spark(args: argparse.Namespace, ctx: Context) -> int:
    path = prepare_spark(ctx)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB): Spark drivers this project starts here map "
          "their classes from it")
    return 0


def prepare_spark(ctx: Context) -> Path:
    """Write the drivers' class archive (class_archive.py): this project's own query runs once over a
    few demo records in a scratch directory, its JVM archiving the classes it loaded as it exits."""
    from dataclasses import replace

    require_spark()
    from . import class_archive
    from .spark import archive_fingerprint

    target = class_archive.location(ctx.settings, archive_fingerprint())
    if target is None:
        raise JobError(f"the class archive is switched off ({settings_module.ENV_PREFIX}SPARK_CLASS_ARCHIVE=off): "
                       "unset it to write one")
    with tempfile.TemporaryDirectory(prefix="prepare-spark-") as tmp:
        scratch = Path(tmp)
        settings = replace(ctx.settings, checkpoint_location="", external_dir="", spark_master="local[2]")
        work = Context(scratch / "data", settings, ctx.strategy)
        submit(work, job.demo_records(20))
        written = scratch / "classes.jsa"
        with contextlib.redirect_stdout(io.StringIO()):  # the scratch run's own summary line
            run(work, Shutdown(settings.grace_period_s), archive_at_exit=written)
        if not written.is_file():
            log = work.data_dir / "spark-driver.log"
            said = log.read_text(errors="replace").strip().splitlines()[-5:] if log.is_file() else []
            raise JobError("the JVM wrote no class archive; Spark drivers start without one. Its last words:\n  "
                           + "\n  ".join(said or ["(nothing)"]))
        class_archive.publish(written, target)
    return target

