"""Benchmark: what checkpointing costs, and what it buys, in one run.

    python benchmarks/bench_checkpoint.py [--records 5000] [--batch-size 100]

1. Throughput: the generated checkpoint worker versus a raw SQLite loop doing the
   same work — the same records, the same external calls, the same result rows,
   the same durability pragmas (WAL, synchronous=FULL, busy_timeout) and the same
   batch size — but with no progress tracking (no task row, no offset, no
   intents). Target: checkpointed / raw >= 0.8.
2. The crash drill (SIGKILL x 10 over 2,000 records): recovery time p50/p95
   (target p50 < 200 ms) and the work redone per kill (target <= one batch).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path


from generated import drill_bench_parser, load_generated  # noqa: E402  (benchmarks/generated.py; puts the checkout on sys.path)

from advisor import scaffold  # noqa: E402

PACKAGE = "bench_job"
MODULES = ("checkpoint", "external", "job", "settings", "shutdown", "strategy")


def run_checkpointed(m, data_dir: Path, records: list[dict], batch_size: int, work_ms: float) -> float:  # type: ignore[no-untyped-def]
    settings = m["settings"].Settings(batch_size=batch_size, task_size=len(records))
    ctx = m["strategy"].Context(data_dir=data_dir, settings=settings, strategy=m["checkpoint"])
    m["checkpoint"].submit(ctx, records, work_ms=work_ms)
    started = time.perf_counter()
    assert m["checkpoint"].run(ctx, m["shutdown"].Shutdown(30)) == 0
    elapsed = time.perf_counter() - started
    assert m["checkpoint"].status(ctx)["done"] == len(records)
    return len(records) / elapsed


def run_raw(m, data_dir: Path, records: list[dict], batch_size: int, work_ms: float) -> float:  # type: ignore[no-untyped-def]
    """Same work, same durability, same batches; no progress tracking at all."""
    data_dir.mkdir(parents=True)
    conn = sqlite3.connect(data_dir / "raw.db", isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE results (task_id TEXT, seq INTEGER, record_id TEXT, output TEXT, created_at REAL,"
                 " PRIMARY KEY (task_id, seq))")
    external = m["external"].ExternalService(data_dir)
    process = m["job"].process_record
    started = time.perf_counter()
    for offset in range(0, len(records), batch_size):
        outputs = []
        for seq in range(offset, min(offset + batch_size, len(records))):
            record = records[seq]
            key = f"raw/{record['record_id']}"

            def effect(payload, step="", record=record, key=key):  # type: ignore[no-untyped-def]
                return external.apply(record["record_id"], step, key, payload)

            outputs.append((seq, record["record_id"], process(record, effect, work_ms=work_ms)))
        conn.execute("BEGIN IMMEDIATE")
        now = time.time()
        # executemany, as the checkpointed side writes its results: only progress tracking differs.
        conn.executemany("INSERT INTO results VALUES (?, ?, ?, ?, ?)",
                         [("raw", seq, record_id, json.dumps(output), now) for seq, record_id, output in outputs])
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    external.close()
    conn.close()
    return len(records) / elapsed


def main() -> int:
    parser = drill_bench_parser(__doc__, drill_records=2000)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-checkpoint-") as tmp:
        root = Path(tmp)
        generated = scaffold.generate("checkpoint", root / "project",
                                      {"project_name": "Bench Job", "batch_size": args.batch_size})
        m = load_generated(generated.dest, PACKAGE, MODULES)
        records = m["job"].demo_records(args.records)
        rows = []
        for work_ms in (0.0, 0.5):
            n = args.records if work_ms == 0 else max(1000, args.records // 5)
            subset = records[:n]
            best_ck = max(run_checkpointed(m, root / f"ck-{work_ms}-{i}", subset, args.batch_size, work_ms)
                          for i in range(args.repeat))
            best_raw = max(run_raw(m, root / f"raw-{work_ms}-{i}", subset, args.batch_size, work_ms)
                           for i in range(args.repeat))
            rows.append((work_ms, n, best_ck, best_raw, best_ck / best_raw))

        report = scaffold.run_drill(generated.dest, records=args.drill_records, kills=args.kills, seed=1,
                                    work_ms=0.5)

    print(f"checkpoint strategy, batch size {args.batch_size}, SQLite WAL + synchronous=FULL "
          f"(best of {args.repeat})")
    print(f"{'work/record':>12} {'records':>8} {'checkpointed/s':>15} {'raw loop/s':>11} {'ratio':>6}  target")
    for work_ms, n, ck, raw, ratio in rows:
        print(f"{work_ms:>10.1f}ms {n:>8} {ck:>15.0f} {raw:>11.0f} {ratio:>6.2f}  >= 0.80 "
              f"{'ok' if ratio >= 0.8 else 'MISSED'}")
    rec = report["recovery_ms"]
    per_kill = report["redone_work_per_kill"]
    print(f"\ndrill: {report['records']} records, {report['kills']} x SIGKILL, "
          f"lost {report['lost']}, duplicate effects {report['duplicate_effects']}, ok={report['ok']}")
    print(f"recovery ms p50 {rec['p50']}  p95 {rec['p95']}  max {rec['max']}   target p50 < 200 "
          f"{'ok' if rec['p50'] is not None and rec['p50'] < 200 else 'MISSED'}")
    print(f"work redone per kill {per_kill} records (lookups {report['lookups']}, redone calls "
          f"{report['redone_calls']}) vs batch size {args.batch_size}: "
          f"{'ok' if per_kill <= args.batch_size else 'MISSED'}")
    print(f"drill throughput {report['throughput']} records/s including {report['kills']} restarts")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
