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

from .errors import BadInput, CorruptStateError, JobError

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
        raise error(f"{where}:{line}: not UTF-8 text (binary, or another encoding): not a {what}") from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise error(f"{where}:{line}: a NUL byte (binary data): not a {what}")
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
        # The line within the text: only worth naming when the text has several (a JSON Lines
        # record is one line, already named in ``where``).
        several = "\n" in text.strip()
        line = f"{exc.lineno}:" if isinstance(exc, json.JSONDecodeError) and several else ""
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise error(f"{where}:{line} not valid JSON ({reason}): not a {what}") from None
    if depth(data) > MAX_DEPTH:
        raise error(f"{where}: nested more than {MAX_DEPTH} levels deep: not a {what}")
    return data


def read_json(path: Path, what: str, *, limit: int = MAX_STATE_BYTES, error: type[JobError] = CorruptStateError) -> Any:
    """A JSON file, bounded in size and depth."""
    return loads_json(read_bytes(path, what, limit=limit, error=error), str(path), what, error=error)


#: What ``submit --file`` reads, by the file's extension.
INPUT_FORMATS = {".jsonl": "JSON Lines", ".ndjson": "JSON Lines", ".json": "a JSON list of objects", ".csv": "CSV"}
#: The longest record id (it becomes part of keys and columns of the state store).
MAX_RECORD_ID = 64


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of an input file (see :func:`read_numbered_records`)."""
    return [record for _, record in read_numbered_records(path)]


def read_numbered_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line, record)`` for every record of an input file; all or nothing.

    ``.jsonl`` / ``.ndjson``: one JSON object per line (blank lines skipped).
    ``.json``: one JSON list of objects (each numbered by the line it starts on).
    ``.csv``: a header line with a ``record_id`` column, then one record per line
    (every value a text). Another extension is refused.

    Every record must be an object with a ``record_id`` (a text or a number, at most
    MAX_RECORD_ID characters) that no other record of the file has. A refusal is one
    :class:`BadInput` saying ``file:line: reason``.
    """
    suffix = path.suffix.lower()
    if suffix not in INPUT_FORMATS:
        accepted = ", ".join(f"{ext} ({what})" for ext, what in INPUT_FORMATS.items())
        raise BadInput(f"{path}: cannot tell the format from the name (extension {suffix or 'none'!r}); "
                       f"accepted: {accepted}")
    what = f"input file ({INPUT_FORMATS[suffix]})"
    text = decode(read_bytes(path, what, limit=MAX_INPUT_BYTES, error=BadInput), str(path), what, error=BadInput)
    if suffix == ".csv":
        numbered = _csv_records(text, path)
    elif suffix == ".json":
        numbered = _json_list_records(text, path)
    else:
        numbered = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            if len(line) > MAX_LINE_BYTES:
                raise BadInput(f"{path}:{n}: a record over {MAX_LINE_BYTES >> 20} MiB")
            numbered.append((n, loads_json(line, f"{path}:{n}", "JSON object", error=BadInput)))
    if not numbered:
        raise BadInput(f"{path}: holds no records")
    seen: dict[str, int] = {}
    for n, item in numbered:
        record_id = record_id_of(item, f"{path}:{n}")
        if record_id in seen:
            raise BadInput(f"{path}:{n}: duplicate record_id {record_id!r} (also on line {seen[record_id]})")
        seen[record_id] = n
    return numbered


def record_id_of(item: Any, where: str) -> str:
    """The record's id as text, or BadInput saying why it has none that works."""
    if not isinstance(item, dict):
        raise BadInput(f"{where}: expected an object with a 'record_id', got a JSON {type(item).__name__}")
    if "record_id" not in item:
        raise BadInput(f"{where}: the record has no 'record_id'")
    value = item["record_id"]
    if not isinstance(value, (str, int)) or isinstance(value, bool) or str(value).strip() == "":
        raise BadInput(f"{where}: 'record_id' must be a non-empty text or a number, got {value!r}")
    if len(str(value)) > MAX_RECORD_ID:
        raise BadInput(f"{where}: 'record_id' is longer than {MAX_RECORD_ID} characters")
    return str(value)


def _json_list_records(text: str, path: Path) -> list[tuple[int, Any]]:
    """The items of one JSON list, each with the line it starts on (parsed one item at a
    time, so a bad or too deep item is named by its line)."""
    decoder, records = json.JSONDecoder(), []
    line, counted = 1, 0  # the line at text[counted]: counted forward only (linear, not quadratic)

    def line_at(pos: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, pos)
        counted = pos
        return line

    def skip_space(pos: int) -> int:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        return pos

    pos = skip_space(0)
    if pos >= len(text) or text[pos] != "[":
        raise BadInput(f"{path}:{line_at(pos)}: expected a JSON list of objects with a 'record_id' "
                       "(one object per line: name the file .jsonl)")
    pos = skip_space(pos + 1)
    if pos < len(text) and text[pos] == "]":
        pos = skip_space(pos + 1)
    else:
        while True:
            start = line_at(pos)
            try:
                item, pos = decoder.raw_decode(text, pos)
            except RecursionError:
                raise BadInput(f"{path}:{start}: nested more than {MAX_DEPTH} levels deep") from None
            except json.JSONDecodeError as exc:
                raise BadInput(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
            if depth(item) >= MAX_DEPTH:  # the list itself is one level
                raise BadInput(f"{path}:{start}: nested more than {MAX_DEPTH} levels deep")
            records.append((start, item))
            pos = skip_space(pos)
            if pos < len(text) and text[pos] == ",":
                pos = skip_space(pos + 1)
                continue
            if pos < len(text) and text[pos] == "]":
                pos = skip_space(pos + 1)
                break
            raise BadInput(f"{path}:{line_at(pos)}: not valid JSON (expected ',' or ']' after a record)")
    if pos < len(text):
        raise BadInput(f"{path}:{line_at(pos)}: not valid JSON (more data after the list)")
    return records


def _csv_records(text: str, path: Path) -> list[tuple[int, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    records = []
    try:
        if reader.fieldnames is None or "record_id" not in reader.fieldnames:
            raise BadInput(f"{path}:1: the CSV header has no 'record_id' column")
        if len(set(reader.fieldnames)) != len(reader.fieldnames):
            raise BadInput(f"{path}:1: the CSV header names a column twice")
        for row in reader:
            if None in row or None in row.values():  # more or fewer fields than the header
                raise BadInput(f"{path}:{reader.line_num}: {len(reader.fieldnames)} fields expected, "
                               f"as in the header")
            records.append((reader.line_num, dict(row)))
    except csv.Error as exc:  # a field over csv.field_size_limit(), a stray quote
        # line_num counts the lines read whole; the bad one is the next.
        raise BadInput(f"{path}:{reader.line_num + 1}: not valid CSV ({exc})") from None
    return records


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
