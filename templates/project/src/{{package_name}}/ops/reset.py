"""``reset``: empty this job's state so the demo (or a new workload) can start over.

* PostgreSQL: drops the strategy's tables (its module's ``STORE_TABLES``, and the
  submissions by correlation id that every SQL strategy keeps) in one
  transaction; the next ``submit-demo`` creates them again. Confirmed by typing
  the database's name.
* SQLite: removes the state files of the data directory (``state.db`` and its
  WAL). Confirmed with ``y``.
* Either way: the strategy's files in the data directory (``STATE_FILES``), and the
  simulated external service's record when it lives in the data directory. A
  shared one (``<PKG>_EXTERNAL_DIR`` elsewhere) is kept: other hosts use it.

Without a terminal to ask in, ``reset`` refuses unless ``--yes`` is given (scripts).
Stop the workers first: on PostgreSQL a table still in use is not dropped (the
lock wait is bounded and the message says so).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import IO, Any

from ..runtime.errors import JobError, StoreError
from ..runtime.external import EXTERNAL_DB
from ..runtime.store import STATE_DB, check_data_dir, connect, is_postgresql
from ..runtime.strategy import Context

#: A DROP waits this long for a table in use (a running worker's transaction), then gives up.
LOCK_TIMEOUT = "5s"
SUBMISSIONS_TABLE = "submissions"
#: The call ledger of plain external calls (effects.py), made in the state store on first use.
EFFECT_CALLS_TABLE = "effect_calls"
SQLITE_FILES = (STATE_DB, STATE_DB + "-wal", STATE_DB + "-shm", STATE_DB + "-journal")
EXTERNAL_FILES = (EXTERNAL_DB, EXTERNAL_DB + "-wal", EXTERNAL_DB + "-shm", EXTERNAL_DB + "-journal")


def run(ctx: Context, *, yes: bool, stdin: IO[str] | None = None, out: IO[str] | None = None) -> int:
    """Ask, then empty the store; 0 when reset, 1 when the answer was not the confirmation."""
    stdin, out = stdin or sys.stdin, out or sys.stdout
    strategy: Any = ctx.strategy
    if ctx.data_dir.exists():
        check_data_dir(ctx.data_dir, create=False)  # a file given as --data-dir: exit 2, nothing removed
    postgres = is_postgresql(ctx.settings.database_url) and bool(strategy.STORE_TABLES)
    # Every SQL strategy also keeps the submissions by correlation id (correlation.py) and,
    # for plain calls, the call ledger (effects.py), whether or not its module lists them.
    tables = tuple(dict.fromkeys((*strategy.STORE_TABLES, SUBMISSIONS_TABLE, EFFECT_CALLS_TABLE)))
    files = [ctx.data_dir / name for name in getattr(strategy, "STATE_FILES", ())]
    if not postgres:  # the file variant too: its plain-call ledger lives in state.db
        files += [ctx.data_dir / name for name in SQLITE_FILES]
    shared_external = ctx.external_dir.resolve() != ctx.data_dir.resolve()
    if not shared_external:
        files += [ctx.data_dir / name for name in EXTERNAL_FILES]
    present = [f for f in files if f.exists()]

    store = connect(ctx.data_dir, ctx.settings, create=True) if postgres else None
    try:
        if store is not None:
            database = str((store.one("SELECT current_database() AS name") or {}).get("name"))
            what, answer = f"the tables {', '.join(tables)} in the database {store.where}", database
        else:
            what, answer = f"the state in {ctx.data_dir}", "y"
        if store is None and not present:
            print(f"nothing to reset: no state in {ctx.data_dir}", file=out)
            return 0
        print(f"reset deletes {what}", file=out)
        for path in present:
            print(f"  and {path}", file=out)
        if shared_external:
            print(f"  (the external service's record in {ctx.external_dir} is shared and kept)", file=out)
        if not yes and not _confirmed(answer, stdin, out):
            print("reset cancelled: nothing was deleted", file=out)
            return 1
        if store is not None:
            _drop(store, tables)
    finally:
        if store is not None:
            store.close()
    for path in present:
        _remove(path)
    print("reset done: `submit-demo` starts from an empty store", file=out)
    return 0


def _confirmed(answer: str, stdin: IO[str], out: IO[str]) -> bool:
    if not stdin.isatty():
        raise JobError("reset deletes the job's state and asks first: run it in a terminal, "
                       "or pass --yes (scripts)")
    prompt = "type y to confirm [y/N]: " if answer == "y" else f"type the database name ({answer}) to confirm: "
    print(prompt, end="", file=out, flush=True)
    line = stdin.readline()
    given = line.strip()
    return given.lower() in ("y", "yes") if answer == "y" else given == answer


def _drop(store: Any, tables: tuple[str, ...]) -> None:
    try:
        with store.transaction():
            store.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            for table in tables:
                store.execute(f"DROP TABLE IF EXISTS {table}")
    except StoreError as exc:
        raise StoreError(f"{exc} (is a worker still running? stop the workers, then reset again)") from None
    except Exception as exc:  # the server refused (no privilege to drop, ...): the user's to fix
        if not type(exc).__module__.startswith("psycopg"):
            raise
        raise StoreError(f"state database {store.where}: cannot drop the tables: "
                         f"{' '.join(str(exc).split())}") from None


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:
        raise JobError(f"cannot remove {path}: {exc.strerror}") from None
