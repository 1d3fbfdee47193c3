"""The drivers' class archive: Spark's classes loaded once, mapped by every later start.

A Spark driver's JVM reads, verifies and links several thousand classes from Spark's jars
before the first batch; on 2 cores that is about half of a restart, and a restart is what
recovery waits for. Java's class-data sharing keeps what one JVM loaded in an archive file
that later JVMs map instead (``-XX:SharedArchiveFile``). ``prepare-spark`` writes it once —
a short run of this project's own query in a scratch directory, its JVM asked to archive
its classes as it exits — and a local driver started here uses it if it is there.

It is a cache, never the job's state: a driver without it starts as before. Published
whole (written aside, synced, renamed) with its size next to it; a file of another size
(cut short) is not handed to the JVM, which would crash mapping it, and the JVM checks the
archive's own checksums (``-XX:+VerifySharedSpaces``) and ignores one that fails them or
was made for other jars or another Java.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from .. import settings as settings_module
from ..settings import Settings

OFF = "off"


def location(settings: Settings, fingerprint: list[str]) -> Path | None:
    """Where the archive is (or would be written); None when switched off. The default name
    carries a hash of what the archive depends on (``fingerprint``: Spark's jars, the Java, the
    JVM options; spark.py gives it), so another install never picks up one it cannot use."""
    if settings.spark_class_archive == OFF:
        return None
    if settings.spark_class_archive:
        return Path(settings.spark_class_archive).expanduser()
    key = hashlib.sha256(json.dumps(fingerprint).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / settings_module.PACKAGE / f"spark-classes-{key}.jsa"


def usable(settings: Settings, fingerprint: list[str]) -> Path | None:
    """The archive to hand a starting JVM, or None: none written, switched off, or not whole."""
    path = location(settings, fingerprint)
    if path is None:
        return None
    try:
        expected = json.loads(_size_file(path).read_text(encoding="utf-8"))["bytes"]
        whole = path.stat().st_size == expected
    except (OSError, ValueError, KeyError, TypeError):
        return None  # never written, or written by a run that did not finish
    if not whole:
        print(f"the class archive {path} is not whole: starting without it (`prepare-spark` writes it again)",
              flush=True)
        return None
    return path


def publish(written: Path, target: Path) -> None:
    """Put the archive the JVM wrote at ``target``, whole or not at all: a copy beside it, synced,
    renamed over the old one; its size after it (usable() reads the size first, then the file)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    aside = target.with_name(f".{target.name}.{os.getpid()}")
    shutil.copyfile(written, aside)
    _sync(aside)
    size = _size_file(target)
    size.unlink(missing_ok=True)  # a reader never pairs the old size with the new file
    os.replace(aside, target)
    size_aside = size.with_name(f".{size.name}.{os.getpid()}")
    size_aside.write_text(json.dumps({"bytes": target.stat().st_size}), encoding="utf-8")
    _sync(size_aside)
    os.replace(size_aside, size)
    _sync(target.parent)  # the renames


def _size_file(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _sync(path: Path) -> None:
    """fsync a file, or a directory (its entries: the renames into it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
