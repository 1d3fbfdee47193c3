"""The drill's operator rebuilding a projection (fault kind ``rebuild``, event sourcing).

An event-sourced read model is rebuilt from its events (after a bug in the projection, for a new
column), with every worker stopped, as ``rebuild`` asks. The operator runs it through the project's
own command and records what it did: its exit, the external calls made meanwhile (none is allowed)
and how the rebuilt projection differs from the one the workers left. A rebuild repairs rows a buggy
live projection lost or doubled, so the difference is the finding (checks/rebuild.py), never silently
repaired. runner.py then submits new input and runs the job once more; then, for each of KILLED_AT, a
rebuild killed mid-way, new input, the job's run, and a whole rebuild that compares again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from typing import Any

from .. import settings as settings_module
from ..runtime import faults
from ..runtime.strategy import Context
from .progress import Progress
from .workers import worker_env

#: How long an operator's `rebuild` may take (the drill's projection: a few thousand events).
REBUILD_TIMEOUT_S = 120.0
#: After the first, rebuilds cut short by a kill just before their N-th write of the durable state
#: (``state:N``, runtime/faults.py; the first write is where a rebuild starts changing anything): a
#: kill mid-rebuild must leave a consistent, shorter projection that the job's next run completes.
#: Each is followed by new input, that run, and a whole rebuild whose comparison is the finding.
KILLED_AT = (2, 3)


def rebuild(ctx: Context, progress: Progress, killed_at: int | None = None) -> dict[str, Any]:
    """Run ``rebuild`` on the drill's data directory (armed to die just before its ``killed_at``-th
    write, if given): its exit code, the calls made meanwhile, and, when it finished, the result rows
    (record ids) missing from the live projection and extra in it, by the rebuilt one."""
    calls, live = progress.calls(), _projection(ctx)
    cmd = [sys.executable, "-m", settings_module.PACKAGE, "rebuild", "--data-dir", str(ctx.data_dir)]
    env = worker_env() if killed_at is None else {**worker_env(), faults.CRASH_ENV: f"state:{killed_at}"}
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=REBUILD_TIMEOUT_S)
        code, said = proc.returncode, (proc.stderr.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired:
        code, said = None, f"still running after {REBUILD_TIMEOUT_S:.0f} s (stopped)"
    outcome: dict[str, Any] = {"code": code, "calls": progress.calls() - calls, "message": said[:300]}
    if killed_at is not None:
        outcome["killed_at"] = killed_at
    rebuilt = _projection(ctx) if code == 0 else None
    if live is not None and rebuilt is not None:  # rows as (record id, output): lost, doubled or changed
        outcome["missing_before"] = sorted(rid for rid, _ in rebuilt - live)[:1000]
        outcome["extra_before"] = sorted(rid for rid, _ in live - rebuilt)[:1000]
    return outcome


def _projection(ctx: Context) -> Counter[tuple[str, str]] | None:
    """The stored result rows, as (record id, output) counted (None: unreadable now)."""
    try:
        rows = ctx.strategy.stored_results(ctx) or []
        return Counter((str(rid), json.dumps(output, sort_keys=True)) for rid, output in rows)
    except Exception:  # a store the faults left unreadable: the verdict says so (store_corrupt)
        return None
