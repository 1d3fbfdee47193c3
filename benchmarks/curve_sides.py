"""The sides of bench_curve.py that are not the generated project's own ``run``: each runs in a
fresh ``python`` process, timed from outside, exactly as ``python -m PKG run`` is.

    PYTHONPATH=<project>/src python benchmarks/curve_sides.py raw     PKG DATA_DIR RECORDS
    PYTHONPATH=<project>/src python benchmarks/curve_sides.py naive   PKG DATA_DIR RECORDS
    PYTHONPATH=<project>/src python benchmarks/curve_sides.py profile PKG DATA_DIR RECORDS
    PYTHONPATH=<project>/src python benchmarks/curve_sides.py ours    PKG DATA_DIR RECORDS
    PYTHONPATH=<project>/src python benchmarks/curve_sides.py dbos    PKG DATA_DIR RECORDS

* ``raw``: the demo records, the job's ``process_record`` and the project's own external
  service (``ExternalService.apply``: one durable SQLite commit per call in external.db), the
  same idempotency keys the worker sends; no progress kept at all. A kill loses the whole run.
* ``naive``: the same, plus progress kept the obvious way: each record's result and the
  offset committed durably (WAL, synchronous=FULL) after its call — one commit per record.
* ``profile``: the generated project's ``run`` in this process, with the effect's time, the
  state store's COMMIT statements (count, time) and the batches counted; one JSON line out.
  Not timed by bench_curve.py's rounds: the measuring itself costs time.
* ``ours``: the generated project's ``run`` (``cli.main``), for BENCH_SERVICE_FSYNC=off only
  (with the fsync on, bench_curve.py runs ``python -m PKG run`` itself).
* ``dbos``: the same job on DBOS Transact (PyPI ``dbos``, a benchmark-only extra: ``pip install
  -e '.[bench]'``): ONE workflow over the records, one ``@DBOS.step()`` per record calling the
  same ``process_record`` and ``ExternalService.apply`` with the raw side's keys, its system
  database SQLite (``dbos-sys.sqlite`` in DATA_DIR) with DBOS's own settings. Without dbos
  installed it prints a ``skipped:`` line and exits 3 (bench_curve.py leaves the side out).

BENCH_SERVICE_FSYNC=off (every side alike): the external service without its own fsync per
call (``ExternalService(durable=False)``, a constructor argument only benchmarks use), so what
is left is the loops' own cost: ours against raw without the service's disk wait to hide it.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any


def _keyed_effect(external: Any, record: dict[str, Any], task_size: int, seq: int) -> Any:
    """The effect the worker gives process_record: its key is the worker's (task id / record id)."""
    key = f"demo-{seq // task_size:05d}/{record['record_id']}"

    def effect(payload: Any, step: str = "") -> dict[str, Any]:
        answer: dict[str, Any] = external.apply(record["record_id"], step, key + (f"/{step}" if step else ""),
                                                payload)
        return answer

    return effect


def raw_or_naive(package: str, data_dir: Path, records: int, *, keep_progress: bool) -> None:
    job = importlib.import_module(f"{package}.job")
    external_mod = importlib.import_module(f"{package}.runtime.external")
    task_size = importlib.import_module(f"{package}.settings").Settings().task_size
    data_dir.mkdir(parents=True, exist_ok=True)
    external = external_mod.ExternalService(data_dir)
    progress = None
    if keep_progress:
        progress = sqlite3.connect(data_dir / "progress.db", isolation_level=None)
        progress.execute("PRAGMA journal_mode = WAL")
        progress.execute("PRAGMA synchronous = FULL")  # as durable as the project's state store
        progress.execute("CREATE TABLE IF NOT EXISTS results (seq INTEGER PRIMARY KEY, record_id TEXT, output TEXT)")
        progress.execute("CREATE TABLE IF NOT EXISTS progress (id INTEGER PRIMARY KEY, processed_offset INTEGER)")
        progress.execute("INSERT OR IGNORE INTO progress VALUES (1, 0)")
    process = job.process_record
    for seq, record in enumerate(job.demo_records(records)):
        output = process(record, _keyed_effect(external, record, task_size, seq))
        if progress is not None:
            progress.execute("BEGIN IMMEDIATE")
            progress.execute("INSERT INTO results VALUES (?, ?, ?)", (seq, record["record_id"], json.dumps(output)))
            progress.execute("UPDATE progress SET processed_offset = ? WHERE id = 1", (seq + 1,))
            progress.execute("COMMIT")
    external.close()
    if progress is not None:
        progress.close()


#: DBOS pinned: the side is measured against this release (pyproject.toml's ``bench`` extra).
DBOS_REQUIREMENT = "dbos==3.4.0"
#: curve_sides.py dbos exits with this when dbos is not installed (bench_curve.py skips the side).
EXIT_SKIPPED = 3
#: The DBOS side's system database, in the side's data directory.
DBOS_DB = "dbos-sys.sqlite"


def dbos_side(package: str, data_dir: Path, records: int) -> int:
    """The same job as ``raw``, as DBOS runs it: one workflow, one step per record."""
    try:
        from dbos import DBOS
    except ImportError:
        print(f"skipped: dbos is not installed (pip install '{DBOS_REQUIREMENT}', or pip install -e '.[bench]')")
        return EXIT_SKIPPED
    job = importlib.import_module(f"{package}.job")
    external_mod = importlib.import_module(f"{package}.runtime.external")
    task_size = importlib.import_module(f"{package}.settings").Settings().task_size
    data_dir.mkdir(parents=True, exist_ok=True)
    external = external_mod.ExternalService(data_dir)
    process, fold = job.process_record, job.fold

    @DBOS.step()
    def record_step(seq: int, record: dict[str, Any]) -> Any:
        return process(record, _keyed_effect(external, record, task_size, seq))

    @DBOS.workflow()
    def job_workflow(n: int) -> dict[str, Any]:
        state = dict(job.INITIAL_STATE)
        for seq, record in enumerate(job.demo_records(n)):
            state = fold(state, record_step(seq, record))  # the running state, as ours keeps it
        return state

    DBOS(config={"name": "bench-job", "system_database_url": f"sqlite:///{data_dir / DBOS_DB}",
                 "log_level": "WARNING"})
    DBOS.launch()
    try:
        job_workflow(records)
    finally:
        DBOS.destroy()
        external.close()
    return 0


def profile(package: str, data_dir: Path) -> dict[str, float]:
    """Run ``run`` in-process with its effect and its COMMITs timed (monkeypatched wrappers)."""
    store_mod = importlib.import_module(f"{package}.runtime.store")
    external_mod = importlib.import_module(f"{package}.runtime.external")
    cli = importlib.import_module(f"{package}.cli")
    spent = {"effect_s": 0.0, "effect_calls": 0, "commit_s": 0.0, "commits": 0, "statements": 0}
    apply, execute = external_mod.ExternalService.apply, store_mod.Store.execute

    def timed_apply(self: Any, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return apply(self, *args, **kwargs)
        finally:
            spent["effect_s"] += time.perf_counter() - began
            spent["effect_calls"] += 1

    def timed_execute(self: Any, sql: str, params: Any = ()) -> Any:
        spent["statements"] += 1
        if sql != "COMMIT":
            return execute(self, sql, params)
        began = time.perf_counter()
        try:
            return execute(self, sql, params)
        finally:
            spent["commit_s"] += time.perf_counter() - began
            spent["commits"] += 1

    external_mod.ExternalService.apply = timed_apply
    store_mod.Store.execute = timed_execute
    began = time.perf_counter()
    code = cli.main(["run", "--data-dir", str(data_dir)])
    spent["run_s"] = time.perf_counter() - began
    if code != 0:
        raise SystemExit(f"run exited {code}")
    return spent


def service_fsync_off(package: str) -> None:
    """Every ExternalService of this process made with durable=False (BENCH_SERVICE_FSYNC=off)."""
    external_mod = importlib.import_module(f"{package}.runtime.external")
    external_mod.ExternalService.__init__ = functools.partialmethod(
        external_mod.ExternalService.__init__, durable=False)


def main(argv: list[str]) -> int:
    side, package, data_dir, records = argv[0], argv[1], Path(argv[2]), int(argv[3])
    if os.environ.get("BENCH_SERVICE_FSYNC") == "off":
        service_fsync_off(package)
    if side in ("raw", "naive"):
        raw_or_naive(package, data_dir, records, keep_progress=side == "naive")
    elif side == "ours":
        return int(importlib.import_module(f"{package}.cli").main(["run", "--data-dir", str(data_dir)]))
    elif side == "dbos":
        return dbos_side(package, data_dir, records)
    elif side == "profile":
        print(json.dumps(profile(package, data_dir)))
    else:
        print(f"unknown side {side!r}: raw, naive, dbos, profile or ours", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
