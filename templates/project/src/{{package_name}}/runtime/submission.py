"""Your own records as work: what ``submit --file`` does, as two functions you can call.

    from <package>.submission import submit_file, submit_records

    ids = submit_records([{"record_id": "o-1", "value": 12}], data_dir="data", correlation_id="batch-7")
    ids = submit_file("orders.csv", data_dir="data")
    print(ids.correlation_id)  # made for you when you gave none: pass it to resubmit safely

Both check every record before they queue any (all or nothing): each must be an
object with a ``record_id`` (a text or a number) that no other record of the
submission has, carrying the fields :data:`job.RECORD_FIELDS` names with their
types (a CSV value, always text, is converted first). A refusal is a
:class:`~.errors.BadInput` (a :class:`~.errors.JobError`) saying where and why:
``file:line: reason`` for a file, ``record N: reason`` for a list.

The ``correlation_id`` names the submission. Submitting the same id again (the
user re-runs the command, a queue redelivers its message) returns the task ids
of the first submission and queues nothing: the strategy decides that in the
same transaction that would have added the work (strategy.py). Without one, a
new id is made, and returned as ``.correlation_id`` of the answer.

The state store is the one the CLI uses: ``data_dir`` plus the environment
(``DATABASE_URL``, the ``<PROJECT>_*`` settings, see settings.py).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import correlation
from .. import job
from .errors import BadInput
from .safe_read import read_numbered_records, record_id_of
from ..settings import Settings
from .strategy import Context, Submitted, load

__all__ = ["check_records", "submit_file", "submit_records"]


def submit_records(records: Iterable[dict[str, Any]], *, data_dir: str | Path = "data",
                   correlation_id: str | None = None, work_ms: float = 0.0) -> list[str]:
    """Queue ``records`` (checked first) and return their task ids (a :class:`Submitted`)."""
    numbered = [(n, record) for n, record in enumerate(records, 1)]
    checked = check_records(numbered, where=lambda n: f"record {n}")
    return queue(_context(data_dir), checked, correlation_id=correlation_id, work_ms=work_ms)


def submit_file(path: str | Path, *, data_dir: str | Path = "data", correlation_id: str | None = None,
                work_ms: float = 0.0) -> list[str]:
    """Queue the records of a ``.jsonl``, ``.json`` or ``.csv`` file (safe_read.py reads it, bounded)."""
    return queue(_context(data_dir), read_file(Path(path)), correlation_id=correlation_id, work_ms=work_ms)


def read_file(path: Path) -> list[dict[str, Any]]:
    """The checked records of an input file, or BadInput naming ``file:line``."""
    from_text = path.suffix.lower() == ".csv"
    return check_records(read_numbered_records(path), where=lambda n: f"{path}:{n}", from_text=from_text)


def queue(ctx: Context, records: list[dict[str, Any]], *, correlation_id: str | None, work_ms: float) -> Submitted:
    """Hand checked records to the project's strategy under a correlation id (one is made if None)."""
    if not records:
        raise BadInput("no records to submit")
    if isinstance(work_ms, bool) or not isinstance(work_ms, (int, float)) or not 0 <= work_ms < float("inf"):
        raise BadInput(f"work_ms must be a number, zero or more; got {work_ms!r}")
    correlation_id = correlation.check(correlation_id) if correlation_id is not None else uuid.uuid4().hex
    strategy = ctx.strategy or load()
    answer = strategy.submit(ctx, records, work_ms=float(work_ms), correlation_id=correlation_id)
    submitted = answer if isinstance(answer, Submitted) else Submitted(list(answer))
    submitted.correlation_id = correlation_id
    return submitted


def check_records(numbered: Iterable[tuple[int, Any]], *, where: Any, from_text: bool = False
                  ) -> list[dict[str, Any]]:
    """Every record checked against the job (``where(n)`` names record ``n`` in a refusal).

    ``from_text``: the values are texts (CSV) and are converted to the types of
    :data:`job.RECORD_FIELDS`; otherwise they must already have those types.
    """
    fields: dict[str, type] = dict(getattr(job, "RECORD_FIELDS", {}))
    checked: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for n, item in numbered:
        here = where(n)
        record_id = record_id_of(item, here)
        if record_id in seen:
            raise BadInput(f"{here}: duplicate record_id {record_id!r} (also {where(seen[record_id])})")
        seen[record_id] = n
        record = dict(item)
        for name, kind in fields.items():
            if name not in record:
                raise BadInput(f"{here}: the record has no {name!r} (the job needs it: job.RECORD_FIELDS)")
            record[name] = _typed(record[name], kind, name, here, from_text=from_text)
        checked.append(record)
    return checked


_KIND_NAMES = {int: "an integer", float: "a number", str: "a text", bool: "true or false"}


def _typed(value: Any, kind: type, name: str, here: str, *, from_text: bool) -> Any:
    """``value`` as ``kind``, or BadInput naming the record, the field and the value."""
    if not from_text and type(value) is kind:  # the usual case (a JSON record): checked, nothing to build
        return value if kind is not float or math.isfinite(value) else _wrong(value, kind, name, here)
    wrong = BadInput(f"{here}: {name!r} must be {_KIND_NAMES.get(kind, kind.__name__)}, got {value!r}")
    if from_text and isinstance(value, str) and kind is not str:
        text = value.strip()
        if kind is bool:
            if text.lower() not in ("true", "false"):
                raise wrong
            return text.lower() == "true"
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            raise wrong from None
    if isinstance(value, bool) and kind is not bool:
        raise wrong
    if kind is float and isinstance(value, int):
        value = float(value)
    if not isinstance(value, kind) or (isinstance(value, float) and not math.isfinite(value)):
        raise wrong
    return value


def _wrong(value: Any, kind: type, name: str, here: str) -> Any:
    raise BadInput(f"{here}: {name!r} must be {_KIND_NAMES.get(kind, kind.__name__)}, got {value!r}")


def _context(data_dir: str | Path) -> Context:
    return Context(data_dir=Path(data_dir), settings=Settings.from_env(), strategy=load())
