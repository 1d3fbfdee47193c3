"""What the drill watches to time its faults: effects applied at the service, commits to the state store.

Timed kills land a few milliseconds after the effect count crosses their mark, and a kill
aimed "after a commit" waits until the state store's files changed after the latest
effect: kills that land only while calls are being made miss the commit windows, where
the subtle bugs live (results committed after the offset, in a second transaction).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from ..runtime.external import EXTERNAL_DB

POLL_S = 0.002           # how often the drill samples progress (recovery time resolution)
COMMIT_WAIT_MAX_S = 0.5  # a worker that applies or commits nothing meanwhile is killed anyway
RECOVERY_WAIT_S = 2.0    # a kill aimed at a recovery waits this long at most for its first call


class Progress:
    """Read-only view of external.db's effects and of the state store's files."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.conn = sqlite3.connect(f"file:{data_dir / EXTERNAL_DB}?mode=ro", uri=True)
        self._still: tuple[tuple[int, int], float] | None = None  # ((effects, calls), since when) for still_for

    def still_for(self, seconds: float) -> bool:
        """Have the effects and the calls stood still this long, as seen by the calls to this (the first
        starts the clock)? Calls too: a worker redoing work whose effects are applied already (after a
        kill) adds calls the service dedupes, not effects."""
        mark, now = (self.applied(), self.calls()), time.monotonic()
        if self._still is None or self._still[0] != mark:
            self._still = (mark, now)
        return now - self._still[1] >= seconds

    def applied(self) -> int:
        # Effects are only ever inserted, so MAX(rowid) is their count, in O(1).
        return int(self.conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM effects").fetchone()[0])

    def calls(self) -> int:
        # Calls (applied, refused, looked up) are only ever inserted: MAX(rowid) counts them.
        return int(self.conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM calls").fetchone()[0])

    def latest_records(self, since: int = 0) -> list[str]:
        """The record ids of the effects applied after the first ``since``, the newest first, each once."""
        rows = self.conn.execute("SELECT record_id FROM effects WHERE rowid > ? ORDER BY rowid DESC",
                                 (since,)).fetchall()
        return list(dict.fromkeys(str(rid) for (rid,) in rows))

    def await_refusal(self, since: int) -> int | None:
        """Return as soon as the service has refused a call after its ``since``-th: the pid of the
        worker that made it, now waiting to retry; None after RECOVERY_WAIT_S without one."""
        deadline = time.monotonic() + RECOVERY_WAIT_S
        last = since
        while time.monotonic() < deadline:
            row = self.conn.execute("SELECT pid FROM calls WHERE rowid > ? AND outcome = 'failed' ORDER BY rowid"
                                    " LIMIT 1", (last,)).fetchone()
            if row is not None:
                return int(row[0])
            time.sleep(POLL_S / 4)
        return None

    def await_call(self) -> None:
        """Return as soon as the service logs a new call of any kind (a lookup, a re-send, a
        refused one): after a restart, the new worker's recovery has begun. At most
        RECOVERY_WAIT_S (a worker that recovers without calling is killed anyway)."""
        deadline = time.monotonic() + RECOVERY_WAIT_S
        last = self.calls()
        while time.monotonic() < deadline and self.calls() == last:
            time.sleep(POLL_S / 4)

    def await_effect(self, step: str | None = None) -> None:
        """Return as soon as a new effect is applied: the worker's call got through and its
        commit is (most likely) still to come, the window recovery lookups exist for.
        ``step``: a new effect of that step of job.STEPS (a unit's later step)."""
        deadline = time.monotonic() + COMMIT_WAIT_MAX_S
        last = self.applied()
        while time.monotonic() < deadline:
            if step is None and self.applied() != last:
                return
            if step is not None and self.conn.execute("SELECT 1 FROM effects WHERE rowid > ? AND step = ? LIMIT 1",
                                                      (last, step)).fetchone():
                return
            time.sleep(POLL_S / 4)

    def await_commit(self, give_up_at: int) -> None:
        """Return as soon as the state store was written after the latest effect: the worker
        has just committed (a checkpoint, a transition, a position), and the kill lands
        inside its commit sequence. With PostgreSQL there are no files to watch and it
        returns at once; past ``give_up_at`` effects too (the next commit could be the
        run's last, after which the worker exits before the kill arrives)."""
        deadline = time.monotonic() + COMMIT_WAIT_MAX_S
        last, base = self.applied(), state_signature(self.data_dir)
        if base is None:
            return
        while time.monotonic() < deadline:
            time.sleep(POLL_S / 4)
            count, signature = self.applied(), state_signature(self.data_dir)
            if count >= give_up_at:
                return
            if count != last:
                last, base = count, signature  # an effect: wait for the commit after it
            elif signature != base:
                return

    def close(self) -> None:
        self.conn.close()


def state_signature(data_dir: Path) -> tuple[tuple[str, int, int], ...] | None:
    """Size and mtime of the state store's files (not external.db, not the drill's own):
    it changes when the worker commits. None when the state is not in files here."""
    found = []
    for entry in os.scandir(data_dir):
        if entry.name.startswith(("external.db", "drill-")) or not entry.is_file():
            continue
        try:
            st = entry.stat()
        except FileNotFoundError:  # a temp file renamed meanwhile: that is a commit too
            found.append((entry.name, -1, -1))
            continue
        found.append((entry.name, st.st_size, st.st_mtime_ns))
    return tuple(sorted(found)) or None
