"""Benchmark: what the idempotency record costs, in one run.

    python benchmarks/bench_idempotent_retry.py [--records 3000] [--repeat 3]
    python benchmarks/bench_idempotent_retry.py --io-only   # what a task writes (counted, seconds)

Tasks per second of the generated idempotent-retry worker (one task per record:
claim with an optimistic version, the external call carrying the business key,
then the result + the dedupe record + the task's status in one transaction, which
also claims the next task) beside a raw loop producing the same effects — the same
external calls (with the same keys), the same result rows, one transaction per
task, the same durability pragmas (WAL, synchronous=FULL, busy_timeout) — but with
no task table, no claim and no idempotency record. Both sides run in the same
process, same temp dir, back to back in each of --repeat rounds (the ratio is the
median of the rounds' ratios, printed with their range). Each ratio twice: with the simulated service
fsyncing every call and with its fsync off (our overhead alone). A further row runs
the worker against a service failing 20 % of calls transiently (tenacity retries
them; mostly backoff sleeping). The ratios are printed, not targets.

Our own cost per task (worker time minus the job and its call alone, service fsync
off) beside its floor: ONE fsync per task (the result + dedupe record + status must
be durable; the next task's claim rides in the same commit — it needs no commit of
its own, as a task whose claim is lost is simply re-run whole under its key).
Target: our cost <= 2 x the floor. Then the SIGKILL drill (10 kills; its verdict
must be ok). Every missed target is printed as MISSED and makes the script exit 1.
Measured ranges (3 runs, 2026-11-30, load average 4-16 on 2 shared cores; medians of rounds):
ratio at 0 ms, service fsync on 0.62-1.05, off 0.55-0.79; at 0.5 ms on 0.84-1.01, off 0.88-1.01;
20 % failures 0.28-0.67. Our cost 369-2,026 us/task vs a floor of 217-1,211 us: 1.67-2.75 x
(target <= 2: met in 2 of 3 runs). See docs/strategies-generated.md.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


from generated import (CostRounds, Pair, Targets, bench_context, drill_bench_parser,  # noqa: E402
                       load_generated, load_note, run_calls_only, service_label)
# (benchmarks/generated.py puts the checkout on sys.path)

from advisor import scaffold  # noqa: E402

PACKAGE = "bench_ir_job"
MODULES = ("idempotent_retry", "runtime.external", "job", "settings", "runtime.shutdown", "runtime.strategy")

#: Ratio targets per (work per record, service fsync on?); None: printed, not a target.
TARGETS = {(0.0, True): None, (0.0, False): None, (0.5, True): None, (0.5, False): None}
#: The result + dedupe record + status must be durable once per task; the next task's claim rides in
#: the same commit (it needs none of its own: a killed claim's task is re-run whole under its key).
FSYNCS_PER_TASK = 1
WHY = "result + dedupe record + status, with the next task's claim"


def run_worker(m: dict, data_dir: Path, records: list[dict], work_ms: float, fail_rate: float = 0.0,
               durable: bool = True) -> float:
    strategy = m["idempotent_retry"]
    ctx = bench_context(m, strategy, data_dir, m["settings"].Settings(), durable=durable)
    strategy.submit(ctx, records, work_ms=work_ms)
    if fail_rate:
        service = ctx.external()
        service.set_failure_rate(fail_rate)
        service.close()
    started = time.perf_counter()
    assert strategy.run(ctx, m["shutdown"].Shutdown(30)) == 0
    elapsed = time.perf_counter() - started
    assert strategy.status(ctx)["done"] == len(records)
    return len(records) / elapsed


def run_raw(m: dict, data_dir: Path, records: list[dict], work_ms: float, durable: bool = True) -> float:
    """The same effects, one transaction per task, no idempotency record and no task table."""
    data_dir.mkdir(parents=True)
    conn = sqlite3.connect(data_dir / "raw.db", isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    # The project's results table, with its layout (one b-tree by key, since 2026-12-03).
    conn.execute("CREATE TABLE results (task_id TEXT PRIMARY KEY, business_key TEXT, output TEXT, created_at REAL)"
                 " WITHOUT ROWID")
    external = m["external"].ExternalService(data_dir, durable=durable)
    process = m["job"].process_record
    started = time.perf_counter()
    for n, record in enumerate(records):
        key = f"demo-payment/{record['record_id']}"

        def effect(payload, step="", record=record, key=key):  # type: ignore[no-untyped-def]
            return external.apply(record["record_id"], step, key, payload)

        output = process(record, effect, work_ms=work_ms)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO results VALUES (?, ?, ?, ?)", (f"task-{n:07d}", key, json.dumps(output), time.time()))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    external.close()
    conn.close()
    return len(records) / elapsed


def written(run: Callable[[], object]) -> tuple[int, int]:
    """Bytes passed to write calls and the number of those calls while ``run`` runs (this
    process's /proc/self/io: both databases' WAL writes; counted, not timed)."""
    def now() -> tuple[int, int]:
        fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines() if line)
        return int(fields["wchar"]), int(fields["syscw"])

    before = now()
    run()
    after = now()
    return after[0] - before[0], after[1] - before[1]


def io_line(m: dict, root: Path, records: list[dict]) -> str:
    """What a task writes, the worker beside the raw loop (service fsync off: the same writes, faster)."""
    worker = written(lambda: run_worker(m, root / "io-worker", records, 0.0, durable=False))
    raw = written(lambda: run_raw(m, root / "io-raw", records, 0.0, durable=False))
    per = [f"{b / len(records) / 1024:.1f} KB in {c / len(records):.1f} writes" for b, c in (worker, raw)]
    return (f"written per task, both databases ({len(records)} tasks; counted, not timed): "
            f"worker {per[0]}, raw loop {per[1]}")


def main() -> int:
    parser = drill_bench_parser(__doc__, drill_records=2000)
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--io-only", action="store_true", help="only what a task writes (seconds)")
    args = parser.parse_args()
    targets = Targets()

    with tempfile.TemporaryDirectory(prefix="bench-idempotent-retry-") as tmp:
        root = Path(tmp)
        generated = scaffold.generate("idempotent-retry", root / "project", {"project_name": "Bench Ir Job"})
        m = load_generated(generated.dest, PACKAGE, MODULES)
        records = m["job"].demo_records(args.records)
        io = io_line(m, root, records[:2000])
        if args.io_only:
            print(io)
            return 0
        rows, cost = [], CostRounds()
        for work_ms in (0.0, 0.5):
            n = args.records if work_ms == 0 else max(1000, args.records // 3)
            subset = records[:n]
            for durable in (True, False):
                pair = Pair()
                for i in range(args.repeat):
                    tag = f"{work_ms}-{durable}-{i}"

                    def run() -> float:
                        return run_worker(m, root / f"ir-{tag}", subset, work_ms, durable=durable)

                    def raw_loop() -> float:
                        return run_raw(m, root / f"raw-{tag}", subset, work_ms, durable)

                    def calls() -> float:
                        return run_calls_only(m, root / f"calls-{tag}", subset, work_ms, "demo-payment")

                    if work_ms == 0 and not durable:  # our own cost, beside its floor, this round
                        cost.measure(root / f"cost-{tag}", pair, run, raw_loop, calls)
                    else:
                        pair.round(run, raw_loop)
                rows.append((work_ms, durable, f"{work_ms:.1f} ms", n, pair))
        n = max(1000, args.records // 3)
        flaky = Pair()
        for i in range(args.repeat):
            flaky.round(lambda: run_worker(m, root / f"flaky-{i}", records[:n], 0.0, fail_rate=0.2),
                        lambda: run_raw(m, root / f"flaky-raw-{i}", records[:n], 0.0, True))
        rows.append((None, True, "0.0 ms, 20 % transient failures", n, flaky))
        report = scaffold.run_drill(generated.dest, records=args.drill_records, kills=args.kills, seed=1, work_ms=0.5)

    print(f"[{load_note()}]")
    print(f"idempotent-retry, one task per record, SQLite WAL + synchronous=FULL on both sides "
          f"({args.repeat} rounds, sides back to back; medians, ratio range over rounds)")
    print(f"{'work/record':>32} {'external service':>17} {'tasks':>6} {'with key/s':>14} {'without/s':>11} "
          f"{'ratio':>6} (range)")
    for work_ms, durable, label, n, pair in rows:
        target = TARGETS.get((work_ms, durable))
        print(f"{label:>32} {service_label(durable):>17} {n:>6} {pair.row()}  "
              + (targets.at_least(f"ratio, {label}, {service_label(durable)}", pair.ratio(), target) if target
                 else "(not a target)"))
    print(io)
    print(cost.line("idempotent-retry", FSYNCS_PER_TASK, 1, WHY, targets))
    print(cost.raw_line())
    rec = report["recovery_ms"]
    print(f"\ndrill: {report['records']} records, {report['kills']} x SIGKILL: lost {report['lost']}, "
          f"duplicates {report['duplicate_effects']}, redone calls {report['redone_calls']} (answered 'duplicate'), "
          f"recovery p50 {rec['p50']} ms p95 {rec['p95']} ms, {report['throughput']} records/s, ok={report['ok']}")
    if not report["ok"]:
        targets.missed.append("drill verdict: not ok")
    return targets.exit_code()


if __name__ == "__main__":
    sys.exit(main())
