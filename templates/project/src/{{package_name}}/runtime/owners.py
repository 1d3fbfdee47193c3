"""Who holds a claimed unit of work, and is that holder still alive?

A worker writes ``owner = "<host id>:<start>:<pid>"`` and a heartbeat
(``updated_at``) on every row it claims. A bare pid is not trusted: pids are
reused (a new process may get a dead worker's number), and a pid means nothing
on another machine. ``<start>`` is when the process started — on Linux the boot
it started in (first 8 hex digits of /proc/sys/kernel/random/boot_id) and its
start time in clock ticks since that boot (field 22 of /proc/<pid>/stat) — so
``host id + start + pid`` names one process, once (the pid last, so that
``owner.rpartition(":")`` still splits off the pid).

Another worker may take the row over when

* the heartbeat is older than the lease (a silent holder anywhere: a zombie, a
  machine that vanished). The lease is always the bound: every other rule only
  makes recovery faster, never slower;
* the holder ran on *this* host, in *this* boot, and its pid no longer exists,
  or exists with another start time (the pid was reused): detected at once, so
  a restarted worker resumes immediately instead of waiting for the lease.

Another host id, or the same host id in another boot (a reboot, or two machines
given one id by mistake), is never judged by its pid: only the lease can tell.

The host id is ``<PKG>_HOST_ID`` when set (tests and drills simulate hosts with
it), else ``<hostname>-<first 12 of /etc/machine-id>``, else the hostname. Both
parts, because machine-id is copied along with cloned VM and container images,
and hostnames repeat across networks. Owners written before start times were
recorded (``<hostname>:<pid>``) are still read: dead when that pid is gone from
this host, otherwise only the lease can tell (the pid may have been reused).

Shared by every strategy that claims work (checkpoint/, idempotent_retry/,
state_machine/, the event-sourcing subscriber).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from . import metrics
from ..settings import ENV_PREFIX

#: Set it to give this process's machine an explicit id (``<PKG>_HOST_ID=web-2``).
HOST_ID_ENV = ENV_PREFIX + "HOST_ID"
MACHINE_ID = Path("/etc/machine-id")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
HOSTNAME = socket.gethostname()


def host_id(environ: dict[str, str] | None = None) -> str:
    """This machine's id in owner strings (``:`` is the separator, so never inside it)."""
    env = os.environ if environ is None else environ
    chosen = env.get(HOST_ID_ENV, "").strip()
    if not chosen:
        try:
            machine = MACHINE_ID.read_text(encoding="ascii").strip()[:12]
        except (OSError, UnicodeDecodeError):
            machine = ""
        chosen = f"{HOSTNAME}-{machine}" if machine else HOSTNAME
    # Bounded: owner columns are VARCHAR(128), and the start time and pid need room too.
    return chosen.replace(":", "_")[:64]


def _boot() -> str:
    try:
        return BOOT_ID.read_text(encoding="ascii").strip()[:8]
    except (OSError, UnicodeDecodeError):
        return ""


def start_time(pid: int) -> str | None:
    """``<boot>.<ticks>`` of a running process; None when it does not exist or this
    system has no /proc (then a pid is all there is, and the lease does the rest)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: count after it.
    fields = stat.rpartition(")")[2].split()
    if len(fields) < 20 or not fields[19].isdigit():
        return None
    return f"{_boot()}.{fields[19]}"  # fields[19] is field 22, starttime


_mine: tuple[int, str] | None = None


def owner_id() -> str:
    """This process as an owner: ``<host id>:<start>:<pid>`` (the same string for the
    whole life of the process, so ``row["owner"] == owner_id()`` means "mine")."""
    global _mine
    pid = os.getpid()
    if _mine is None or _mine[0] != pid:  # computed once per process (again after a fork)
        start = start_time(pid)
        _mine = (pid, f"{host_id()}:" + (f"{start}:" if start else "") + str(pid))
    return _mine[1]


def ours_first(rows: list[dict[str, Any]], owner: str, instance_id: str) -> list[dict[str, Any]]:
    """Claimable rows, those this very process holds under an earlier instance first (a run started
    again after a store outage, outage.py): ours to take back at once, before any other work. Until
    then such a row looks held by a live worker, so nobody else takes it before its lease runs out,
    and a graceful stop meanwhile would leave it held."""
    return sorted(rows, key=lambda row: not (row["owner"] == owner and row["instance_id"] != instance_id))


def owner_gone(owner: str | None, heartbeat: float, *, lease_s: float, now: float) -> bool:
    """True when the row's holder is silent for longer than the lease, or certainly dead."""
    if heartbeat < now - lease_s:
        metrics.takeover("lease_expired")  # runtime/metrics.py: lease takeovers
        return True
    if _holder_dead(owner):
        metrics.takeover("owner_dead")
        return True
    return False


def _holder_dead(owner: str | None) -> bool:
    """Certainly dead: it ran on this host, in this boot, and its pid is gone or reused."""
    parts = (owner or "").split(":")
    if len(parts) == 2:  # written before start times were recorded: <hostname>:<pid>
        host, pid, recorded = parts[0], parts[1], None
        if host != HOSTNAME:
            return False
    elif len(parts) == 3:
        host, recorded, pid = parts
        if host != host_id() or recorded.partition(".")[0] != _boot():
            return False  # another machine, or this one before a reboot: only the lease can tell
    else:
        return False  # not an owner this code wrote: only the lease can tell
    if not pid.isdigit():
        return False
    if not _exists(int(pid)):
        return True
    if recorded is None:
        return False  # the pid exists, but it may have been reused: the lease decides
    now_running = start_time(int(pid))
    # Another start time under the same pid: the holder died and its number was reused.
    return now_running is not None and now_running != recorded


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: "does this process exist?"
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, but belongs to another user
        return True
    return True
