"""Who holds a claimed unit of work, and is that holder still alive?

A worker writes ``owner = "<host>:<pid>"`` and a heartbeat (``updated_at``) on
every row it claims. Another worker may take the row over when

* the heartbeat is older than the lease (a silent holder anywhere: a zombie), or
* the holder is a process on *this* host that no longer exists (``kill -9``):
  detected at once with ``os.kill(pid, 0)``, so a restarted worker resumes
  immediately instead of waiting for the lease to run out.

Shared by the strategies that claim rows (idempotent_retry.py, state_machine.py).
"""

from __future__ import annotations

import os
import socket

HOST = socket.gethostname()


def owner_id() -> str:
    """This process as an owner: ``<host>:<pid>``."""
    return f"{HOST}:{os.getpid()}"


def owner_gone(owner: str | None, heartbeat: float, *, lease_s: float, now: float) -> bool:
    """True when the row's holder is dead (same host) or silent for longer than the lease."""
    if heartbeat < now - lease_s:
        return True
    host, _, pid = (owner or "").rpartition(":")
    if host != HOST or not pid.isdigit():
        return False  # another machine: only the lease can tell
    try:
        os.kill(int(pid), 0)  # signal 0: "does this process exist?"
    except ProcessLookupError:
        return True
    except PermissionError:  # exists, but belongs to another user
        return False
    return False
