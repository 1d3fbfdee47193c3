"""The one way the advisor writes a file it was asked to write (a decision record, a probe report):
atomically, never over an existing file without ``force``, never half-written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from advisor.errors import AdvisorError, OutputExistsError


def _umask() -> int:
    """The process umask: read from /proc where it can be (setting it, even briefly, races threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # reading it means setting it; put it straight back
    os.umask(mask)
    return mask


def check_new_file(path: Path, *, force: bool, example: str = "decision.md") -> None:
    """Refuse, before any work, an ``--out`` that is a folder, exists (without ``force``) or has no folder."""
    if path.is_dir():
        raise AdvisorError(f"{path}: is a directory; give a file name such as {path / example}.")
    if path.exists() and not force:
        raise OutputExistsError(f"{path}: already exists. Use --force to overwrite it, or pick another --out.")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise AdvisorError(f"{path}: the folder {parent} does not exist.")


def write_text_safely(path: Path, text: str, *, force: bool = False) -> None:
    """Write atomically (temp file + rename); never overwrite without ``force``; nothing half-written."""
    path = Path(path)
    check_new_file(path, force=force)
    parent = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=parent)
    except OSError as exc:
        raise AdvisorError(f"{path}: cannot write here ({exc.strerror or exc}).") from None
    try:
        # mkstemp creates 0600; a decision record is meant to be shared and committed, so it
        # gets the mode any new file gets here (0644 under the usual umask 022).
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise AdvisorError(f"{path}: cannot write ({exc.strerror or exc}).") from None
