"""THE JOB: the one function you edit to replace the demo.

Everything else in this package (checkpoints, signals, recovery, the drill) is
the machinery that lets this function run for hours and survive ``kill -9``.

Rules for your version of :func:`process_record`:

* Compute from the record only (no hidden state): after a crash it may run again
  for the same record, and must give the same answer.
* Do every side effect through ``effect(payload, step="")``. The strategy binds it
  to an idempotency key derived from the task and the record, records it as
  *prepared* before and *done* after, and on recovery asks the service whether
  the earlier call got through instead of calling twice.
* Raise :class:`BadRecord` for input that can never be processed: the task is
  marked ``failed`` with your message and the other tasks go on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .errors import BadRecord

#: effect(payload, step="") -> the external service's answer.
Effect = Callable[..., dict[str, Any]]

#: Steps with an external effect per record ('' = a single effect). The drill expects
#: one applied effect per (record, step).
STEPS: tuple[str, ...] = ("",)


# ============================================================================
# >>> EDIT HERE: replace the demo computation and its external call. <<<
# ============================================================================
def process_record(record: dict[str, Any], effect: Effect, *, work_ms: float = 0.0) -> dict[str, Any]:
    """Process one input record; return the result to store with the checkpoint."""
    value = record.get("value")
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRecord(f"record {record.get('record_id')!r}: 'value' must be an integer, got {value!r}")
    if work_ms > 0:
        time.sleep(work_ms / 1000)  # stands in for real CPU or I/O work
    output = (value * value) % 9973
    effect({"record_id": record["record_id"], "amount": output})  # the one external call
    return {"output": output}
# ============================================================================


def demo_records(n: int) -> list[dict[str, Any]]:
    """The standard demo workload, identical in every strategy so drills compare."""
    return [{"record_id": f"r{i:07d}", "value": i} for i in range(n)]
