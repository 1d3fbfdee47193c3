"""Benchmark: what checkpointing costs, and what it buys, in one run.

    python benchmarks/bench_checkpoint.py [--records 5000] [--batch-size 100] [--repeat 5]
    python benchmarks/bench_checkpoint.py --wal-only         # the WAL page count alone (seconds)
    python benchmarks/bench_checkpoint.py --overhead-only    # the 0 ms fsync-off cell + WAL count, no drill

1. Throughput: the generated checkpoint worker versus a raw SQLite loop doing the
   same work — the same records, the same external calls, the same result rows,
   the same durability pragmas (WAL, synchronous=FULL, busy_timeout) and the same
   batch size — but with no progress tracking (no task row, no offset, no
   intents). Both sides send the same idempotency keys, store results rows of the
   same size and are timed alike: from opening the state database and the service
   to closing both (the worker's ``run()``); the input is in the worker's
   ``task_inputs`` row (read back on the claim) and in the raw loop's memory. Each ratio twice: with the
   simulated service fsyncing every call (as a durable remote API does; the same on
   both sides) and with its fsync off (``ExternalService(durable=False)``: our
   overhead alone, nothing to hide it).
   TARGET (issue 10): checkpointed / raw >= 0.9 at 0 ms of work WITH the service's
   fsync on; >= 0.8 at 0.5 ms, fsync on. TARGET (issue 25): >= 0.9 at 0 ms with the
   service's fsync off too (our overhead alone; until 2026-12-02 printed, not a target).
   It sits on that line: a checkpoint commit writes ~16 WAL pages per batch where the
   raw loop writes ~8 (the next batch's 100 intents inserted and this batch's deleted,
   and the offset update), and the gap is our Python per record (docs/benchmarks.md);
   see "Measured" below. The 0.5 ms fsync-off ratio is printed, not a target.
   WAL pages per batch are counted (not timed) for both sides from the WAL's size,
   2,000 records in one task: the figure a schema change to the hot rows moves.
2. Our own cost per record: the worker's time per record minus the time of the
   job and its calls alone (no state store; service fsync off), beside its floor,
   the fsyncs a batch needs x the fsync time measured in this run / batch size.
   A batch needs ONE fsync: its results + offset + intents done, committed with the
   NEXT batch's intents (which must be durable before that batch's calls). Not a
   target: at batch 100 the fsync share is ~2-3 us per record, less than writing a
   result row alone costs (the raw loop's own cost is printed beside ours).
3. The crash drill (SIGKILL x 10 over 2,000 records): recovery time p50
   (target < 200 ms) and the work redone per kill (target <= one batch).

Every missed target is printed as MISSED and makes the script exit 1.
Measured ranges (3 runs, 2026-11-30, 5 rounds each, load average 16-19 on 2 shared cores: the
disk was saturated by other runs, so read the wall-clock ratios as that load's, not constants):
ratio at 0 ms, service fsync on 0.93-1.40 (TARGET >= 0.9: met in 3 of 3), fsync off 0.57-0.84;
at 0.5 ms on 0.92-1.18 (target >= 0.8: met), off 0.95-1.07. CPU time at 0 ms, fsync off:
checkpointed 45.5-47.8 us/record, raw loop 37.3-41.1, raw/checkpointed 0.82-0.85 (the same code
before this round of work: 0.76-0.77, checkpointed 49.4-50.4 us/record, measured side by side at
the same load). Our cost 45-121 us/record vs a floor of 10-26 (fsync 1.0-2.6 ms): 4.4-5.1 x.
WAL pages written per batch (2,000 records, batch 100; load-independent): checkpointed 27.5
(35.5 before the range delete of intents), raw loop 8.4; of the 19 extra, ~10 are the offset
update (8 of them because the task row holds the task's input and is rewritten whole: 14 pages
for that update alone at 5,000 records, 2 without the input), ~9 the intents. Drill: lost 0, duplicates 0,
70-90 records looked up per kill (<= one batch); recovery p50 299-506 ms (target < 200 MISSED
at this load, as before this work). See docs/strategies-generated.md.
Schema version 4 (2026-12-02: each task's input in its own table, not in the row every batch
updates): WAL pages per batch 27.4 -> 15.8 (raw loop 8.3). Before/after side by side (the v3 tree
and this one, alternating, 3 x 3 rounds of --overhead-only, load 12-17, 2 cores): ratio at 0 ms,
fsync off, medians 0.53/0.73/0.84 before, 0.80/0.86/0.86 after; CPU raw/checkpointed 0.78-0.86
before, 0.85-0.88 after. Still below 0.9: the one fsync per batch and our Python per record.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


from generated import (CostRounds, Pair, Targets, bench_context, drill_bench_parser,  # noqa: E402
                       load_generated, load_note, run_calls_only, service_label)
# (benchmarks/generated.py puts the checkout on sys.path)

from advisor import scaffold  # noqa: E402

PACKAGE = "bench_job"
MODULES = ("checkpoint", "runtime.external", "job", "settings", "runtime.shutdown", "runtime.strategy")

#: Ratio targets per (work per record, service fsync on?); None: printed, not a target.
TARGETS = {(0.0, True): 0.9, (0.0, False): 0.9, (0.5, True): 0.8, (0.5, False): None}
#: One commit per batch: its results + offset + intents done, with the NEXT batch's intents
#: (durable before that batch's calls). The claim is one more per task (task_size records).
FSYNCS_PER_BATCH = 1
WHY = "results + offset (with an idempotent service no intents: the key settles a re-sent call)"
#: Not a target: at batch 100 the fsync share (~2-3 us/record) is smaller than writing a result
#: row alone (~4-5 us), so 2 x the floor is out of reach of any loop that stores its results.
NOT_A_TARGET = "per-record row writes exceed the per-record fsync share at this batch size"


#: The raw loop's task id: the worker's (one task of all the records), so both sides send the
#: same idempotency keys and store results rows of the same size.
RAW_TASK = "demo-00000"


def run_checkpointed(m, data_dir: Path, records: list[dict], batch_size: int, work_ms: float,  # type: ignore[no-untyped-def]
                     durable: bool = True, cpu: list[float] | None = None) -> float:
    """Records per second of the worker's run(); ``cpu`` gets its CPU time (us) per record."""
    settings = m["settings"].Settings(batch_size=batch_size, task_size=len(records))
    ctx = bench_context(m, m["checkpoint"], data_dir, settings, durable=durable)
    m["checkpoint"].submit(ctx, records, work_ms=work_ms)
    started, cpu_started = time.perf_counter(), time.process_time()
    assert m["checkpoint"].run(ctx, m["shutdown"].Shutdown(30)) == 0
    elapsed = time.perf_counter() - started
    if cpu is not None:
        cpu.append((time.process_time() - cpu_started) * 1e6 / len(records))
    assert m["checkpoint"].status(ctx)["done"] == len(records)
    return len(records) / elapsed


def run_raw(m, data_dir: Path, records: list[dict], batch_size: int, work_ms: float,  # type: ignore[no-untyped-def]
            durable: bool = True, cpu: list[float] | None = None, ready: Any = None) -> float:
    """Same work, same durability, same batches; no progress tracking at all.

    Timed like the worker's ``run()``: from opening the state database (the same pragmas)
    and the service to closing both (the last close of a WAL database checkpoints it into
    the main file). Its table is created before the clock starts, as the worker's schema
    is created by ``submit``, outside its timing.
    """
    data_dir.mkdir(parents=True)
    path = data_dir / "raw.db"
    setup = sqlite3.connect(path, isolation_level=None)
    setup.execute("PRAGMA journal_mode = WAL")
    # The project's results table, with its layout (one b-tree by key, since 2026-12-03): only the
    # progress tracking differs between the sides.
    setup.execute("CREATE TABLE results (task_id TEXT, seq INTEGER, record_id TEXT, output TEXT, created_at REAL,"
                  " PRIMARY KEY (task_id, seq)) WITHOUT ROWID")
    setup.close()
    if ready is not None:  # the WAL count: its holder opens here, after the table, before the loop
        ready(path)
    process = m["job"].process_record
    started, cpu_started = time.perf_counter(), time.process_time()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    external = m["external"].ExternalService(data_dir, durable=durable)
    for offset in range(0, len(records), batch_size):
        outputs = []
        for seq in range(offset, min(offset + batch_size, len(records))):
            record = records[seq]
            key = f"{RAW_TASK}/{record['record_id']}"  # the key the worker sends for this record

            def effect(payload, step="", record=record, key=key):  # type: ignore[no-untyped-def]
                return external.apply(record["record_id"], step, key, payload)

            outputs.append((seq, record["record_id"], process(record, effect, work_ms=work_ms)))
        conn.execute("BEGIN IMMEDIATE")
        now = time.time()
        # executemany, as the checkpointed side writes its results: only progress tracking differs.
        conn.executemany("INSERT INTO results VALUES (?, ?, ?, ?, ?)",
                         [(RAW_TASK, seq, record_id, json.dumps(output), now) for seq, record_id, output in outputs])
        conn.execute("COMMIT")
    external.close()
    conn.close()
    elapsed = time.perf_counter() - started
    if cpu is not None:
        cpu.append((time.process_time() - cpu_started) * 1e6 / len(records))
    return len(records) / elapsed


class WalCounter:
    """Frames a run appends to a database's WAL, read from the WAL file's size.

    A connection of ours stays open across the run so the side's last close cannot checkpoint
    and delete the WAL; the size before the run (after the untimed submit or table creation)
    is subtracted. SQLite restarts the WAL from its start after an automatic checkpoint (1,000
    frames), which would undercount: a count that reaches it is refused, not printed.
    """

    HEADER, FRAME_HEADER = 32, 24

    def __init__(self) -> None:
        self.conn: sqlite3.Connection | None = None
        self.path: Path | None = None
        self.start = 0

    def frames(self) -> int:
        assert self.conn is not None and self.path is not None
        page = self.conn.execute("PRAGMA page_size").fetchone()[0]
        wal = self.path.with_name(self.path.name + "-wal")
        size = wal.stat().st_size if wal.exists() else 0
        return max(0, size - self.HEADER) // (page + self.FRAME_HEADER)

    def hold(self, path: Path) -> None:
        self.path, self.conn = path, sqlite3.connect(path)
        self.conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # joins the WAL (its -shm)
        self.start = self.frames()

    def written(self) -> int:
        total = self.frames()
        assert self.conn is not None
        self.conn.close()
        if total >= 1000:
            raise SystemExit(f"WAL count: {total} frames reached the automatic checkpoint; use fewer --wal-records")
        return total - self.start


def wal_pages_per_batch(m, root: Path, records: list[dict], batch_size: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """WAL pages written per batch by the worker's run() and by the raw loop (0 ms, service fsync off:
    the service's own database is another file). Load-independent: counted, not timed."""
    batches = -(-len(records) // batch_size)
    ours = WalCounter()
    settings = m["settings"].Settings(batch_size=batch_size, task_size=len(records))
    ctx = bench_context(m, m["checkpoint"], root / "wal-ck", settings, durable=False)
    m["checkpoint"].submit(ctx, records)
    ours.hold(root / "wal-ck" / "state.db")
    assert m["checkpoint"].run(ctx, m["shutdown"].Shutdown(30)) == 0
    ours_pages = ours.written() / batches
    raw = WalCounter()
    run_raw(m, root / "wal-raw", records, batch_size, 0.0, durable=False, ready=raw.hold)
    return ours_pages, raw.written() / batches


def main() -> int:
    parser = drill_bench_parser(__doc__, drill_records=2000)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=100)
    # 5 rounds, not 3: on the 2 shared cores one round's ratio swings by +-0.3 under load
    # (measured 0.57-1.39 within one run at load 10); the median of 5 moves less.
    parser.set_defaults(repeat=5)
    parser.add_argument("--wal-records", type=int, default=2000,
                        help="records of the WAL page count (one task; under 1,000 WAL frames in all)")
    parser.add_argument("--wal-only", action="store_true",
                        help="print the WAL pages per batch of both sides and stop (seconds; not timed)")
    parser.add_argument("--overhead-only", action="store_true",
                        help="only the 0 ms, service-fsync-off cell (our overhead alone) and the WAL count, no "
                             "drill: a quick before/after of a change to the worker")
    args = parser.parse_args()
    targets = Targets()

    with tempfile.TemporaryDirectory(prefix="bench-checkpoint-") as tmp:
        root = Path(tmp)
        generated = scaffold.generate("checkpoint", root / "project",
                                      {"project_name": "Bench Job", "batch_size": args.batch_size})
        m = load_generated(generated.dest, PACKAGE, MODULES)
        records = m["job"].demo_records(args.records)
        wal_ours, wal_raw = wal_pages_per_batch(m, root, m["job"].demo_records(args.wal_records), args.batch_size)
        wal_line = (f"WAL pages written per batch ({args.wal_records} records in one task, batch {args.batch_size}; "
                    f"counted, not timed): checkpointed {wal_ours:.1f}, raw loop {wal_raw:.1f}")
        if args.wal_only:
            print(wal_line)
            return 0
        rows, cost = [], CostRounds()
        # CPU time per record of both sides at 0 ms, service fsync off: our overhead without
        # the waits on the shared disk, which move the wall-clock ratio by +-0.3 under load.
        cpu_ours: list[float] = []
        cpu_raw: list[float] = []
        for work_ms in ((0.0,) if args.overhead_only else (0.0, 0.5)):
            n = args.records if work_ms == 0 else max(1000, args.records // 5)
            subset = records[:n]
            for durable in ((False,) if args.overhead_only else (True, False)):
                pair = Pair()
                for i in range(args.repeat):
                    tag = f"{work_ms}-{durable}-{i}"

                    own = work_ms == 0 and not durable

                    def worker() -> float:
                        return run_checkpointed(m, root / f"ck-{tag}", subset, args.batch_size, work_ms, durable,
                                                cpu_ours if own else None)

                    def raw_loop() -> float:
                        return run_raw(m, root / f"raw-{tag}", subset, args.batch_size, work_ms, durable,
                                       cpu_raw if own else None)

                    def calls() -> float:
                        return run_calls_only(m, root / f"calls-{tag}", subset, work_ms, "calls")

                    if own:  # our own cost, beside its floor, this round
                        cost.measure(root / f"cost-{tag}", pair, worker, raw_loop, calls)
                    else:
                        pair.round(worker, raw_loop)
                rows.append((work_ms, durable, n, pair))

        report = None if args.overhead_only else scaffold.run_drill(
            generated.dest, records=args.drill_records, kills=args.kills, seed=1, work_ms=0.5)

    print(f"[{load_note()}]")
    print(f"checkpoint strategy, batch size {args.batch_size}, SQLite WAL + synchronous=FULL "
          f"({args.repeat} rounds, sides back to back; medians, ratio range over rounds)")
    print(f"{'work/record':>12} {'external service':>17} {'records':>8} {'checkpointed/s':>14} {'raw loop/s':>11} "
          f"{'ratio':>6} (range)")
    for work_ms, durable, n, pair in rows:
        target = TARGETS[(work_ms, durable)]
        print(f"{work_ms:>10.1f}ms {service_label(durable):>17} {n:>8} {pair.row()}  "
              + (targets.at_least(f"ratio, {work_ms} ms, {service_label(durable)}", pair.ratio(), target) if target
                 else "(not a target: our overhead alone, see the docstring)" if not durable
                 else "(not a target)"))
    cpu_ratios = sorted(r / o for o, r in zip(cpu_ours, cpu_raw))
    print(f"CPU time at 0 ms, service fsync off: checkpointed {statistics.median(cpu_ours):.1f} us/record, raw loop "
          f"{statistics.median(cpu_raw):.1f} (medians); raw/checkpointed {statistics.median(cpu_ratios):.3f} "
          f"({cpu_ratios[0]:.3f}-{cpu_ratios[-1]:.3f}) (not a target: the same comparison without the disk waits)")
    print(wal_line)
    print(cost.line("checkpoint", FSYNCS_PER_BATCH, args.batch_size, WHY, not_a_target=NOT_A_TARGET))
    print(cost.raw_line())
    if report is None:
        return targets.exit_code()
    rec = report["recovery_ms"]
    per_kill = report["redone_work_per_kill"]
    print(f"\ndrill: {report['records']} records, {report['kills']} x SIGKILL, "
          f"lost {report['lost']}, duplicate effects {report['duplicate_effects']}, ok={report['ok']}")
    print(f"recovery ms p50 {rec['p50']}  p95 {rec['p95']}  max {rec['max']}   "
          + targets.at_most("drill recovery p50 ms", rec["p50"] if rec["p50"] is not None else float("inf"), 200))
    print(f"work redone per kill {per_kill} records (lookups {report['lookups']}, redone calls "
          f"{report['redone_calls']}) vs batch size {args.batch_size}: "
          + targets.at_most("work redone per kill", per_kill, args.batch_size))
    print(f"drill throughput {report['throughput']} records/s including {report['kills']} restarts")
    if not report["ok"]:
        targets.missed.append("drill verdict: not ok")
    return targets.exit_code()


if __name__ == "__main__":
    sys.exit(main())
