"""Shared by the strategy benchmarks: import the modules of a project generated into a temp dir.

The benchmarks call the generated code in-process (no subprocess start-up in the figures),
so they put the project's ``src/`` on ``sys.path`` and import its modules by name.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the advisor itself, when run from a checkout


def load_generated(dest: Path, package: str, modules: tuple[str, ...]) -> dict[str, ModuleType]:
    """``{name: module}`` for ``package.name`` of the project generated in ``dest``."""
    sys.path.insert(0, str(dest / "src"))
    return {name: importlib.import_module(f"{package}.{name}") for name in modules}


def drill_bench_parser(doc: str | None, *, drill_records: int) -> argparse.ArgumentParser:
    """The flags every strategy benchmark shares: best-of-N throughput runs, then a crash drill."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    parser.add_argument("--repeat", type=int, default=3, help="best of N throughput runs")
    parser.add_argument("--drill-records", type=int, default=drill_records)
    parser.add_argument("--kills", type=int, default=10)
    return parser


# ------------------------------------------------------------------ our own cost
def fsync_samples(directory: Path, samples: int = 100) -> list[float]:
    """Times (µs) of the smallest durable commit on this disk: one row, WAL, synchronous=FULL."""
    directory.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(directory / "fsync-probe.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS probe (n INTEGER)")
    times = []
    for n in range(samples):
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO probe VALUES (?)", (n,))
        conn.execute("COMMIT")
        times.append((time.perf_counter() - started) * 1e6)
    conn.close()
    return times


def fsync_us(directory: Path, samples: int = 100) -> float:
    """Median time (µs) of the smallest durable commit on this disk (see fsync_samples)."""
    return statistics.median(fsync_samples(directory, samples))


class CostRounds:
    """Our own cost per record beside its floor, measured round by round.

    Each round times the worker (service fsync off), then the same job and calls with no
    state store, and probes the fsync time just before and just after the worker: the
    floor of a round is measured under the same machine load as its cost (the 2 cores
    are shared, and the fsync time moves by 10x with the load).
    """

    def __init__(self) -> None:
        self.rounds: list[tuple[float, float, float]] = []  # (worker/s, calls alone/s, fsync µs)
        self.raw_own: list[float] = []  # µs per record the raw loop adds to the calls alone

    def measure(self, directory: Path, worker: Any, calls: Any, raw: Any = None) -> tuple[float, float]:
        """Run ``worker()``, ``calls()`` and ``raw()`` (each returns records/s): (worker's, raw's rate)."""
        before = fsync_samples(directory / "probe-before")
        rate = worker()
        after = fsync_samples(directory / "probe-after")
        alone = calls()
        self.rounds.append((rate, alone, statistics.median(before + after)))
        raw_rate = raw() if raw is not None else 0.0
        if raw_rate:
            self.raw_own.append(1e6 / raw_rate - 1e6 / alone)
        return rate, raw_rate

    def raw_line(self) -> str:
        return (f"  (the raw loop's own cost beside the same calls: {statistics.median(self.raw_own):.1f} us/record, "
                f"median round)") if self.raw_own else ""

    def line(self, name: str, fsyncs: float, per: float, why: str, targets: Targets | None = None, *,
             not_a_target: str = "") -> str:
        """Our cost = the worker's time per record minus the job and calls alone; floor = fsyncs a
        batch needs x fsync time / records per batch. The round with the median ratio is shown;
        with ``targets``, that ratio must be at most 2; without, ``not_a_target`` says why not."""
        rows = sorted((1e6 / w - 1e6 / c, fsyncs * f / per, f) for w, c, f in self.rounds)
        rows.sort(key=lambda r: r[0] / r[1])
        ours, floor, fsync = rows[len(rows) // 2]
        ratio = ours / floor
        verdict = (targets.at_most(f"{name}: our cost / floor", ratio, 2.0) if targets
                   else f"(not a target: {not_a_target})")
        return (f"{name}: our cost {ours:.1f} us/record, floor {floor:.2f} us/record ({fsyncs:g} fsync(s) x "
                f"{fsync:.0f} us / {per:g} records: {why}); {ratio:.2f} x the floor "
                f"(median round; rounds {', '.join(f'{o / fl:.2f}' for o, fl, _f in rows)}), {verdict}")


def bench_context(m: dict[str, ModuleType], strategy: ModuleType, data_dir: Path, settings: Any, *,
                  durable: bool):  # type: ignore[no-untyped-def]
    """The generated Context, except that its external service fsyncs each call only if ``durable``."""
    service = m["external"].ExternalService

    class BenchContext(m["strategy"].Context):  # type: ignore[name-defined,misc]
        def external(self):  # type: ignore[no-untyped-def]
            return service(self.data_dir, failure_rate=self.settings.external_failure_rate,
                           busy_timeout_ms=self.settings.busy_timeout_ms, durable=durable)

    return BenchContext(data_dir=data_dir, settings=settings, strategy=strategy)


def service_label(durable: bool) -> str:
    return "service fsync on " if durable else "service fsync off"


class Targets:
    """Every target a benchmark states: printed as ok/MISSED, and any miss makes it exit 1."""

    def __init__(self) -> None:
        self.missed: list[str] = []

    def at_least(self, name: str, value: float, target: float) -> str:
        return self._check(name, value >= target, f">= {target:g}", value)

    def at_most(self, name: str, value: float, target: float) -> str:
        return self._check(name, value <= target, f"<= {target:g}", value)

    def _check(self, name: str, ok: bool, wanted: str, value: float) -> str:
        if not ok:
            self.missed.append(f"{name}: {value:.3f}, target {wanted}")
        return f"target {wanted} {'ok' if ok else 'MISSED'}"

    def exit_code(self) -> int:
        for line in self.missed:
            print(f"MISSED {line}")
        return 1 if self.missed else 0


def load_note() -> str:
    """The machine's load average: the figures depend on it (the 2 cores are shared)."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min), {os.cpu_count()} cores"
