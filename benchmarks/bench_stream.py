"""Stream checkpoint: the idempotent foreachBatch sink vs a naive appending one, and restart time.

1. One Spark session (local[2]); its JVM start is timed.
2. The same landing files (``--records`` in files of ``--file-records``) are streamed
   with ``trigger(availableNow=True)`` twice per round, into fresh data directories:
   through the generated ``IdempotentSink`` (batch id + results in one transaction,
   keyed external calls) and through ``AppendingSink`` (appends, no batch id, no
   keys). Interleaved, best of ``--repeat`` each. Target: idempotent / naive
   throughput >= 0.9.
3. Restart: a ``run --follow`` driver is SIGKILLed after its first batch, started
   again, and the time to its first resumed batch is printed beside the JVM start.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from generated import load_generated, load_note  # noqa: E402

from advisor import scaffold  # noqa: E402

TARGET_RATIO = 0.9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--file-records", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("java") is None:
        print("MISSED: Java 17 is needed (make java)")
        return 1
    root = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    try:
        generated = scaffold.generate("stream-checkpoint", root / "job",
                                      {"project_name": "Bench Stream Job", "batch_size": args.file_records})
        m = load_generated(generated.dest, generated.package,
                           ("stream_checkpoint.spark", "stream_checkpoint.sink", "stream_checkpoint",
                            "runtime.strategy", "settings", "job", "runtime.external"))
        settings = m["settings"].Settings.from_env()
        records = m["job"].demo_records(args.records)

        def fresh(name: str):  # type: ignore[no-untyped-def]
            ctx = m["strategy"].Context(data_dir=root / name, settings=settings, strategy=m["stream_checkpoint"])
            m["stream_checkpoint"].submit(ctx, records)
            return ctx

        started = time.monotonic()
        session_ctx = fresh("session")
        spark = m["spark"].build_session(session_ctx)
        jvm_s = time.monotonic() - started
        print(f"JVM + Spark session start: {jvm_s:.1f} s   ({load_note()})")
        best = {"idempotent": float("inf"), "naive": float("inf")}
        try:
            # A warm-up query first (the session's first query pays for planning and JIT),
            # then the sides interleaved, in alternating order, so both see the same load.
            plan = [("naive", -1)] + [(side, r) for r in range(args.repeat)
                                      for side in (("idempotent", "naive") if r % 2 == 0 else ("naive", "idempotent"))]
            for side, round_ in plan:
                ctx = fresh(f"{side}-{round_}")
                opener = lambda ctx=ctx: m["stream_checkpoint"].open_store(ctx)  # noqa: E731
                if side == "idempotent":
                    sink = m["sink"].IdempotentSink(opener, ctx.external)
                else:
                    sink = m["sink"].AppendingSink(opener, ctx.external)
                t0 = time.monotonic()
                query = m["spark"].start_query(spark, ctx, sink.write, follow=False)
                query.awaitTermination()
                if round_ >= 0:
                    best[side] = min(best[side], time.monotonic() - t0)
        finally:
            m["spark"].stop_session(spark)
        rates = {side: args.records / s for side, s in best.items()}
        ratio = rates["idempotent"] / rates["naive"]
        ok_ratio = ratio >= TARGET_RATIO
        print(f"{args.records} records in files of {args.file_records}, best of {args.repeat}:")
        print(f"  idempotent sink {rates['idempotent']:.0f} records/s, naive appending sink {rates['naive']:.0f} records/s")
        print(f"  ratio {ratio:.2f} (target >= {TARGET_RATIO}): {'ok' if ok_ratio else 'MISSED'}")

        restart_s = restart_to_first_batch(generated.dest, generated.package, root / "restart", records)
        print(f"restart -> first resumed batch: {restart_s:.1f} s   (JVM + session start alone: {jvm_s:.1f} s)")
        return 0 if ok_ratio else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _batches(data: Path) -> int:
    try:
        conn = sqlite3.connect(data / "state.db")
        try:
            return int(conn.execute("SELECT COUNT(*) FROM stream_batches").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def restart_to_first_batch(dest: Path, package: str, data: Path, records: list[dict]) -> float:
    env = {**os.environ, "PYTHONPATH": str(dest / "src")}
    cmd = [sys.executable, "-m", package]
    subprocess.run([*cmd, "submit-demo", "--records", str(len(records)), "--work-ms", "2", "--data-dir", str(data)],
                   env=env, check=True, capture_output=True)
    run = [*cmd, "run", "--follow", "--data-dir", str(data)]
    first = subprocess.Popen(run, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while _batches(data) < 1:
        if first.poll() is not None:
            raise SystemExit("the driver exited before its first batch")
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    done = _batches(data)
    t0 = time.monotonic()
    second = subprocess.Popen(run, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while _batches(data) <= done:
            if second.poll() is not None:
                raise SystemExit("the restarted driver exited before a batch")
            time.sleep(0.05)
        return time.monotonic() - t0
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
