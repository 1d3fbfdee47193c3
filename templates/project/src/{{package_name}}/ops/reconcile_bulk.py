"""``reconcile`` for many calls at once: a file of ids, or every call in doubt against an export.

* ``reconcile --file IDS --applied`` (or ``--not-applied``): the same answer for every id in
  IDS (one id a line; blank lines and ``#`` comments skipped). All or nothing: an id that is
  not in doubt stops it before any answer is recorded.
* ``reconcile --from-export FILE``: every call in doubt settled by what the provider says it
  applied — in FILE means applied (never sent again), absent means not applied (the next
  ``run`` sends it). Under at least once the job re-sent each call in doubt itself: listed more
  than once (one line or row per time the provider applied it) means the first send had arrived
  too (a duplicate), once means the re-send was the only one. FILE is one of
  - one call id a line (the ``id`` column of ``reconcile``; blank lines and ``#`` comments skipped);
  - JSON Lines: ``{"id": ...}`` (a call id), or ``{"record_id": ..., "step": ...}`` (the record the
    provider applied, ``step`` optional, as the provider knows your records: a plain service takes
    no key, so its own export names records, not calls);
  - the simulated service's own ``external.db`` (its ``effects`` table: the records it applied).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..runtime.effects import arrived
from ..runtime.errors import JobError
from ..runtime.safe_read import decode, read_bytes
from ..settings import Settings
from .reconcile import OPEN, answer, open_ledger

#: An export or an id list is read whole: bounded like every input file.
MAX_EXPORT_BYTES = 256 * 1024 * 1024
SQLITE_MAGIC = b"SQLite format 3\x00"


def read_ids(path: Path) -> list[str]:
    """The ids of a list file, in order, without duplicates."""
    return list(dict.fromkeys(_lines(path, "list of call ids")))


class Export:
    """What a provider's export says was applied, and how often: call ids, and (record, step) pairs."""

    def __init__(self) -> None:
        self.ids: Counter[str] = Counter()
        self.records: Counter[tuple[str, str]] = Counter()

    def applied(self, row: dict[str, Any]) -> bool:
        """In doubt: did it arrive? Re-sent by the job (at least once): had the first send arrived too?"""
        times = self.ids[row["call_key"]] + self.records[(str(row["record_id"]), row["step"] or "")]
        return arrived(row["status"], times)


def read_export(path: Path) -> Export:
    if not path.is_file():
        raise JobError(f"{path}: no such file (an export of what the provider applied)")
    with path.open("rb") as head:
        if head.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC:
            return _from_external_db(path)
    export = Export()
    for n, line in enumerate(_lines(path, "export"), start=1):
        if not line.startswith("{"):
            export.ids[line] += 1
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            raise JobError(f"{path} line {n}: not valid JSON") from None
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]:
            export.ids[entry["id"]] += 1
        elif isinstance(entry, dict) and isinstance(entry.get("record_id"), str) and entry["record_id"]:
            export.records[(entry["record_id"], str(entry.get("step") or ""))] += 1
        else:
            raise JobError(f"{path} line {n}: a JSON line needs an 'id' (a call id) or a 'record_id' string")
    return export


def _lines(path: Path, what: str) -> list[str]:
    if not path.is_file():
        raise JobError(f"{path}: no such file ({what})")
    text = decode(read_bytes(path, what, limit=MAX_EXPORT_BYTES), str(path), what)
    return [s for s in (line.strip() for line in text.splitlines()) if s and not s.startswith("#")]


def _from_external_db(path: Path) -> Export:
    try:
        conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT record_id, step, COUNT(*) FROM effects GROUP BY 1, 2").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise JobError(f"{path} is a SQLite file but not the simulated service's log ({exc})") from None
    export = Export()
    export.records = Counter({(str(r[0]), str(r[1] or "")): int(r[2]) for r in rows})
    return export


def answer_many(data_dir: Path, settings: Settings, ids: list[str], *, applied: bool) -> str:
    """The same answer for every id; nothing is recorded unless every id is in doubt."""
    if not ids:
        raise JobError("the file lists no call id (one id a line, as `reconcile` lists them)")
    ledger = open_ledger(data_dir, settings)
    try:
        rows = {key: ledger.get(key) for key in ids}
        unknown = [key for key, row in rows.items() if row is None or row["status"] not in OPEN]
        if unknown:
            shown = ", ".join(repr(k) for k in unknown[:3]) + (", ..." if len(unknown) > 3 else "")
            raise JobError(f"{len(unknown)} of {len(ids)} id(s) are not calls in doubt ({shown}); nothing was "
                           "marked; `reconcile` lists the calls in doubt")
        with ledger.store.transaction():
            said = [answer(ledger, row, applied=applied) for row in rows.values() if row is not None]
    finally:
        ledger.close()
    return _tally(said)


def settle_from_export(data_dir: Path, settings: Settings, export: Path) -> str:
    """Every call in doubt answered by the export: applied if its reference is in it, else not applied."""
    said_applied = read_export(export)
    ledger = open_ledger(data_dir, settings)
    try:
        rows = [r for r in ledger.doubts() if r["status"] in OPEN and r["resolved_at"] is None]
        if not rows:
            return "no call in doubt: nothing to settle"
        with ledger.store.transaction():
            said = [answer(ledger, row, applied=said_applied.applied(row)) for row in rows]
    finally:
        ledger.close()
    return _tally(said)


def _tally(said: list[str]) -> str:
    counts: dict[str, int] = {}
    for words in said:
        counts[words] = counts.get(words, 0) + 1
    return f"settled {len(said)} call(s): " + "; ".join(f"{n} {words}" for words, n in counts.items())
