"""Benchmark: what the drill's durability probe costs a commit, now that it reads every one.

    python benchmarks/bench_drill_probe.py [--commits 400] [--rounds 5] [--postgres URL]

The drill's probe (drill/durability.py) reads a state-store connection's settings at EVERY
commit: SQLite's ``synchronous`` and ``journal_mode`` (two pragma reads, no I/O); on
PostgreSQL ``fsync`` and ``synchronous_commit`` inside the transaction, before its COMMIT
(one query, one round trip). Outside a drill the probe is not installed and a commit pays
one attribute read (``probe_hook.observer is None``).

Side by side, in alternating rounds (generated.Pair), commits per second of
``Store.transaction()`` (one small insert each):

1. SQLite, synchronous=FULL (what the project runs with): the drill's probe installed vs not.
   Target: probed / unprobed >= 0.8 (the fsync of each commit dominates).
2. SQLite, synchronous=OFF (no fsync: the probe's own CPU cost laid bare; not a target).
3. PostgreSQL, with ``--postgres URL`` (a database this may write a table into): probed vs not
   (the extra round trip per commit; not a target).

Measured (2 runs, load average 10-13 on 2 shared cores, medians of 5 rounds, 400 commits):
see docs/generated-project.md (Durability) and the commit that added this file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from generated import Pair, Targets, load_generated, load_note  # noqa: E402  (puts the checkout on sys.path)

from advisor import scaffold  # noqa: E402

PACKAGE = "bench_probe_job"
MODULES = ("runtime.store", "runtime.probe_hook", "drill.durability", "settings")


def commit_rate(m: dict[str, Any], data_dir: Path, commits: int, *, probed: bool, synchronous: str,
                url: str = "") -> float:
    """Commits per second of Store.transaction(), with or without the drill's probe installed."""
    settings = m["settings"].Settings(database_url=url)
    probe = None
    if probed:
        (data_dir / "probe").mkdir(parents=True, exist_ok=True)
        probe = m["durability"].Probe(data_dir / "probe", m["store"].STATE_DB).install()
        m["probe_hook"].observer = probe
    try:
        store = m["store"].connect(data_dir, settings, create=True)
        try:
            if store.dialect == "sqlite":
                store.execute(f"PRAGMA synchronous = {synchronous}")
            store.execute("CREATE TABLE IF NOT EXISTS bench_commits (n INTEGER)")
            started = time.perf_counter()
            for n in range(commits):
                with store.transaction():
                    store.execute("INSERT INTO bench_commits (n) VALUES (?)", (n,))
            elapsed = time.perf_counter() - started
            if store.dialect == "postgresql":
                store.execute("DROP TABLE bench_commits")
        finally:
            store.close()
    finally:
        if probe is not None:
            probe.uninstall()
            m["probe_hook"].observer = None
    return commits / elapsed


def pragma_read_us(data_dir: Path, reads: int = 2000) -> float:
    """One ``PRAGMA synchronous`` read on an open WAL connection (what every probed commit adds
    to the probe's old sampling, which read the pragmas on commits 1, 65, 129, ...)."""
    import sqlite3

    data_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(data_dir / "pragma.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    started = time.perf_counter()
    for _ in range(reads):
        conn.execute("PRAGMA synchronous").fetchone()
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed / reads * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--commits", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", default="", help="a PostgreSQL URL to measure on as well")
    args = parser.parse_args()
    targets = Targets()
    print(load_note())
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
        root = Path(tmp)
        generated = scaffold.generate("checkpoint", root / "job", {"project_name": "Bench Probe Job",
                                                                   "package_name": PACKAGE})
        m = load_generated(generated.dest, PACKAGE, MODULES)
        cases = [("sqlite FULL", "FULL", ""), ("sqlite OFF", "OFF", "")]
        if args.postgres:
            cases.append(("postgresql", "", args.postgres))
        print(f"{'commits/s':<14} {'probed':>14} {'unprobed':>11} {'ratio':>6} (range)")
        for name, synchronous, url in cases:
            pair, n = Pair(), 0

            def side(probed: bool) -> float:
                nonlocal n
                n += 1
                return commit_rate(m, root / f"{name.replace(' ', '-')}-{n}", args.commits, probed=probed,
                                   synchronous=synchronous, url=url)

            for _ in range(args.rounds):
                pair.round(lambda: side(True), lambda: side(False))
            print(f"{name:<14} {pair.row()}")
            per_commit_us = (1e6 / min(pair.ours) - 1e6 / max(pair.base)) if pair.ours else 0.0
            if name == "sqlite FULL":
                print(f"  {targets.at_least('sqlite FULL: probed / unprobed', pair.ratio(), 0.8)}")
            else:
                print(f"  (not a target) the probe's read adds about {max(per_commit_us, 0.0):.0f} us per commit "
                      "at worst (slowest probed vs fastest unprobed round)")
        reads = sorted(pragma_read_us(root / f"pragma-{n}") for n in range(3))
        print(f"one PRAGMA synchronous read (the part every commit now pays in a drill): "
              f"{reads[1]:.1f} us (median of 3; {reads[0]:.1f}-{reads[-1]:.1f})")
    return targets.exit_code()


if __name__ == "__main__":
    sys.exit(main())
