"""Benchmark: what a persisted, declared state machine costs, in one run.

    python benchmarks/bench_state_machine.py [--orders 1000] [--repeat 3]

1. Transitions per second with persistence: the generated orchestrator's
   ``transition()`` (the move checked against the declared ``OrderFlow``, then
   ``UPDATE orders ... WHERE state = ? AND version = ?`` + a ``transitions`` log
   row, one transaction per transition), beside the same number of plain
   single-row updates (``UPDATE orders SET state = ? WHERE order_id = ?``, one
   transaction each). Same durability on both sides (WAL, synchronous=FULL).
   Target: ratio >= 0.5.
2. Whole orders (reserve, charge, notify: three external calls each) per second:
   the orchestrator (intent before each call, confirmation with the transition)
   beside a bare loop making the same calls and plain state updates.
3. The SIGKILL drill (10 kills): lost, duplicates, lookups, recovery time.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from pathlib import Path


from generated import drill_bench_parser, load_generated  # noqa: E402  (benchmarks/generated.py; puts the checkout on sys.path)

from advisor import scaffold  # noqa: E402

PACKAGE = "bench_sm_job"
MODULES = ("state_machine", "external", "job", "settings", "shutdown", "strategy")


def context(m: dict, data_dir: Path):  # type: ignore[no-untyped-def]
    return m["strategy"].Context(data_dir=data_dir, settings=m["settings"].Settings(), strategy=m["state_machine"])


def raw_db(path: Path, n: int) -> sqlite3.Connection:
    path.mkdir(parents=True)
    conn = sqlite3.connect(path / "raw.db", isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE orders (order_id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at REAL)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO orders VALUES (?, 'new', 0)", [(f"r{i:07d}",) for i in range(n)])
    conn.execute("COMMIT")
    return conn


def sm_transitions(m: dict, data_dir: Path, records: list[dict]) -> float:
    sm = m["state_machine"]
    ctx = context(m, data_dir)
    sm.submit(ctx, records)
    worker = sm.Orchestrator(ctx, sm.open_store(ctx), ctx.external(), m["shutdown"].Shutdown(30))
    orders = []
    for _ in records:
        orders.append(worker.claim())
    started = time.perf_counter()
    for order in orders:
        for step in sm.STEPS:
            worker.transition(order, step, step=step, response={"status": "applied"})
    elapsed = time.perf_counter() - started
    assert all(o["state"] == "done" for o in orders)
    worker.store.close()
    return len(records) * len(sm.STEPS) / elapsed


def plain_updates(data_dir: Path, n: int, steps: int) -> float:
    conn = raw_db(data_dir, n)
    started = time.perf_counter()
    for i in range(n):
        for state in ("reserved", "charged", "done")[:steps]:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE orders SET state = ?, updated_at = ? WHERE order_id = ?", (state, time.time(), f"r{i:07d}"))
            conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return n * steps / elapsed


def sm_orders(m: dict, data_dir: Path, records: list[dict]) -> float:
    sm = m["state_machine"]
    ctx = context(m, data_dir)
    sm.submit(ctx, records)
    started = time.perf_counter()
    assert sm.run(ctx, m["shutdown"].Shutdown(30)) == 0
    elapsed = time.perf_counter() - started
    assert sm.status(ctx)["done"] == len(records)
    return len(records) / elapsed


def bare_orders(m: dict, data_dir: Path, records: list[dict]) -> float:
    """The same three calls per order (same keys) and plain state updates; no intents, no log."""
    conn = raw_db(data_dir, len(records))
    external = m["external"].ExternalService(data_dir)
    process = m["job"].process_record
    started = time.perf_counter()
    for record in records:
        order_id = record["record_id"]
        for step, state in (("reserve", "reserved"), ("charge", "charged"), ("notify", "done")):
            key = f"{order_id}/{step}"
            if step == "charge":
                process(record, lambda payload, s="", k=key: external.apply(order_id, "charge", k, payload))
            else:
                external.apply(order_id, step, key, {"order_id": order_id})
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE orders SET state = ?, updated_at = ? WHERE order_id = ?", (state, time.time(), order_id))
            conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    external.close()
    conn.close()
    return len(records) / elapsed


def main() -> int:
    parser = drill_bench_parser(__doc__, drill_records=500)
    parser.add_argument("--orders", type=int, default=1000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-state-machine-") as tmp:
        root = Path(tmp)
        generated = scaffold.generate("state-machine", root / "project", {"project_name": "Bench Sm Job"})
        m = load_generated(generated.dest, PACKAGE, MODULES)
        records = m["job"].demo_records(args.orders)
        steps = len(m["state_machine"].STEPS)
        sm_t = max(sm_transitions(m, root / f"sm-t-{i}", records) for i in range(args.repeat))
        plain_t = max(plain_updates(root / f"plain-t-{i}", args.orders, steps) for i in range(args.repeat))
        sm_o = max(sm_orders(m, root / f"sm-o-{i}", records) for i in range(args.repeat))
        bare_o = max(bare_orders(m, root / f"bare-o-{i}", records) for i in range(args.repeat))
        report = scaffold.run_drill(generated.dest, records=args.drill_records, kills=args.kills, seed=1, work_ms=0.5)

    ratio = sm_t / plain_t
    print(f"state-machine, SQLite WAL + synchronous=FULL on both sides (best of {args.repeat})")
    print(f"{'':>44} {'state machine':>14} {'plain':>8} {'ratio':>6}")
    print(f"{'transitions/s (checked + logged vs UPDATE)':>44} {sm_t:>14.0f} {plain_t:>8.0f} {ratio:>6.2f}  "
          f"target >= 0.50 {'ok' if ratio >= 0.5 else 'MISSED'}")
    print(f"{'orders/s (3 calls; intents vs bare calls)':>44} {sm_o:>14.0f} {bare_o:>8.0f} {sm_o / bare_o:>6.2f}")
    rec = report["recovery_ms"]
    print(f"\ndrill: {report['records']} orders ({report['expected_effects']} steps), {report['kills']} x SIGKILL: "
          f"lost {report['lost']}, duplicates {report['duplicate_effects']}, redone calls {report['redone_calls']}, "
          f"lookups {report['lookups']}, recovery p50 {rec['p50']} ms p95 {rec['p95']} ms, ok={report['ok']}")
    return 0 if report["ok"] and ratio >= 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
