"""The foreachBatch sink: a micro-batch's results and its batch id in one transaction.

Spark calls :meth:`IdempotentSink.write` with each micro-batch and its
``batch_id``. Spark's guarantee (pyspark ``DataStreamWriter.foreachBatch``): the
same ``batch_id`` always carries the same data, so the id is the dedupe key of a
whole batch. After a kill -9 Spark replays every batch whose id it had not yet
written to ``<checkpoint>/commits/``; the sink then finds the id in
``stream_batches`` and skips the batch.

1. Parse the batch (one row per landing file: its path and its text). A line that
   is not a JSON object with a ``record_id`` stops the query with an error naming
   the file and the line, before anything is applied.
2. Unless the batch id is already committed: run ``job.process_record`` on every
   record; its external call carries an idempotency key derived from the record
   (``<record_id>:<step>``), and a batch killed half way and replayed follows the
   rule of the service's kind (effects.py): an idempotent service acknowledges the
   re-sent calls as duplicates; a queryable one is asked first; a plain call made
   before the kill is in doubt.
3. One transaction: the results and the batch id.

Between 3 and Spark's own commit log write lies the window ``drill --aim
after_sink_commit`` kills in (a fault-injection point, faults.py).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import job
from ..runtime.errors import BadRecord, JobError
from ..runtime.external import ExternalService
from ..runtime import effects, faults, metrics
from ..runtime.store import Store

SELECT_BATCH = "SELECT batch_id FROM stream_batches WHERE batch_id = ?"
INSERT_BATCH = "INSERT INTO stream_batches (batch_id, records, committed_at) VALUES (?, ?, ?)"
INSERT_SKIPPED = "INSERT INTO stream_skipped (batch_id, skipped_at) VALUES (?, ?)"
INSERT_RESULT = "INSERT INTO stream_results (record_id, batch_id, result, created_at) VALUES (?, ?, ?, ?)"


def parse_landing_file(path: str, text: str) -> list[dict[str, Any]]:
    """The records of one JSON Lines file; a bad line is a JobError naming file and line."""
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise JobError(f"{path} line {number}: not valid JSON ({exc.msg}); "
                           "fix or remove the file, then run again (nothing of its batch was applied)") from None
        if not isinstance(record, dict) or "record_id" not in record:
            raise JobError(f"{path} line {number}: expected a JSON object with a 'record_id'; "
                           "fix or remove the file, then run again (nothing of its batch was applied)")
        records.append(record)
    return records


def local_path(uri: str) -> str:
    """``file:/data/landing/x.jsonl`` -> ``/data/landing/x.jsonl`` (other URIs stay as they are)."""
    return uri[len("file:"):] if uri.startswith("file:/") else uri


def idempotency_key(record: dict[str, Any], step: str) -> str:
    """Derived from the record alone: the same on every replay of any batch."""
    return f"{record['record_id']}:{step}"


class IdempotentSink:
    """``query = stream.writeStream.foreachBatch(sink.write)``; one per driver."""

    def __init__(self, open_store: Callable[[], Store], open_external: Callable[[], ExternalService], *,
                 work_ms: float = 0.0,
                 make_effects: Callable[[ExternalService], effects.Effects] | None = None,
                 before_commit: Callable[[int], None] | None = None) -> None:
        # Spark calls write() on a thread of its own (py4j's callback server): the
        # connections are opened there, per batch (SQLite connections stay in their thread).
        self.open_store, self.open_external, self.work_ms = open_store, open_external, work_ms
        self.make_effects = make_effects
        #: Called with a batch id before its results are committed (checkpoint_sync.sync_batch: Spark's
        #: entries for that batch made durable first).
        self.before_commit = before_commit
        #: Held while a batch is written: a shutdown waits for it (spark.py).
        self.busy = threading.Lock()
        self.error: JobError | None = None
        self.batches = self.skipped = self.records = 0

    def write(self, batch_df: Any, batch_id: int) -> None:
        with self.busy, contextlib.ExitStack() as opened:  # closes whatever was opened, in reverse
            try:
                # The store is opened inside the try: one that does not answer now (StoreUnavailable)
                # is reported to the driver as itself, which `run` rides out, not as a failed query.
                self.store = self.open_store()
                opened.callback(self.store.close)
                self.external = self.open_external()
                opened.callback(self.external.close)
                self.calls = self.make_effects(self.external) if self.make_effects else None
                if self.calls is not None:
                    opened.callback(self.calls.close)
                self._write(batch_df.collect(), int(batch_id))
            except JobError as exc:
                self.error = exc  # the driver reports it; Spark sees the batch fail
                raise

    def _write(self, rows: list[Any], batch_id: int) -> None:
        if self.before_commit is not None:
            self.before_commit(batch_id)
        files = sorted((local_path(str(row["path"])), str(row["value"])) for row in rows)
        records = [r for path, text in files for r in parse_landing_file(path, text)]
        if self.store.one(SELECT_BATCH, (batch_id,)) is not None:
            with self.store.transaction():
                self.store.execute(INSERT_SKIPPED, (batch_id, time.time()))
            self.skipped += 1
            return
        results = [(str(r["record_id"]), self._process(r)) for r in records]
        faults.window("after_effects")  # drill --aim after_effects: calls made, nothing committed
        now = time.time()
        with self.store.transaction():
            if self.store.one(SELECT_BATCH, (batch_id,)) is not None:  # another driver won (misconfiguration)
                raise JobError(f"micro-batch {batch_id} was committed by another driver meanwhile; "
                               "run one driver per checkpoint location")
            self.store.executemany(INSERT_RESULT, [(rid, batch_id, json.dumps(res), now) for rid, res in results])
            self.store.execute(INSERT_BATCH, (batch_id, len(records), now))
        self.batches += 1
        self.records += len(records)
        faults.window("after_sink_commit")  # drill --aim after_sink_commit: Spark's commit log not yet written
        metrics.records_done(len(records))  # runtime/metrics.py

    def _process(self, record: dict[str, Any]) -> dict[str, Any]:
        def effect(payload: Any, step: str = job.RECORD_STEP) -> dict[str, Any]:
            if self.calls is None:
                return self.external.apply(str(record["record_id"]), step, idempotency_key(record, step), payload)
            # No intent of the sink's own: the ledger (effects.py) tells a replayed call.
            return self.calls.call(str(record["record_id"]), step, idempotency_key(record, step), payload)

        try:
            return job.process_record(record, effect, work_ms=self.work_ms)
        except BadRecord as exc:
            return {"error": f"BadRecord: {exc}"}


class AppendingSink:
    """The naive sink, for the benchmark only: appends every batch, no batch id, no keys.
    A replayed batch is written (and its calls applied) twice."""

    def __init__(self, open_store: Callable[[], Store], open_external: Callable[[], ExternalService]) -> None:
        self.open_store, self.open_external = open_store, open_external

    def write(self, batch_df: Any, batch_id: int) -> None:
        self.store, self.external = self.open_store(), self.open_external()
        try:
            self._append(batch_df, batch_id)
        finally:
            self.external.close()
            self.store.close()

    def _append(self, batch_df: Any, batch_id: int) -> None:
        files = sorted((str(row["path"]), str(row["value"])) for row in batch_df.collect())
        records = [r for path, text in files for r in parse_landing_file(path, text)]
        results = []
        for record in records:
            def effect(payload: Any, step: str = job.RECORD_STEP, rid: str = str(record["record_id"])) -> dict[str, Any]:
                return self.external.apply(rid, step, None, payload)
            results.append((str(record["record_id"]), job.process_record(record, effect)))
        with self.store.transaction():
            self.store.executemany(INSERT_RESULT, [(rid, int(batch_id), json.dumps(res), time.time())
                                                  for rid, res in results])
