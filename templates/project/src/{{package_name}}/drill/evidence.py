"""The history the drill's checks read besides what the strategy stored (drill/checks/exits.py).

* :func:`call_log`: the external service's log of every request, in order, with the process
  that made it (``external.db``'s ``calls``, runtime/external.py);
* :func:`workers`: each drilled process's own account, from its probe report (witness.py).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ..runtime.external import EXTERNAL_DB

#: identity (the key, or record/step for a plain call, which has none), kind, outcome, pid.
CALL_LOG = ("SELECT COALESCE(idempotency_key, record_id || '/' || step), kind, outcome, pid FROM calls "
            "ORDER BY rowid")


def call_log(data_dir: Path) -> list[tuple[str, str, str, int]]:
    conn = sqlite3.connect(f"file:{Path(data_dir) / EXTERNAL_DB}?mode=ro", uri=True)
    try:
        return [(str(i), str(k), str(o), int(p)) for i, k, o, p in conn.execute(CALL_LOG)]
    finally:
        conn.close()


def exits_summary(workers: list[dict[str, Any]]) -> dict[str, int]:
    """For the report: how the drilled processes ended, as they said themselves."""
    runs = [w for w in workers if w.get("owner") and w.get("ended") is not None]
    return {"stopped_by_signal": sum(1 for w in runs if w["ended"].get("signal")),
            "finished": sum(1 for w in runs if not w["ended"].get("signal")),
            "held_at_exit": sum(1 for w in runs if isinstance(w["ended"].get("held"), list) and w["ended"]["held"]),
            "acks": sum(w.get("acks", 0) for w in workers),
            "acked_uncommitted": sum(w.get("acked_uncommitted_n", 0) for w in workers)}
