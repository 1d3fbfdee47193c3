"""Is a row's holder still alive? Judged exactly as the generated project's runtime/owners.py judges it.

Owners are ``<host id>:<start>:<pid>`` (``<start>`` = ``<boot>.<clock ticks>``), or the older
``<hostname>:<pid>``. The host id is ``<PKG>_HOST_ID`` when set, else ``<hostname>-<first 12 of
/etc/machine-id>``, else the hostname. A holder is *certainly dead* only when it ran on this host, in
this boot, and its pid is gone or now belongs to a process with another start time; anything else is
left to the lease. Kept in step with templates/project/src/{{package_name}}/runtime/owners.py (a test
compares the two on a real SIGKILLed worker).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

MACHINE_ID = Path("/etc/machine-id")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def host_id(package: str | None, environ: Mapping[str, str]) -> str:
    """This machine's id as the project's workers write it in owner strings."""
    chosen = environ.get(f"{package}_HOST_ID".upper(), "").strip() if package else ""
    if not chosen:
        try:
            machine = MACHINE_ID.read_text(encoding="ascii").strip()[:12]
        except (OSError, UnicodeDecodeError):
            machine = ""
        chosen = f"{socket.gethostname()}-{machine}" if machine else socket.gethostname()
    return chosen.replace(":", "_")[:64]


def _boot() -> str:
    try:
        return BOOT_ID.read_text(encoding="ascii").strip()[:8]
    except (OSError, UnicodeDecodeError):
        return ""


def start_time(pid: int) -> str | None:
    """``<boot>.<ticks>`` of a running process, None when it does not exist (or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name may hold spaces: count after it
    if len(fields) < 20 or not fields[19].isdigit():
        return None
    return f"{_boot()}.{fields[19]}"


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0 only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Holder:
    host: str
    pid: str
    #: Certainly dead (this host, this boot, pid gone or reused); False means "only the lease can tell".
    dead: bool


def holder(owner: str, here: str) -> Holder:
    """Parse an owner string and judge it from this machine (``here`` = :func:`host_id`)."""
    parts = owner.split(":")
    if len(parts) == 2:  # <hostname>:<pid>, written before start times were recorded
        host, pid = parts
        same = host == socket.gethostname()
        recorded = None
    elif len(parts) == 3:
        host, recorded, pid = parts
        same = host == here and recorded.partition(".")[0] == _boot()
    else:
        host, _, pid = owner.rpartition(":")
        return Holder(host, pid, False)
    if not same or not pid.isdigit():
        return Holder(host, pid, False)
    if not _exists(int(pid)):
        return Holder(host, pid, True)
    running = start_time(int(pid)) if recorded is not None else None
    # Another start time under the same pid: the holder died and its number was reused.
    return Holder(host, pid, running is not None and running != recorded)
