"""The history the drill's checks read besides what the strategy stored (drill/checks/exits.py).

* :func:`call_log`: the external service's log of every request, in order, with the process
  that made it and when (``external.db``'s ``calls``, runtime/external.py);
* :func:`held_in_doubt`: the plain calls held in doubt, and when (effects.py's ledger);
* :func:`workers`: each drilled process's own account, from its probe report (witness.py).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ..runtime import effects
from ..runtime.external import EXTERNAL_DB

#: identity (the key, or record/step for a plain call, which has none), kind, outcome, pid, time.
CALL_LOG = ("SELECT COALESCE(idempotency_key, record_id || '/' || step), kind, outcome, pid, at FROM calls "
            "ORDER BY rowid")


def call_log(data_dir: Path) -> list[tuple[str, str, str, int, float]]:
    conn = sqlite3.connect(f"file:{Path(data_dir) / EXTERNAL_DB}?mode=ro", uri=True)
    try:
        return [(str(i), str(k), str(o), int(p), float(t)) for i, k, o, p, t in conn.execute(CALL_LOG)]
    finally:
        conn.close()


def held_in_doubt(data_dir: Path, settings: Any) -> list[tuple[str, str, float]]:
    """Plain calls held in doubt (at most once): (record_id, step, when a worker found them so),
    also those a person answered since (the drill's reconcile fault: reconciler.py)."""
    rows = [r for r in effects.doubt_rows(data_dir, settings) or [] if r["status"] == "in_doubt"]
    rows += effects.answered_calls(data_dir, settings)
    return [(str(r["record_id"]), str(r["step"]), float(r["doubt_at"] or 0.0)) for r in rows]


def exits_summary(workers: list[dict[str, Any]]) -> dict[str, int]:
    """For the report: how the drilled processes ended, as they said themselves."""
    runs = [w for w in workers if w.get("owner") and w.get("ended") is not None]
    return {"stopped_by_signal": sum(1 for w in runs if w["ended"].get("signal")),
            "finished": sum(1 for w in runs if not w["ended"].get("signal")),
            "held_at_exit": sum(1 for w in runs if isinstance(w["ended"].get("held"), list) and w["ended"]["held"]),
            "acks": sum(w.get("acks", 0) for w in workers),
            "acked_uncommitted": sum(w.get("acked_uncommitted_n", 0) for w in workers)}
