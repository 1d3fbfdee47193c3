"""The hung-worker fault (a final one): a holder that hangs loses its unit once its lease runs out.

A worker can stop without dying: a long garbage-collection pause, a VM frozen by its host, a
deadlock, a process stopped by a debugger. Its pid stays alive on its host and it renews
nothing. The lease is the bound on how long its unit waits (runtime/owners.py): every other
rule, such as "this pid is alive here", may only make a takeover faster, never slower. A kill
cannot show it: the killed pid is gone, and a restarted worker takes its unit at once.

So, once every worker ended, the job runs once more on new input with a short lease (LEASE_S):
its worker is stopped (SIGSTOP) while it holds a unit and no lock, and, once the lease ran out,
another worker starts on the same host. It must take that unit over, although the hung pid is
alive beside it (checks/hung_worker.py). Then the hung worker is killed, as a liveness probe
would end it, and the job finishes what is left like any other run.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import settings as settings_module
from ..runtime.store import STATE_DB, is_postgresql

#: The lease of this run's workers (seconds): short, so the drill waits little for it.
LEASE_S = 1.0
#: The second worker starts this long after the lease of the hung one's last heartbeat ran out.
MARGIN_S = 0.5
#: New input: this many records of WORK_MS each (one unit, or many small ones, by the strategy).
RECORDS, WORK_MS = 100, 3.0
#: How long the fault tries to find its worker holding a unit and no lock, and how long the second
#: worker has to take the unit over.
FIND_S, TAKE_S = 20.0, 15.0
POLL_S = 0.01
ENV = {settings_module.ENV_PREFIX + "LEASE_S": str(LEASE_S)}
#: PostgreSQL: a worker connection inside a transaction (it would keep its row locks while hung).
IN_TRANSACTION = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                  "AND application_name = %s AND state <> 'idle'")


class Hang:
    """One run of the fault: ``play(hung, spawn_taker)`` returns what the history records."""

    def __init__(self, ctx: Any, claims: Callable[[], list[dict[str, Any]]], worker_app: str) -> None:
        self.ctx, self.claims, self.worker_app = ctx, claims, worker_app
        self.tries = 0

    def play(self, hung: Any, spawn_taker: Callable[[], Any]) -> dict[str, Any]:
        held = self._freeze_holding(hung)
        if not held:
            return {"pid": hung.pid, "frozen": False, "tries": self.tries}
        frozen_at = time.monotonic()
        time.sleep(LEASE_S + MARGIN_S)
        taker = spawn_taker()
        taken = self._taken(hung.pid, held, taker)
        return {"pid": hung.pid, "frozen": True, "tries": self.tries, "lease_s": LEASE_S, "held": sorted(held),
                "taker": taker.pid, "not_taken": sorted(set(held) - taken),
                "frozen_s": round(time.monotonic() - frozen_at, 3)}

    # ---- a moment the worker holds a unit and no lock
    def _freeze_holding(self, proc: Any) -> set[str]:
        """Stop the worker at a moment it holds a unit and no lock of the stores; the units it holds then
        (none: it ended, or no such moment came within FIND_S; it is left running)."""
        deadline = time.monotonic() + FIND_S
        while proc.poll() is None and time.monotonic() < deadline:
            if not self._held_by(proc.pid):
                time.sleep(POLL_S)
                continue
            self.tries += 1
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(POLL_S)  # let a statement on its way in land
            held = self._held_by(proc.pid)
            if held and not self._locks_held():
                return held
            os.kill(proc.pid, signal.SIGCONT)  # inside a transaction or a call: a hang there is another fault
            time.sleep(POLL_S * 3)
        return set()

    def _held_by(self, pid: int) -> set[str]:
        try:
            rows = self.claims()
        except Exception:  # busy, or not created yet: not now
            return set()
        return {str(c["what"]) for c in rows if _pid_of(c) == str(pid)}

    def _locks_held(self) -> bool:
        """Does a (stopped) worker hold a store's lock? SQLite: the state or the service's write lock;
        PostgreSQL: a worker connection inside a transaction."""
        url = self.ctx.settings.database_url
        files = [Path(self.ctx.data_dir) / "external.db"] + ([] if is_postgresql(url) else [Path(self.ctx.data_dir) / STATE_DB])
        for path in files:
            conn = sqlite3.connect(path, isolation_level=None, timeout=0)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            except sqlite3.OperationalError:
                return True
            finally:
                conn.close()
        if is_postgresql(url):
            import psycopg

            with psycopg.connect(url, autocommit=True, application_name="drill-hung", connect_timeout=10) as conn:
                return bool(conn.execute(IN_TRANSACTION, (self.worker_app,)).fetchone()[0])
        return False

    # ---- the takeover
    def _taken(self, hung_pid: int, held: set[str], taker: Any) -> set[str]:
        """The units of ``held`` another worker took over (held by it, or done and let go: the hung one
        cannot let go) before the taker ended or TAKE_S passed."""
        taken: set[str] = set()
        deadline = time.monotonic() + TAKE_S
        while taken != held and time.monotonic() < deadline:
            ended = taker.poll() is not None
            try:
                rows = self.claims()
            except Exception:
                rows = None
            if rows is not None:
                holders = {str(c["what"]): _pid_of(c) for c in rows}
                taken |= {what for what in held if holders.get(what) != str(hung_pid)}
            if ended:
                break
            time.sleep(POLL_S * 2)
        return taken


def _pid_of(claim: dict[str, Any]) -> str:
    """The holder's pid, the last part of its owner id (runtime/owners.py: ``<host id>:<start>:<pid>``)."""
    return str(claim.get("owner") or "").rpartition(":")[2]
