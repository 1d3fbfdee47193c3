"""Benchmark: what the event store costs, and what snapshots buy, in one run.

    python benchmarks/bench_event_sourcing.py [--events 10000] [--snapshot-every 100] [--repeat 5] [--json]

The project is generated into a temporary directory (advisor.scaffold.generate,
strategy event-sourcing) and its own code is measured:

1. Append: N events to one stream through the generated ``Events`` application
   (the ``eventsourcing`` library), ONE COMMIT PER EVENT, snapshots every
   ``--snapshot-every`` events — versus a plain ``sqlite3`` loop inserting the very
   same rows (the bytes the library stored) into a table of the same shape, one
   commit per row. Both sides: journal_mode=WAL, synchronous=FULL (checked, not
   assumed). Target: library >= 0.5 x the plain loop.
   The library's append without snapshots is printed too (what snapshotting costs).
2. Rebuild of that stream (N events): from the latest snapshot plus the events after
   it (``repository.get``), versus a full replay of every event. Target: with
   snapshots < 5 ms (median of ``--repeat``).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path


from generated import load_generated  # noqa: E402  (benchmarks/generated.py; puts the checkout on sys.path)

from advisor import scaffold  # noqa: E402

PACKAGE = "bench_es_job"
MODULES = ("event_sourcing", "settings", "strategy")


def pragma(conn_or_cursor, name: str):  # type: ignore[no-untyped-def]
    conn_or_cursor.execute(f"PRAGMA {name}")
    return conn_or_cursor.fetchone()[0] if hasattr(conn_or_cursor, "fetchone") else None


def library_append(m, data_dir: Path, events: int, snapshot_every: int,  # type: ignore[no-untyped-def]
                   per_commit: int = 1) -> dict:
    """N RecordProcessed events on one stream, one app.save() (= one commit) per ``per_commit`` events."""
    es = m["event_sourcing"]
    settings = m["settings"].Settings(snapshot_every=snapshot_every)
    ctx = m["strategy"].Context(data_dir=data_dir, settings=settings, strategy=es)
    app = es.open_events(ctx, create=True)
    with app.recorder.datastore.transaction(commit=False) as cur:
        cur.execute("PRAGMA synchronous")
        synchronous = cur.fetchone()[0]
        cur.execute("PRAGMA journal_mode")
        journal = cur.fetchone()[0]
    task = es.Task(task_id="bench", total=events)
    app.save(task)
    started = time.perf_counter()
    for seq in range(events):
        output = {"output": (seq * seq) % 9973}
        task.record_processed(seq=seq, record_id=f"r{seq:07d}", output=output,
                              effects=[{"step": "", "payload": {"record_id": f"r{seq:07d}", **output}}])
        if (seq + 1) % per_commit == 0 or seq + 1 == events:
            app.save(task)
    elapsed = time.perf_counter() - started
    return {"app": app, "stream": task.id, "per_s": events / elapsed, "s": elapsed,
            "synchronous": synchronous, "journal_mode": journal}


def plain_append(rows: list[tuple], db: Path) -> dict:
    """The same rows, a table of the same shape, one commit per row: no library at all."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, topic TEXT,"
                 " state BLOB, PRIMARY KEY (originator_id, originator_version))")
    synchronous = conn.execute("PRAGMA synchronous").fetchone()[0]
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    started = time.perf_counter()
    for row in rows:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO stored_events VALUES (?, ?, ?, ?)", row)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return {"per_s": len(rows) / elapsed, "s": elapsed, "synchronous": synchronous, "journal_mode": journal}


def median_ms(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--snapshot-every", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5, help="rebuild: median of N")
    parser.add_argument("--append-rounds", type=int, default=3, help="append: best of N interleaved rounds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if min(args.events, args.snapshot_every, args.repeat, args.append_rounds) < 1:
        print("error: --events, --snapshot-every, --repeat and --append-rounds must be at least 1", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="bench-es-") as tmp:
        root = Path(tmp)
        generated = scaffold.generate("event-sourcing", root / "project",
                                      {"project_name": "Bench Es Job", "snapshot_every": args.snapshot_every})
        m = load_generated(generated.dest, PACKAGE, MODULES)
        es = m["event_sourcing"]

        # fsync time varies with whatever else the machine is doing: the three sides
        # run interleaved, --append-rounds times, and each keeps its best round.
        lib = nosnap = plain = None
        for n in range(args.append_rounds):
            this = library_append(m, root / f"lib-{n}", args.events, args.snapshot_every)
            if lib is None or this["per_s"] > lib["per_s"]:
                if lib is not None:
                    lib["app"].close()
                lib = this
                lib_dir = root / f"lib-{n}"
            else:
                this["app"].close()
            other = library_append(m, root / f"lib-nosnap-{n}", args.events, 10**9)
            other["app"].close()
            nosnap = other if nosnap is None or other["per_s"] > nosnap["per_s"] else nosnap
            # The exact rows the library stored for this stream (its Started event excluded).
            conn = sqlite3.connect(lib_dir / "state.db")
            rows = conn.execute("SELECT originator_id, originator_version, topic, state FROM stored_events "
                                "WHERE originator_version > 1 ORDER BY originator_version").fetchall()
            snapshots = conn.execute("SELECT COUNT(*) FROM stored_snapshots").fetchone()[0]
            conn.close()
            this_plain = plain_append(rows, root / f"plain-{n}.db")
            plain = this_plain if plain is None or this_plain["per_s"] > plain["per_s"] else plain

        # For context (not a target): what the generated worker does, batch_size events per commit.
        batched = library_append(m, root / "lib-batched", args.events, args.snapshot_every, per_commit=100)
        batched["app"].close()

        app, stream = lib["app"], lib["stream"]
        from_snapshot = app.repository.get(stream)
        replayed = es.project_aggregate(None, app.events.get(stream))
        assert from_snapshot.state() == replayed.state(), "rebuild from snapshot differs from full replay"
        assert from_snapshot.next_seq == args.events
        with_ms = median_ms(lambda: app.repository.get(stream), args.repeat)
        without_ms = median_ms(lambda: es.project_aggregate(None, app.events.get(stream)), args.repeat)
        app.close()

    ratio = lib["per_s"] / plain["per_s"]
    report = {
        "events": args.events, "snapshot_every": args.snapshot_every, "snapshots": snapshots,
        "append_rounds": args.append_rounds,
        "durability": {"library": {"journal_mode": lib["journal_mode"], "synchronous": lib["synchronous"]},
                       "plain": {"journal_mode": plain["journal_mode"], "synchronous": plain["synchronous"]}},
        "append_per_s": {"library_with_snapshots": round(lib["per_s"]),
                         "library_without_snapshots": round(nosnap["per_s"]),
                         "plain_sqlite3": round(plain["per_s"]),
                         "library_100_per_commit": round(batched["per_s"])},
        "append_ratio": round(ratio, 3),
        "append_ratio_without_snapshots": round(nosnap["per_s"] / plain["per_s"], 3),
        "rebuild_ms": {"with_snapshots": round(with_ms, 3), "full_replay": round(without_ms, 3)},
        "rebuild_speedup": round(without_ms / with_ms, 1) if with_ms else None,
        "targets": {"append_ratio_min": 0.5, "rebuild_with_snapshots_ms_max": 5.0},
    }
    report["ok"] = ratio >= 0.5 and with_ms < 5.0
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return 0 if report["ok"] else 1
    d = report["durability"]
    print(f"event sourcing (eventsourcing library, SQLite), {args.events} events on one stream, "
          f"one commit per event; snapshot every {args.snapshot_every} ({snapshots} snapshots); "
          f"append best of {args.append_rounds} interleaved rounds")
    print(f"durability: library journal_mode={d['library']['journal_mode']} synchronous={d['library']['synchronous']}"
          f"; plain journal_mode={d['plain']['journal_mode']} synchronous={d['plain']['synchronous']} (2 = FULL)")
    a = report["append_per_s"]
    print(f"append/s: library {a['library_with_snapshots']} (without snapshots {a['library_without_snapshots']})"
          f"  plain sqlite3 {a['plain_sqlite3']}  ratio {ratio:.2f}  target >= 0.50 "
          f"{'ok' if ratio >= 0.5 else 'MISSED'}")
    print(f"  (context: the generated worker commits batch_size events at once: "
          f"library at 100 events per commit {a['library_100_per_commit']}/s)")
    print(f"rebuild {args.events} events: from snapshot + tail {with_ms:.2f} ms, full replay {without_ms:.1f} ms "
          f"(x{report['rebuild_speedup']})  target < 5 ms {'ok' if with_ms < 5 else 'MISSED'}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
