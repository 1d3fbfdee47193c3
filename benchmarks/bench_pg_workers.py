"""Benchmark: the checkpoint project with 1/2/4/8 workers on one PostgreSQL.

    python benchmarks/bench_pg_workers.py [--records 4000] [--work-ms 5] [--workers 1,2,4,8]
                                          [--rounds 2] [--task-size 100] [--pg-fsync off] [--check]

A throwaway PostgreSQL 15 (tests/pg_server.py: 127.0.0.1 only, stopped and deleted at the
end), a fresh database per run. Each run: ``submit-demo --records N --work-ms W`` (untimed),
then K ``python -m bench_job run`` processes started together, timed from outside from the
first start to the last exit (interpreter starts included). The work is I/O-bound (W ms of
sleep per record), so K workers could ideally go K times as fast as one: efficiency =
rate(K) / (K x rate(1)), rate(1) the median of the 1-worker rounds of this run.

Each worker has its own ``--data-dir`` and so its own simulated external service
(external.db): one shared SQLite file would make the service's own write lock, not ours,
the limit. The effects are counted over all of them (every record exactly once).

Printed per K: records/s (median, range over rounds), efficiency, PostgreSQL commits/s
(``xact_commit`` of the database in ``pg_stat_database``, before and after) and commits per
batch, the workers' CPU time per record (user + system, from the children's rusage), and the
load. ``--check``: exit 1 when the efficiency at the largest K under 4 (2 workers) falls below
0.7 (a noisy shared machine; without it the script reports only). docs/one-machine-to-many.md.

**The store's own ceiling** (``--ceiling 1,4,16,32``, on by default): where the database, not
the workers, is the limit. C client threads (psycopg; a thread waits on the server with the
GIL released) each commit the checkpoint's own transaction over and over for ``--ceiling-s``
seconds — the task row's offset update guarded by ``WHERE processed_offset = ?`` and a batch's
``batch_size`` result rows (made by the server with generate_series, so that the client's own
Python is not what is measured) — against one task row per thread in the same throwaway server.
Printed: commits/s and the records/s they would checkpoint (commits x batch), and the client
process's CPU per commit (when the client's cores are the limit, the server's ceiling is higher
than printed). Beside the workers' rate above, it says how many such workers one server holds.
"""

from __future__ import annotations

import argparse
import os
import threading
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from advisor import scaffold  # noqa: E402
from pg_server import create_database, postgres_server  # type: ignore[import-not-found]  # noqa: E402

PACKAGE = "bench_job"
CHECK_WORKERS, CHECK_EFFICIENCY = 2, 0.7


def xact_commit(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone()
    assert row is not None  # the database we are connected to is in its own statistics
    return int(row[0])


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def effects(dirs: list[Path]) -> int:
    total = 0
    for d in dirs:
        if (d / "external.db").exists():
            conn = sqlite3.connect(d / "external.db")
            total += int(conn.execute("SELECT COUNT(DISTINCT record_id) FROM effects").fetchone()[0])
            conn.close()
    return total


def one_run(dest: Path, server_url: str, root: Path, workers: int, args: argparse.Namespace,
            tag: str) -> dict[str, float]:
    url = create_database(server_url, "bench")
    env = {**os.environ, "PYTHONPATH": str(dest / "src"), "DATABASE_URL": url,
           "BENCH_JOB_TASK_SIZE": str(args.task_size)}
    dirs = [root / f"{tag}-w{i}" for i in range(workers)]
    for d in dirs:
        d.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", PACKAGE, "submit-demo", "--records", str(args.records),
                    "--work-ms", str(args.work_ms), "--data-dir", str(dirs[0])],
                   env=env, check=True, capture_output=True, cwd=dest)
    commits_before, cpu_before = xact_commit(url), children_cpu()
    began = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", PACKAGE, "run", "--data-dir", str(d)], env=env, cwd=dest,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for d in dirs]
    errors = [p.communicate()[1] for p in procs]  # a worker's log: its last lines if it failed
    codes = [p.returncode for p in procs]
    seconds = time.perf_counter() - began
    commits, cpu = xact_commit(url) - commits_before, children_cpu() - cpu_before
    if any(codes) or effects(dirs) != args.records:
        raise SystemExit(f"{workers} workers: exit codes {codes}, {effects(dirs)} records with effects "
                         f"of {args.records}; " + " | ".join(e.strip()[-300:] for e, c in zip(errors, codes) if c))
    return {"rate": args.records / seconds, "commits_s": commits / seconds,
            "commits_per_batch": commits / (args.records / args.batch_size),
            "cpu_us": cpu * 1e6 / args.records}


CEILING_SCHEMA = """
CREATE TABLE tasks (task_id text PRIMARY KEY, processed_offset bigint NOT NULL, updated_at double precision);
CREATE TABLE results (task_id text, seq bigint, record_id text, output text, created_at double precision,
                      PRIMARY KEY (task_id, seq))"""
#: The checkpoint's transaction (checkpoint/worker.py): the offset moved under its optimistic lock,
#: the batch's results inserted, one commit.
ADVANCE = "UPDATE tasks SET processed_offset = %s, updated_at = %s WHERE task_id = %s AND processed_offset = %s"
#: The batch's result rows, made by the server (generate_series): the same rows written, without
#: the client's per-row Python, which would make the client's cores the limit measured.
RESULTS = ("INSERT INTO results SELECT %s, seq, 'r' || seq, '{\"ok\": true}', %s "
           "FROM generate_series(%s::bigint, %s::bigint) AS seq")


def ceiling(server_url: str, clients: int, seconds: float, batch: int) -> dict[str, float]:
    """Commits/s of ``clients`` threads each committing checkpoint-shaped transactions."""
    import psycopg

    url = create_database(server_url, "ceiling")
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in CEILING_SCHEMA.split(";"):
            conn.execute(statement)
        conn.cursor().executemany("INSERT INTO tasks VALUES (%s, 0, 0)", [(f"t{i}",) for i in range(clients)])
    counts = [0] * clients
    start = threading.Barrier(clients + 1)
    stop = threading.Event()

    def client(i: int) -> None:
        task = f"t{i}"
        with psycopg.connect(url) as conn:
            start.wait()
            offset = 0
            while not stop.is_set():
                now = time.time()
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute(ADVANCE, (offset + batch, now, task, offset))
                    cur.execute(RESULTS, (task, now, offset, offset + batch - 1))
                offset += batch
                counts[i] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    cpu0, began = time.process_time(), time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu0
    commits = sum(counts)
    return {"commits_s": commits / elapsed, "records_s": commits * batch / elapsed,
            "client_cpu_us": cpu * 1e6 / max(commits, 1)}


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=4000)
    parser.add_argument("--work-ms", type=float, default=5.0)
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--task-size", type=int, default=100, help="records per task (the unit a worker claims)")
    parser.add_argument("--pg-fsync", choices=("on", "off"), default="on",
                        help="the throwaway server's fsync (on: commits are as durable as in production)")
    parser.add_argument("--ceiling", default="1,4,16,32",
                        help="client threads of the store's commit ceiling (comma list; empty: skip it)")
    parser.add_argument("--ceiling-s", type=float, default=5.0, help="seconds per ceiling point")
    parser.add_argument("--check", action="store_true",
                        help=f"exit 1 when {CHECK_WORKERS} workers run below {CHECK_EFFICIENCY} of ideal")
    args = parser.parse_args()
    args.counts = [int(k) for k in args.workers.split(",")]
    args.ceilings = [int(c) for c in args.ceiling.split(",") if c.strip()]
    return args


def main() -> int:
    args = parse()
    with tempfile.TemporaryDirectory(prefix="bench-pg-workers-") as tmp:
        root = Path(tmp)
        generated = scaffold.generate("checkpoint", root / "project", {"project_name": "Bench Job"})
        dest = generated.dest
        args.batch_size = int(subprocess.run(
            [sys.executable, "-c", f"from {PACKAGE}.settings import Settings; print(Settings().batch_size)"],
            env={**os.environ, "PYTHONPATH": str(dest / "src")}, capture_output=True, text=True,
            check=True).stdout)
        runs: dict[int, list[dict[str, float]]] = {k: [] for k in args.counts}
        loads = []
        with postgres_server(fsync=args.pg_fsync == "on") as server_url:
            for r in range(args.rounds):
                order = args.counts if r % 2 == 0 else list(reversed(args.counts))
                for k in order:
                    loads.append(os.getloadavg()[0])
                    runs[k].append(one_run(dest, server_url, root, k, args, f"r{r}-k{k}"))
            ceilings = {c: ceiling(server_url, c, args.ceiling_s, args.batch_size) for c in args.ceilings}
    one = statistics.median(x["rate"] for x in runs[min(args.counts)]) / min(args.counts)
    print(f"checkpoint project on one PostgreSQL 15 (loopback, fsync={args.pg_fsync}), {args.records} records, "
          f"{args.work_ms:g} ms of sleep each, task size {args.task_size}, batch {args.batch_size}; "
          f"{args.rounds} rounds, worker counts alternating; K `run` processes timed from outside (starts "
          f"included); load average {min(loads):.1f}-{max(loads):.1f} over the runs, {os.cpu_count()} cores")
    print(f"{'workers':>7}  {'records/s':>18}  {'of ideal':>8}  {'PG commits/s':>18}  {'commits/batch':>13}  "
          f"{'worker CPU us/record':>20}")
    efficiency = {}
    for k in args.counts:
        rates = [x["rate"] for x in runs[k]]
        efficiency[k] = statistics.median(rates) / (k * one)
        commits = [x["commits_s"] for x in runs[k]]
        print(f"{k:>7}  {statistics.median(rates):>6.0f} ({min(rates):.0f}-{max(rates):.0f}){'':>3}  "
              f"{efficiency[k]:>7.0%}  {statistics.median(commits):>6.0f} ({min(commits):.0f}-{max(commits):.0f})"
              f"{'':>3}  {statistics.median(x['commits_per_batch'] for x in runs[k]):>13.2f}  "
              f"{statistics.median(x['cpu_us'] for x in runs[k]):>20.0f}")
    if ceilings:
        per_worker = one  # records/s of one worker at this work per record
        print(f"\nthe store's own ceiling: the checkpoint's transaction (offset update + {args.batch_size} result "
              f"rows, one commit) from C client threads, {args.ceiling_s:g} s each, same server")
        print(f"{'clients':>7}  {'commits/s':>9}  {'records/s checkpointed':>22}  {'client CPU us/commit':>20}  "
              f"{'workers it holds':>16}")
        for c, x in ceilings.items():
            print(f"{c:>7}  {x['commits_s']:>9.0f}  {x['records_s']:>22.0f}  {x['client_cpu_us']:>20.0f}  "
                  f"{x['records_s'] / per_worker:>16.0f}")
        print(f"(workers it holds: records/s checkpointed / one worker's {per_worker:.0f} records/s at "
              f"{args.work_ms:g} ms per record; the workers' own CPU and each one's external service not counted)")
    missed = CHECK_WORKERS in efficiency and efficiency[CHECK_WORKERS] < CHECK_EFFICIENCY
    if missed:
        print(f"MISSED: {CHECK_WORKERS} workers at {efficiency[CHECK_WORKERS]:.0%} of ideal "
              f"(target >= {CHECK_EFFICIENCY:.0%})")
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
