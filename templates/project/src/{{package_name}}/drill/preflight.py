"""What the drill makes sure of before it starts: a fresh data directory of its own, hosts that
can share the store, and a store that holds no one else's work.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from ..runtime.errors import JobError
from ..runtime.store import connect, is_postgresql, workload_held
from ..runtime.strategy import Context


def fresh_data_dir(data_dir: Path | None) -> Path:
    if data_dir is None:
        # ./data/drill-<time>-<pid>: kept after the run, so `sqlite3 .../external.db` can check it.
        base = Path("data")
        try:
            base.mkdir(parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix=time.strftime("drill-%Y%m%d-%H%M%S-"), dir=base)).resolve()
        except OSError as exc:
            raise JobError(f"cannot create a drill directory under {base.resolve()}: {exc.strerror}; "
                           "pass --data-dir") from None
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise JobError(f"the drill needs a fresh --data-dir; {data_dir} is not an empty directory")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise JobError(f"cannot create --data-dir {data_dir}: {exc.strerror}") from None
    return data_dir.resolve()


def check_hosts(ctx: Context, hosts: int, workers: int) -> None:
    """``--hosts N``: only a store every host reaches can be shared (PostgreSQL)."""
    if hosts == 1:
        return
    if getattr(ctx.strategy, "STATE_STORE", "database") == "files" or not is_postgresql(ctx.settings.database_url):
        raise JobError("--hosts needs PostgreSQL (DATABASE_URL=postgresql://...): separate hosts have separate "
                       "data directories and cannot share a SQLite file or checkpoint files")
    if workers < hosts:
        raise JobError(f"--hosts {hosts} needs --workers {hosts} or more (at least one worker per host)")


def refuse_a_held_workload(ctx: Context) -> None:
    """The drill's checks count everything in the store as its own input: a database that
    already holds work (PostgreSQL; a fresh --data-dir is always empty) is refused up front."""
    if not is_postgresql(ctx.settings.database_url) or not int(ctx.strategy.status(ctx).get("total", 0)):
        return
    store = connect(ctx.data_dir, ctx.settings)
    try:
        raise JobError(workload_held(store, ctx.data_dir))
    finally:
        store.close()
