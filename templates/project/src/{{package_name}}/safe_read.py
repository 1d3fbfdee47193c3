"""Reading what this program did not write itself, with limits: input files and stored state.

Every file or stored document is data, never code: it is read with a size limit, decoded as
strict UTF-8, and parsed as JSON (or CSV) with a nesting limit. Nothing here evaluates, unpickles
or shells out. A refusal is one :class:`~.errors.JobError` naming the file and, where there is
one, the line; the CLI prints it as one line and exits 2, before anything is queued or written.

The limits are the constants below; raise them here if your records really are bigger.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from .errors import CorruptStateError, JobError

MAX_INPUT_BYTES = 256 << 20  # an input file for `submit --file`
MAX_STATE_BYTES = 256 << 20  # a checkpoint file, a stored JSON state document
MAX_DEPTH = 32  # nesting of objects/lists in one document or record
MAX_LINE_BYTES = 1 << 20  # one JSON Lines record / one CSV field


def read_bytes(path: Path, what: str, *, limit: int, error: type[JobError] = JobError) -> bytes:
    """At most ``limit`` bytes of ``path``, or ``error`` naming the file."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(limit + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise error(f"{path}: too large for the {what} (over {limit >> 20} MiB)")
    return raw


def decode(raw: bytes, where: str, what: str, *, error: type[JobError] = JobError) -> str:
    """Strict UTF-8 without NUL bytes (a binary file), naming the line of the first bad byte."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise error(f"{where}: line {line}: not UTF-8 text (binary, or another encoding): not a {what}") from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise error(f"{where}: line {line}: a NUL byte (binary data): not a {what}")
    return text


def loads_json(text: str | bytes, where: str, what: str, *, error: type[JobError] = CorruptStateError) -> Any:
    """``json.loads`` that raises only ``error``: bad JSON, bad bytes, too deep (a RecursionError)."""
    if isinstance(text, bytes):
        text = decode(text, where, what, error=error)
    try:
        data = json.loads(text)
    except RecursionError:
        raise error(f"{where}: nested more than {MAX_DEPTH} levels deep: not a {what}") from None
    except ValueError as exc:
        line = f" line {exc.lineno}:" if isinstance(exc, json.JSONDecodeError) else ""
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise error(f"{where}:{line} not valid JSON ({reason}): not a {what}") from None
    if depth(data) > MAX_DEPTH:
        raise error(f"{where}: nested more than {MAX_DEPTH} levels deep: not a {what}")
    return data


def read_json(path: Path, what: str, *, limit: int = MAX_STATE_BYTES, error: type[JobError] = CorruptStateError) -> Any:
    """A JSON file, bounded in size and depth."""
    return loads_json(read_bytes(path, what, limit=limit, error=error), str(path), what, error=error)


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of an input file, each an object with a ``record_id``; all or nothing.

    ``.csv``: a header line, then one record per line (every value a text).
    ``.jsonl`` / ``.ndjson``: one JSON object per line (blank lines skipped).
    Anything else: one JSON list of objects.
    """
    what = "input file (JSON list, JSON Lines or CSV with a record_id column)"
    text = decode(read_bytes(path, what, limit=MAX_INPUT_BYTES), str(path), what)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        records = _csv_records(text, path)
    elif suffix in (".jsonl", ".ndjson"):
        records = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            if len(line) > MAX_LINE_BYTES:
                raise JobError(f"{path}: line {n}: a record over {MAX_LINE_BYTES >> 20} MiB")
            records.append(_record(loads_json(line, f"{path}: line {n}", "JSON object", error=JobError), path, n))
    else:
        data = loads_json(text, str(path), what, error=JobError)
        if not isinstance(data, list):
            raise JobError(f"{path}: expected a JSON list of objects with a 'record_id'")
        records = [_record(item, path, None, index=i) for i, item in enumerate(data)]
    if not records:
        raise JobError(f"{path}: holds no records")
    return records


def _csv_records(text: str, path: Path) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    records = []
    try:
        if reader.fieldnames is None or "record_id" not in reader.fieldnames:
            raise JobError(f"{path}: line 1: the CSV header has no 'record_id' column")
        for row in reader:
            if None in row or None in row.values():  # more or fewer fields than the header
                raise JobError(f"{path}: line {reader.line_num}: {len(reader.fieldnames)} fields expected")
            records.append(_record(dict(row), path, reader.line_num))
    except csv.Error as exc:  # a field over csv.field_size_limit(), a stray quote
        raise JobError(f"{path}: line {reader.line_num}: not valid CSV ({exc})") from None
    return records


def _record(item: Any, path: Path, line: int | None, *, index: int = 0) -> dict[str, Any]:
    where = f"{path}: line {line}" if line is not None else f"{path}: record {index}"
    if not isinstance(item, dict) or not isinstance(item.get("record_id"), (str, int)) or isinstance(
            item.get("record_id"), bool) or str(item["record_id"]).strip() == "":
        raise JobError(f"{where}: expected an object with a 'record_id' (a text or a number)")
    return item


def depth(data: Any) -> int:
    """Nesting depth of lists and objects, measured without recursion.

    Level by level: only the lists and objects of one level are opened for the next, so a
    task's payload of thousands of flat records costs one pass over their values (it is
    read on every claim of a task) instead of a stack entry per value.
    """
    deepest, level = 0, [data]
    while True:
        containers = [item for item in level if isinstance(item, (dict, list))]
        if not containers:
            return deepest
        deepest += 1
        if deepest > MAX_DEPTH:
            return deepest
        level = [child for item in containers for child in (item.values() if isinstance(item, dict) else item)]
