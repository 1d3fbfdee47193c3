"""Benchmark: the event store on PostgreSQL, beside plain psycopg inserts of the same rows.

    python benchmarks/bench_event_sourcing_pg.py [--database-url URL] [--events 5000]
                                                 [--batch-size 100] [--snapshot-every 100] [--repeat 3] [--json]

The event-sourcing project is generated into a temporary directory and its own
``Events`` application (the ``eventsourcing`` library's PostgreSQL persistence, as
``DATABASE_URL=postgresql://...`` selects it) appends N events to one stream,
``--batch-size`` per ``save()`` (= per commit, as the worker appends them), with a
snapshot every ``--snapshot-every`` events in the same transaction. The baseline, run
side by side in the same database: a plain psycopg loop inserting the very same rows
(the bytes the library stored) into a table of the same shape (primary key
``(originator_id, originator_version)``, a ``bigserial`` notification id), the same
number per transaction, with the table lock the library takes so that ids are
visible in commit order. The ratio library / plain is printed, not a target.

Without ``--database-url`` a throwaway server is started (tests/pg_server.py: loopback,
``fsync=off``): the printed server settings say so, and the figures are then the
client-side cost without the disk. Medians of ``--repeat`` rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from generated import append_processed, load_generated, load_note  # noqa: E402
# (benchmarks/generated.py puts the checkout on sys.path)

from advisor import scaffold  # noqa: E402

PACKAGE = "bench_es_pg_job"
MODULES = ("event_sourcing", "settings", "runtime.strategy")


@contextlib.contextmanager
def database(url: str | None) -> Iterator[str]:
    """A fresh database on the given server, or on a throwaway one."""
    import psycopg

    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from pg_server import postgres_server

        with postgres_server() as server_url:
            yield server_url
        return
    name = f"bench_es_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield f"{url.rpartition('/')[0]}/{name}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def library_append(m: dict[str, Any], url: str, data_dir: Path, events: int, per_commit: int,
                   snapshot_every: int) -> tuple[float, Any]:
    es = m["event_sourcing"]
    settings = m["settings"].Settings(snapshot_every=snapshot_every, database_url=url)
    ctx = m["strategy"].Context(data_dir=data_dir, settings=settings, strategy=es)
    app = es.open_events(ctx, create=True)
    try:
        task = es.Task(task_id=f"bench-{uuid.uuid4().hex}", total=events)
        app.save(task)
        elapsed = append_processed(es, app, task, events, per_commit)
        return events / elapsed, task.id
    finally:
        app.close()


def plain_append(url: str, rows: list[tuple[Any, ...]], per_commit: int, table: str) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (originator_id uuid NOT NULL, originator_version bigint NOT NULL, "
                     "topic text, state bytea, notification_id bigserial, "
                     "PRIMARY KEY (originator_id, originator_version))")
        started = time.perf_counter()
        with conn.cursor() as cur:
            for first in range(0, len(rows), per_commit):
                with conn.transaction():
                    cur.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
                    cur.executemany(f"INSERT INTO {table} (originator_id, originator_version, topic, state) "
                                    "VALUES (%s, %s, %s, %s)", rows[first:first + per_commit])
        return len(rows) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None, help="a PostgreSQL server to use (a fresh database is "
                                                              "created and dropped); default: a throwaway server")
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--snapshot-every", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import psycopg

    with tempfile.TemporaryDirectory(prefix="bench-es-pg-") as tmp, database(args.database_url) as url:
        generated = scaffold.generate("event-sourcing", Path(tmp) / "job",
                                      {"project_name": "Bench Es Pg Job", "state_store": "postgresql"})
        m = load_generated(generated.dest, generated.package, MODULES)
        with psycopg.connect(url) as conn:
            server = {name: str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
                      for name in ("fsync", "synchronous_commit", "server_version")}
        library, plain = [], []
        for round_ in range(args.repeat):
            per_s, stream = library_append(m, url, Path(tmp) / f"d{round_}", args.events, args.batch_size,
                                           args.snapshot_every)
            library.append(per_s)
            with psycopg.connect(url) as conn:
                rows = conn.execute("SELECT originator_id, originator_version, topic, state FROM stored_events "
                                    "WHERE originator_id = %s ORDER BY originator_version", (stream,)).fetchall()
            plain.append(plain_append(url, [tuple(r) for r in rows], args.batch_size, f"plain_{round_}"))
    lib, base = statistics.median(library), statistics.median(plain)
    report = {"events": args.events, "per_commit": args.batch_size, "snapshot_every": args.snapshot_every,
              "server": server, "library_events_per_s": round(lib), "plain_events_per_s": round(base),
              "ratio": round(lib / base, 3), "rounds": args.repeat, "load": load_note()}
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(f"PostgreSQL {server['server_version']} (fsync={server['fsync']}, "
              f"synchronous_commit={server['synchronous_commit']}); {load_note()}")
        print(f"append {args.events} events, {args.batch_size} per commit, snapshot every {args.snapshot_every}: "
              f"library {lib:,.0f} events/s vs plain psycopg {base:,.0f}/s: ratio {lib / base:.2f} "
              f"(median of {args.repeat}; printed, not a target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
