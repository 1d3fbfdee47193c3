"""Stream checkpoint: where a restart's seconds go, a plain run, and the idempotent sink vs a naive one.

1. **Restart, in parts.** A ``run --follow`` driver is SIGKILLed after its sink committed
   its first micro-batch; a fresh interpreter then runs the generated ``run --follow`` (its
   own ``stream_checkpoint.run``) until the first micro-batch after the restart is through the
   sink. Printed apart: interpreter + imports (ours and pyspark), spark-submit's scripts and
   launcher JVM, the driver JVM up to its py4j gateway, SparkContext, SparkSession,
   ``writeStream.start()`` (checkpoint metadata read, the stream thread started), start to the
   first trigger, and the first micro-batch in Spark's own ``durationMs`` (latestOffset =
   listing the landing directory, getBatch, queryPlanning, walCommit = the offsets log,
   addBatch = the sink's collect() and transaction, commitOffsets = Spark's commit log).
2. **A plain run**: ``run`` over ``--plain-records`` demo records (files of ``batch_size``,
   one micro-batch each), wall clock from the interpreter's start to its exit, in parts.
3. Three sides, **as generated** with its class archive written once by ``prepare-spark``
   (``tuned``: Spark's classes mapped from the archive, as the Dockerfile's image does), as
   generated without it (``no_archive``), and with the settings of 2026-11-30 (``before``:
   no JVM options, the driver on the hostname's address, bin/find-spark-home looking for
   SPARK_HOME, console progress bars, no archive), round by round, the order rotating, in one
   run: medians and ranges. ``prepare-spark``'s own time is printed once. Target
   (``--check``): the tuned restart < 10 s (median). The figure depends on the load (2 cores
   shared): the load is printed beside every round.
4. ``--sink-repeat N`` (default 0 here: the sink is unchanged by these settings): the generated
   ``IdempotentSink`` vs ``AppendingSink`` (appends, no batch id, no keys) in one session,
   interleaved, best of N; target idempotent / naive throughput >= 0.9.

Exits 1 when a target is missed (with ``--check``; without it, prints only).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generated import Targets, load_generated, load_note  # noqa: E402

from advisor import scaffold  # noqa: E402

TARGET_RATIO = 0.9
TARGET_RESTART_S = 10.0
SIDES = ("tuned", "no_archive", "before")
#: The parts of a driver's start, in order (see the module docstring).
WALL_PARTS = ("interpreter", "imports", "launcher", "jvm_to_gateway", "spark_context", "spark_session",
              "query_start", "to_first_trigger")
SPARK_PARTS = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "addBatch", "commitOffsets")


# ------------------------------------------------------------------ the child: one driver, timed
def child(args: argparse.Namespace) -> int:
    """One driver in a fresh interpreter (this process): the generated ``run``, timed in parts."""
    t0 = time.time()
    sys.path.insert(0, str(Path(args.dest) / "src"))
    import importlib

    pkg = args.package
    importlib.import_module(f"{pkg}.cli")  # what `python -m <pkg>` imports
    sc = importlib.import_module(f"{pkg}.stream_checkpoint")
    spark_mod = importlib.import_module(f"{pkg}.stream_checkpoint.spark")
    sink_mod = importlib.import_module(f"{pkg}.stream_checkpoint.sink")
    strategy = importlib.import_module(f"{pkg}.runtime.strategy")
    shutdown_mod = importlib.import_module(f"{pkg}.runtime.shutdown")
    settings = importlib.import_module(f"{pkg}.settings").Settings.from_env()
    import pyspark
    import pyspark.java_gateway
    import pyspark.sql  # noqa: F401  (run() imports it: counted with the imports)
    marks: dict[str, float] = {"imported": time.time()}
    if args.side == "before":
        before_settings(spark_mod)

    launch = pyspark.java_gateway.launch_gateway

    def timed_launch(conf: Any = None, popen_kwargs: Any = None) -> Any:
        marks["launch"] = time.time()
        gateway = launch(conf, popen_kwargs)
        marks["gateway"] = time.time()
        runtime = gateway.jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
        marks["jvm_started"] = runtime.getStartTime() / 1000  # the driver JVM's own clock (epoch ms)
        return gateway

    pyspark.java_gateway.launch_gateway = timed_launch
    context_class = pyspark.SparkContext

    class TimedContext(context_class):  # type: ignore[misc,valid-type]
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            marks["context"] = time.time()

    pyspark.SparkContext = TimedContext  # build_session imports it from pyspark at call time
    queries: list[Any] = []
    start_query = spark_mod.start_query

    def timed_start(spark: Any, *a: Any, **k: Any) -> Any:
        marks.setdefault("session", time.time())
        marks.setdefault("start_call", time.time())
        query = start_query(spark, *a, **k)
        marks.setdefault("started", time.time())
        queries.append(query)
        return query

    spark_mod.start_query = timed_start
    shutdown = shutdown_mod.Shutdown(settings.grace_period_s)
    write = sink_mod.IdempotentSink.write
    first_batch: dict[str, Any] = {}

    def timed_write(sink: Any, batch_df: Any, batch_id: int) -> None:
        write(sink, batch_df, batch_id)
        if not first_batch:
            first_batch.update(id=int(batch_id), done=time.time(), skipped=sink.skipped > 0)
            if args.follow:
                threading.Thread(target=_stop_after_progress, args=(queries, first_batch, shutdown),
                                 daemon=True).start()

    sink_mod.IdempotentSink.write = timed_write
    progress_seen: list[dict[str, Any]] = []
    stop_session = spark_mod.stop_session

    def read_then_stop(spark: Any, **options: Any) -> None:  # the progress is read from the JVM before it stops
        marks["stopping"] = time.time()
        progress_seen.extend(p for q in queries for p in q.recentProgress)
        stop_session(spark, **options)

    spark_mod.stop_session = read_then_stop
    ctx = strategy.Context(data_dir=Path(args.data), settings=settings, strategy=sc)
    sc.run(ctx, shutdown, follow=args.follow)
    ended = time.time()
    progress = first_batch.get("progress") or next(
        (p for p in progress_seen if p["batchId"] == first_batch.get("id")), None)
    out: dict[str, Any] = {
        "interpreter": t0 - args.t0, "imports": marks["imported"] - t0,
        "launcher": marks["jvm_started"] - marks["launch"], "jvm_to_gateway": marks["gateway"] - marks["jvm_started"],
        "spark_context": marks["context"] - marks["gateway"], "spark_session": marks["session"] - marks["context"],
        "query_start": marks["started"] - marks["start_call"], "first_batch_done": first_batch["done"] - args.t0,
        "first_batch_id": first_batch["id"], "first_batch_skipped": first_batch["skipped"],
        "end": ended - args.t0, "stop": ended - marks["stopping"],
        "batches": len({p["batchId"] for p in progress_seen}),
    }
    if progress is not None:
        from datetime import datetime

        trigger = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
        out["to_first_trigger"] = trigger - marks["started"]
        out["spark"] = {k: progress["durationMs"].get(k, 0) / 1000 for k in (*SPARK_PARTS, "triggerExecution")}
    print("CHILD " + json.dumps(out), flush=True)
    return 0


def _stop_after_progress(queries: list[Any], first_batch: dict[str, Any], shutdown: Any) -> None:
    """run --follow: once Spark reports the first batch's progress, stop the driver as a SIGTERM would."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        progress = [p for q in queries for p in q.recentProgress if p["batchId"] == first_batch["id"]]
        if progress:
            first_batch["progress"] = progress[0]
            break
        time.sleep(0.05)
    shutdown.requested = True


def before_settings(spark_mod: Any) -> None:
    """The generated spark.py as it was on 2026-11-30: UI off and 2 shuffle partitions only."""
    spark_mod.SESSION_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
    spark_mod.LOCAL_CONF = {}
    spark_mod.LOCAL_JVM_OPTIONS = ()
    spark_mod.launch_env = lambda local_master: {}


# ------------------------------------------------------------------ the parent
def _run_child(bench: Path, dest: Path, package: str, data: Path, side: str, *, follow: bool,
               env: dict[str, str]) -> dict[str, Any]:
    t0 = time.time()
    cmd = [sys.executable, str(bench), "--child", "--dest", str(dest), "--package", package, "--data", str(data),
           "--side", side, "--t0", repr(t0)] + (["--follow"] if follow else [])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    wall = time.time() - t0
    lines = [line for line in done.stdout.splitlines() if line.startswith("CHILD ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the {side} driver failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n"
                         f"{done.stderr[-3000:]}")
    return {**json.loads(lines[-1][len("CHILD "):]), "wall": wall}


def _batches(data: Path) -> int:
    try:
        conn = sqlite3.connect(data / "state.db")
        try:
            return int(conn.execute("SELECT COUNT(*) FROM stream_batches").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def restart(bench: Path, dest: Path, package: str, data: Path, side: str, env: dict[str, str]) -> dict[str, Any]:
    """The first driver (the project's own CLI) SIGKILLed after its first committed batch; the second timed."""
    cmd = [sys.executable, "-m", package]
    subprocess.run([*cmd, "submit-demo", "--records", "300", "--data-dir", str(data)], env=env, check=True,
                   capture_output=True)
    first = subprocess.Popen([*cmd, "run", "--follow", "--data-dir", str(data)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while _batches(data) < 1:
            if first.poll() is not None:
                raise SystemExit("the first driver exited before its first batch")
            time.sleep(0.05)
    finally:
        first.send_signal(signal.SIGKILL)  # its JVM exits when its stdin closes
        first.wait()
    return _run_child(bench, dest, package, data, side, follow=True, env=env)


def plain(bench: Path, dest: Path, package: str, data: Path, side: str, records: int,
          env: dict[str, str]) -> dict[str, Any]:
    subprocess.run([sys.executable, "-m", package, "submit-demo", "--records", str(records), "--data-dir", str(data)],
                   env=env, check=True, capture_output=True)
    return _run_child(bench, dest, package, data, side, follow=False, env=env)


def _med(values: list[float]) -> str:
    return f"{statistics.median(values):6.1f} ({min(values):.1f}-{max(values):.1f})"


def print_parts(title: str, runs: dict[str, list[dict[str, Any]]], total_key: str) -> None:
    print(f"{title}: seconds, median (range) over {len(runs['tuned'])} round(s)")
    print(f"  {'part':<34} " + " ".join(f"{side:>18}" for side in SIDES))
    rows = [(p, lambda r, p=p: r.get(p, 0.0)) for p in WALL_PARTS]
    rows += [(f"first batch: {p}", lambda r, p=p: r.get("spark", {}).get(p, 0.0)) for p in SPARK_PARTS]
    rows += [("first batch: triggerExecution", lambda r: r.get("spark", {}).get("triggerExecution", 0.0)),
             (total_key, lambda r: r[total_key])]
    for name, get in rows:
        print(f"  {name:<34} " + " ".join(f"{_med([get(r) for r in runs[side]]):>18}" for side in SIDES))


def sink_ratio(m: dict[str, Any], root: Path, records: list[dict[str, Any]], repeat: int,
               file_records: int) -> float:
    """The idempotent sink vs the naive appending one: one session, interleaved, best of ``repeat``."""
    settings = m["settings"].Settings.from_env()

    def fresh(name: str):  # type: ignore[no-untyped-def]
        ctx = m["strategy"].Context(data_dir=root / name, settings=settings, strategy=m["stream_checkpoint"])
        m["stream_checkpoint"].submit(ctx, records)
        return ctx

    spark = m["spark"].build_session(fresh("session"))
    best = {"idempotent": float("inf"), "naive": float("inf")}
    try:
        # A warm-up query first (the session's first query pays for planning and JIT),
        # then the sides interleaved, in alternating order, so both see the same load.
        plan = [("naive", -1)] + [(side, r) for r in range(repeat)
                                  for side in (("idempotent", "naive") if r % 2 == 0 else ("naive", "idempotent"))]
        for side, round_ in plan:
            ctx = fresh(f"{side}-{round_}")
            opener = lambda ctx=ctx: m["stream_checkpoint"].open_store(ctx)  # noqa: E731
            sink = (m["sink"].IdempotentSink(opener, ctx.external) if side == "idempotent"
                    else m["sink"].AppendingSink(opener, ctx.external))
            t0 = time.monotonic()
            m["spark"].start_query(spark, ctx, sink.write, follow=False).awaitTermination()
            if round_ >= 0:
                best[side] = min(best[side], time.monotonic() - t0)
    finally:
        m["spark"].stop_session(spark)
    rates = {side: len(records) / s for side, s in best.items()}
    print(f"sink: {len(records)} records in files of {file_records}, best of {repeat}: idempotent "
          f"{rates['idempotent']:.0f} records/s, naive appending {rates['naive']:.0f} records/s")
    return rates["idempotent"] / rates["naive"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of both sides, alternating (default 3; 0: none, for --sink-repeat alone)")
    parser.add_argument("--plain-records", type=int, default=2000, help="records of the plain run (default 2000)")
    parser.add_argument("--no-plain", action="store_true", help="restarts only")
    parser.add_argument("--sink-repeat", type=int, default=0, help="best of N for the sink ratio (0: skip it)")
    parser.add_argument("--sink-records", type=int, default=2000)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--follow", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--dest", "--package", "--data", "--side"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    parser.add_argument("--t0", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.rounds < 0:
        parser.error("--rounds must be 0 or more (0: the sink ratio only, with --sink-repeat)")
    if shutil.which("java") is None:
        print("MISSED: Java 17 is needed (make java)")
        return 1
    root = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    targets = Targets()
    try:
        generated = scaffold.generate("stream-checkpoint", root / "job", {"project_name": "Bench Stream Job"})
        dest, package = generated.dest, generated.package
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PYSPARK_SUBMIT_ARGS", "SPARK_HOME")}
        env["PYTHONPATH"] = str(dest / "src")
        archive_setting = package.upper() + "_SPARK_CLASS_ARCHIVE"
        envs = {side: {**env, archive_setting: str(root / "classes.jsa") if side == "tuned" else "off"}
                for side in SIDES}
        bench = Path(__file__).resolve()
        restarts: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
        plains: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
        loads: list[float] = []
        if args.rounds:
            started = time.monotonic()
            subprocess.run([sys.executable, "-m", package, "prepare-spark"], env=envs["tuned"], check=True,
                           capture_output=True)
            print(f"prepare-spark (once per machine or image): {time.monotonic() - started:.1f} s, "
                  f"{(root / 'classes.jsa').stat().st_size / 1e6:.0f} MB   (load {os.getloadavg()[0]:.1f})")
            print(f"stream restart and plain run, tuned (as generated, class archive written) vs no_archive vs "
                  f"before (the 2026-11-30 settings), {args.rounds} round(s), the order rotating   ({load_note()})",
                  flush=True)
            for round_ in range(args.rounds):
                order = SIDES[round_ % len(SIDES):] + SIDES[:round_ % len(SIDES)]
                for side in order:
                    loads.append(os.getloadavg()[0])
                    r = restart(bench, dest, package, root / f"restart-{side}-{round_}", side, envs[side])
                    restarts[side].append(r)
                    line = (f"  round {round_ + 1} {side:<6} restart -> first resumed batch "
                            f"{r['first_batch_done']:5.1f} s")
                    if not args.no_plain:
                        p = plain(bench, dest, package, root / f"plain-{side}-{round_}", side, args.plain_records,
                                  envs[side])
                        plains[side].append(p)
                        line += f", plain run of {args.plain_records} records {p['wall']:5.1f} s"
                    print(f"{line}   (load {loads[-1]:.1f})", flush=True)
            print(f"load average over the rounds (1 min): {min(loads):.1f}-{max(loads):.1f}, {os.cpu_count()} cores")
            print_parts("restart (SIGKILL, then run --follow) -> first micro-batch after it through the sink",
                        restarts, "first_batch_done")
            tuned = statistics.median(r["first_batch_done"] for r in restarts["tuned"])
            no_archive = statistics.median(r["first_batch_done"] for r in restarts["no_archive"])
            before = statistics.median(r["first_batch_done"] for r in restarts["before"])
            ratios = sorted(t["first_batch_done"] / b["first_batch_done"] for t, b in zip(restarts["tuned"],
                                                                                          restarts["before"]))
            print(f"restart: tuned {tuned:.1f} s, no_archive {no_archive:.1f} s, before {before:.1f} s; tuned/before "
                  f"by round {statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f}); "
                  f"{targets.at_most('restart -> first resumed batch (s, median)', tuned, TARGET_RESTART_S)} "
                  f"at load {statistics.median(loads):.1f}")
            if not args.no_plain:
                print_parts(f"plain run of {args.plain_records} records (interpreter start -> exit)", plains, "wall")
                wall = {side: statistics.median(p["wall"] for p in plains[side]) for side in SIDES}
                print(f"plain run: tuned {wall['tuned']:.1f} s, no_archive {wall['no_archive']:.1f} s, "
                      f"before {wall['before']:.1f} s "
                      f"({plains['tuned'][0]['batches']} micro-batches)")
        if args.sink_repeat:
            m = load_generated(dest, package, ("stream_checkpoint.spark", "stream_checkpoint.sink",
                                               "stream_checkpoint", "runtime.strategy", "settings", "job"))
            ratio = sink_ratio(m, root / "sink", m["job"].demo_records(args.sink_records), args.sink_repeat,
                               m["settings"].Settings.from_env().batch_size)
            print(f"  ratio {ratio:.2f}: {targets.at_least('idempotent / naive sink', ratio, TARGET_RATIO)}")
        return targets.exit_code() if args.check else 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
