"""Spark's checkpoint files, made durable where the sink relies on them, and mended after a power cut.

Spark writes its checkpoint location through Hadoop's local file system: each entry (``offsets/N``
before micro-batch N runs, the file source's log ``sources/0/N`` — ``N.compact`` every tenth —,
``commits/N`` after the sink returned, ``metadata`` once) is written to a temporary file and renamed
into place, with a ``.N.crc`` checksum beside it, and nothing is ever fsynced. ``kill -9`` loses none
of it (the page cache survives), a power cut can: the renames survive, the contents do not, and the
next start fails on an empty log entry (``drill --power-loss`` showed it: every file of the checkpoint
came back empty, the driver exited 1, the rest of the input was never read).

Two answers, together:

* :func:`sync_batch`, called by the sink before it commits micro-batch N, fsyncs what Spark wrote for
  N and before it — ``offsets/N``, ``sources/*/N``, ``commits/N-1``, ``metadata``, their checksums and
  directories. So every entry up to a batch the sink committed is durable; only the newest can be lost.
* :func:`mend`, called before the query starts, removes the newest entry of each log (and its checksum)
  while a cut left it empty or unreadable. Spark then plans that batch again: the same batch id over the
  same next landing file, which the sink skips when it committed it already (a lost ``commits/N`` is
  a replay of N, a lost ``offsets/N+1`` a batch planned again).

Both cost a few fsyncs per micro-batch and a directory listing per start.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

#: The logs of a checkpoint location whose newest entries may be lost; ``sources`` holds one per source.
LOGS = ("offsets", "commits")
METADATA = "metadata"
#: The first line of every log entry Spark writes (its format version).
VERSION_PREFIX = b"v"


def local_dir(location: str) -> Path | None:
    """The checkpoint location as a local directory; None for another file system (``s3a://``,
    ``hdfs://``...), whose durability is that file system's own."""
    if location.startswith("file:"):  # file:/x, file:///x
        return Path("/" + location.removeprefix("file:").lstrip("/"))
    return None if "://" in location else Path(location)


def _crc(path: Path) -> Path:
    return path.with_name(f".{path.name}.crc")


def _fsync(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):  # not written yet (no previous commit, no compaction)
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _logs(location: Path) -> list[Path]:
    sources = location / "sources"
    found = [location / name for name in LOGS]
    if sources.is_dir():
        found += sorted(p for p in sources.iterdir() if p.is_dir())
    return found


def _entry(log: Path, batch_id: int) -> Path:
    """A log's entry for ``batch_id``: ``N``, or ``N.compact`` where the file source compacted its log."""
    compact = log / f"{batch_id}.compact"
    return compact if compact.exists() else log / str(batch_id)


def sync_batch(location: Path, batch_id: int) -> None:
    """Before the sink commits ``batch_id``: every checkpoint entry Spark wrote for it and before it, synced."""
    files = [location / METADATA, location / "commits" / str(batch_id - 1)]
    files += [_entry(log, batch_id) for log in _logs(location) if log.name != "commits"]
    for path in files:
        _fsync(path)
        _fsync(_crc(path))
    for directory in {location, *(p.parent for p in files)}:
        _fsync(directory)


def _unreadable(path: Path, *, log_entry: bool) -> bool:
    """Empty (the cut kept the rename, not the data), a checksum that is empty, or not Spark's format."""
    try:
        data = path.read_bytes()
        crc = _crc(path)
        if crc.exists() and crc.stat().st_size == 0:
            return True
    except OSError:
        return True
    return not data or (log_entry and not data.startswith(VERSION_PREFIX))


def _batch_number(path: Path) -> int | None:
    stem = path.name.removesuffix(".compact")
    return int(stem) if stem.isdigit() else None


class CheckpointLost(Exception):
    """An entry older than the newest is unreadable: more was lost than a power cut can take from a
    checkpoint the sink synced. Planning those batches again could pair a batch id the sink committed
    with other input, so nothing is removed."""


def mend(location: Path) -> list[str]:
    """Before the query starts: the newest entry of each log removed when it is unreadable (a power cut's
    doing), and an unreadable ``metadata``; what was removed, relative to ``location``. Only the newest:
    every older entry was synced before the sink committed its batch (:func:`sync_batch`)."""
    removed: list[str] = []
    if not location.is_dir():
        return removed
    for log in _logs(location):
        entries = sorted((p for p in log.iterdir() if p.is_file() and _batch_number(p) is not None),
                         key=lambda p: _batch_number(p) or 0) if log.is_dir() else []
        if entries and _unreadable(entries[-1], log_entry=True):
            if len(entries) > 1 and _unreadable(entries[-2], log_entry=True):
                raise CheckpointLost(f"Spark's checkpoint at {location} lost more than its newest entries "
                                     f"({entries[-2].relative_to(location)} is unreadable too): it was not "
                                     "synced, so it cannot be mended. The sink's results are intact; restore "
                                     "the checkpoint location from a copy, or move it aside to start a new one "
                                     "(the sink skips the batch ids it committed, but new input may then be "
                                     "paired with old ids: check the results afterwards)")
            _remove(entries[-1])
            removed.append(str(entries[-1].relative_to(location)))
    metadata = location / METADATA
    if metadata.exists() and _unreadable(metadata, log_entry=False):
        _remove(metadata)
        removed.append(METADATA)
    return removed


def _remove(path: Path) -> None:
    for victim in (path, _crc(path)):
        with contextlib.suppress(FileNotFoundError):
            victim.unlink()
