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
    """``{leaf: module}`` for each ``package.<dotted>`` of the project generated in ``dest``
    (``"runtime.external"`` is ``m["external"]``)."""
    sys.path.insert(0, str(dest / "src"))
    return {name.rpartition(".")[2]: importlib.import_module(f"{package}.{name}") for name in modules}


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


class Pair:
    """Rounds of the strategy's side and its baseline, run back to back, alternating which
    goes first: a change in the machine's load hits both sides of a round alike. The ratio
    is the median of the rounds' ratios, printed with their range."""

    def __init__(self) -> None:
        self.ours: list[float] = []
        self.base: list[float] = []

    def round(self, ours: Any, base: Any) -> tuple[float, float]:
        if len(self.ours) % 2:
            b, o = base(), ours()
        else:
            o, b = ours(), base()
        self.ours.append(o)
        self.base.append(b)
        return o, b

    @property
    def ratios(self) -> list[float]:
        return [o / b for o, b in zip(self.ours, self.base)]

    def ratio(self) -> float:
        return statistics.median(self.ratios)

    def by_order(self) -> str:
        """The rounds' median ratio by which side went first: a difference says the order, not
        the sides, moves the figure (then an even number of rounds keeps it balanced)."""
        first = [r for i, r in enumerate(self.ratios) if i % 2 == 0]
        second = [r for i, r in enumerate(self.ratios) if i % 2 == 1]
        if not second:
            return ""
        return (f"ours first {statistics.median(first):.3f} ({len(first)} rounds), "
                f"baseline first {statistics.median(second):.3f} ({len(second)})")

    def row(self) -> str:
        """ours/s, base/s (medians), ratio (median of rounds) and the rounds' range."""
        r = sorted(self.ratios)
        return (f"{statistics.median(self.ours):>14.0f} {statistics.median(self.base):>11.0f} {self.ratio():>6.3f} "
                f"({r[0]:.3f}-{r[-1]:.3f})")


class CostRounds:
    """Our own cost per record beside its floor, measured round by round.

    Each round probes the fsync time, runs the worker and its raw loop (a Pair, service
    fsync off), probes again, then times the same job and calls with no state store: the
    floor of a round is measured under the same machine load as its cost (the 2 cores are
    shared, and the fsync time moves by 10x with the load).
    """

    def __init__(self) -> None:
        self.rounds: list[tuple[float, float, float]] = []  # (worker/s, calls alone/s, fsync µs)
        self.raw_own: list[float] = []  # µs per record the raw loop adds to the calls alone

    def measure(self, directory: Path, pair: Pair, worker: Any, raw: Any, calls: Any) -> None:
        before = fsync_samples(directory / "probe-before")
        rate, raw_rate = pair.round(worker, raw)
        after = fsync_samples(directory / "probe-after")
        alone = calls()
        self.rounds.append((rate, alone, statistics.median(before + after)))
        self.raw_own.append(1e6 / raw_rate - 1e6 / alone)

    def raw_line(self, unit: str = "record") -> str:
        return (f"  (the raw loop's own cost beside the same calls: {statistics.median(self.raw_own):.1f} us/{unit},"
                f" median round)")

    def line(self, name: str, fsyncs: float, per: float, why: str, targets: Targets | None = None, *,
             not_a_target: str = "", unit: str = "record") -> str:
        """Our cost = the worker's time per record minus the job and calls alone; floor = fsyncs a
        batch needs x fsync time / records per batch. The round with the median ratio is shown;
        with ``targets``, that ratio must be at most 2; without, ``not_a_target`` says why not."""
        rows = sorted(((1e6 / w - 1e6 / c, fsyncs * f / per, f) for w, c, f in self.rounds),
                      key=lambda r: r[0] / r[1])
        ours, floor, fsync = rows[len(rows) // 2]
        ratio = ours / floor
        verdict = (targets.at_most(f"{name}: our cost / floor", ratio, 2.0) if targets
                   else f"(not a target: {not_a_target})")
        return (f"{name}: our cost {ours:.1f} us/{unit}, floor {floor:.2f} us/{unit} ({fsyncs:g} fsync(s) x "
                f"{fsync:.0f} us / {per:g} {unit}s: {why}); {ratio:.2f} x the floor "
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


def _beside(value: float, wanted: str) -> str:
    """``value`` with enough digits that a miss never reads as the target itself (0.4996, not 0.500)."""
    target = float(wanted.split()[-1])
    for digits in range(3, 10):
        if round(value, digits) != round(target, digits):
            return f"{value:.{digits}f}"
    return repr(value)


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
            self.missed.append(f"{name}: {_beside(value, wanted)}, target {wanted}")
        return f"target {wanted} {'ok' if ok else 'MISSED'}"

    def exit_code(self) -> int:
        for line in self.missed:
            print(f"MISSED {line}")
        return 1 if self.missed else 0


def load_note() -> str:
    """The machine's load average: the figures depend on it (the 2 cores are shared)."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min), {os.cpu_count()} cores"


def run_calls_only(m: dict[str, ModuleType], data_dir: Path, records: list[dict[str, Any]], work_ms: float,
                   key_prefix: str) -> float:
    """The job and its external calls alone (service fsync off), no state store at all:
    the baseline that "our cost" per record is measured against. Records per second."""
    data_dir.mkdir(parents=True)
    external = m["external"].ExternalService(data_dir, durable=False)
    process = m["job"].process_record
    started = time.perf_counter()
    for record in records:
        key = f"{key_prefix}/{record['record_id']}"

        def effect(payload: Any, step: str = "", record: dict[str, Any] = record, key: str = key) -> Any:
            return external.apply(record["record_id"], step, key, payload)

        process(record, effect, work_ms=work_ms)
    elapsed = time.perf_counter() - started
    external.close()
    return len(records) / elapsed


def append_processed(es: ModuleType, app: Any, task: Any, events: int, per_commit: int) -> float:
    """The event-sourcing benchmarks' workload: ``events`` processed-record events on one
    stream, saved every ``per_commit``; the seconds it took."""
    started = time.perf_counter()
    for seq in range(events):
        output = {"output": (seq * seq) % 9973}
        task.record_processed(seq=seq, record_id=f"r{seq:07d}", output=output,
                              effects=[{"step": "", "payload": {"record_id": f"r{seq:07d}", **output}}])
        if (seq + 1) % per_commit == 0 or seq + 1 == events:
            app.save(task)
    return time.perf_counter() - started
