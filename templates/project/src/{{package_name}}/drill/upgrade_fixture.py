"""Upgrade fixtures: a store an older release wrote, killed mid-run, kept as one JSON file.

A fixture holds what that release left behind: every row of every table of its state
store (and the tables' SQL: that release's schema.sql), or its state files, the external
service's log of what was applied, the input records, and a digest of job.py's answers for
them. ``drill --upgrade-from VERSION`` (upgrade.py) puts it back into a fresh data directory,
SQLite or PostgreSQL alike, and lets the current code continue it.

The data directory's path inside a value (a landing file's) is kept as ``{data_dir}``, the
package's name inside a topic (``<package>.module:Class``: how an event store names the class of
a stored event) as ``{package}``, both put back on load; bytes (an event's state) as
``{"$b64": ...}``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from .. import job
from ..runtime.errors import CorruptStateError, JobError
from ..runtime.external import EXTERNAL_DB, ExternalService
from ..runtime.safe_read import read_json
from ..runtime.store import STATE_DB, Store, connect, split_sql
from ..runtime.strategy import Context
from ..settings import EFFECT_KIND, PACKAGE
from . import oracle

#: <project>/tests/fixtures/upgrade (this file is <project>/src/<package>/drill/upgrade_fixture.py).
FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "upgrade"

FORMAT = 1
DATA_DIR_MARK = "{data_dir}"
PACKAGE_MARK = "{package}"
#: The external service's tables a fixture keeps (what was applied, and every request).
EXTERNAL_TABLES = ("effects", "calls")


# ----------------------------------------------------------------- values
#: A topic (``<package>.module:Class``, how the event store names a stored event's class) names the package.
_TOPIC = re.compile(r"(?<![\w.])" + re.escape(PACKAGE) + r"((?:\.\w+)*:\w)")


def _encode(value: Any, data_dir: str) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$b64": base64.b64encode(_portable_bytes(bytes(value), PACKAGE_MARK)).decode("ascii")}
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        return _TOPIC.sub(PACKAGE_MARK + r"\1", value.replace(data_dir, DATA_DIR_MARK))
    return value


def _decode(value: Any, data_dir: str) -> Any:
    if isinstance(value, dict) and set(value) == {"$b64"}:
        return base64.b64decode(value["$b64"]).replace(PACKAGE_MARK.encode(), PACKAGE.encode())
    if isinstance(value, str):
        return value.replace(DATA_DIR_MARK, data_dir).replace(PACKAGE_MARK, PACKAGE)
    return value


def _portable_bytes(data: bytes, mark: str) -> bytes:
    """A stored event's state (JSON) may name classes by their topic too."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    return _TOPIC.sub(mark + r"\1", text).encode("utf-8")


def job_digest(records: list[dict[str, Any]]) -> str:
    """What job.py answers for these records (results and calls asked for), as one SHA-256:
    a fixture continued by another job.py cannot be judged against this one's answers."""
    module = oracle.load_job()
    answers = {str(r["record_id"]): oracle.compute(module, r) for r in records}
    return hashlib.sha256(json.dumps(answers, sort_keys=True, default=repr).encode()).hexdigest()


# ------------------------------------------------------------------ dumping
def _tables(store: Store) -> list[str]:
    if store.dialect == "sqlite":
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    else:
        sql = ("SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() "
               "AND table_type = 'BASE TABLE' ORDER BY table_name")
    return [str(row["name"]) for row in store.all(sql)]


def _dump_rows(cur: Any, table: str, data_dir: str) -> dict[str, Any]:
    names = [d[0] for d in cur.description]
    return {"columns": names, "rows": [[_encode(v, data_dir) for v in row] for row in cur.fetchall()]}


def dump(ctx: Context, records: list[dict[str, Any]], *, schema_sql: str | None, made_by: str) -> dict[str, Any]:
    """Everything the run in ``ctx.data_dir`` left behind (read only)."""
    strategy, where = ctx.strategy, str(ctx.data_dir)
    doc: dict[str, Any] = {"format": FORMAT, "strategy": strategy.NAME, "effect_kind": EFFECT_KIND,
                           "made_by": made_by, "records": records, "job_digest": job_digest(records)}
    in_files = getattr(strategy, "STATE_STORE", "database") == "files"
    if in_files:
        files = {name: (ctx.data_dir / name).read_text(encoding="utf-8") for name in strategy.STATE_FILES
                 if (ctx.data_dir / name).is_file()}
        doc["files"] = {name: _encode(text, where) for name, text in files.items()}
        first = json.loads(next(iter(files.values()), "{}"))  # the input file: its format's version
        doc["schema_version"] = int(first.get("version", 1)) if isinstance(first, dict) else 1
    if not in_files or (ctx.data_dir / STATE_DB).is_file():  # beside files: a plain call's ledger
        store = connect(ctx.data_dir, ctx.settings)
        try:
            doc.update(_dump_store(store, where))
            if not in_files:
                doc["schema_version"] = int((store.one("SELECT version FROM schema_version")
                                             or {"version": 0})["version"])
                doc["schema_sql"] = schema_sql
        finally:
            store.close()
    external = sqlite3.connect(ctx.data_dir / EXTERNAL_DB)
    try:
        doc["external"] = {t: _dump_rows(external.execute(f"SELECT * FROM {t} ORDER BY rowid"), t, where)
                           for t in EXTERNAL_TABLES}
    finally:
        external.close()
    return doc


def _dump_store(store: Store, where: str) -> dict[str, Any]:
    """Every table's rows and, on SQLite, the SQL of each (tables the runtime creates on first
    use, such as the call ledger, are in no schema.sql)."""
    found: dict[str, Any] = {"tables": {t: _dump_rows(store.execute(f"SELECT * FROM {t}"), t, where)
                                        for t in _tables(store)}}
    if store.dialect == "sqlite":
        found["ddl"] = {str(r["name"]): str(r["sql"]) for r in store.all(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
    return found


def write(doc: dict[str, Any], path: Path) -> None:
    """Compact, one table row per line: a new fixture reads as a diff of rows in review."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_lines(doc) + "\n", encoding="utf-8")


def _lines(value: Any, indent: str = "") -> str:
    inner = indent + " "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {_lines(v, inner)}" for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and value and all(isinstance(v, (list, dict)) for v in value):
        rows = [inner + json.dumps(v, sort_keys=True) for v in value]  # a row, a record: one line each
        return "[\n" + ",\n".join(rows) + "\n" + indent + "]"
    return json.dumps(value, sort_keys=True)


# ------------------------------------------------------------------ loading
def read(path: Path) -> dict[str, Any]:
    """A fixture, checked for its shape; a wrong one is a JobError naming the file."""
    try:
        doc = read_json(path, "upgrade fixture")
    except (CorruptStateError, OSError) as exc:
        raise JobError(f"{path}: not a readable upgrade fixture ({exc})") from None
    wanted = ("format", "strategy", "effect_kind", "records", "job_digest", "schema_version", "external")
    if not isinstance(doc, dict) or any(k not in doc for k in wanted) or doc["format"] != FORMAT:
        raise JobError(f"{path}: not an upgrade fixture of format {FORMAT} (keys: {', '.join(wanted)})")
    # Table and column names go into SQL: plain identifiers only.
    for part in (doc.get("tables") or {}, doc["external"]):
        for table, rows in part.items():
            names = [table, *(rows.get("columns") or [])] if isinstance(rows, dict) else [table, "?"]
            if not all(isinstance(n, str) and n.isidentifier() for n in names):
                raise JobError(f"{path}: table {table!r} has a name or column that is not a plain identifier")
    return doc


def newest(strategy: Any) -> tuple[int | None, str]:
    """The schema version of the newest fixture this project ships, if it can continue it (the default
    drill's ``upgrade``); None and why not."""
    versions = sorted(int(p.stem[1:]) for p in FIXTURES.glob("v*.json") if p.stem[1:].isdigit()) \
        if FIXTURES.is_dir() else []
    if not versions:
        return None, (f"no upgrade fixture in tests/fixtures/upgrade: save one with `python -m {PACKAGE} drill "
                      "--save-upgrade-fixture` before the schema changes, and this drill continues it")
    path = FIXTURES / f"v{versions[-1]}.json"
    try:
        check(read(path), Context(data_dir=FIXTURES, settings=None, strategy=strategy), path)  # type: ignore[arg-type]
    except JobError as exc:
        return None, str(exc)
    return versions[-1], ""


def check(doc: dict[str, Any], ctx: Context, path: Path) -> None:
    """Refuse a fixture this project cannot continue, saying why and what to do instead."""
    name = getattr(ctx.strategy, "NAME", "?")
    if doc["strategy"] != name:
        raise JobError(f"{path} was written by the {doc['strategy']} strategy; this project runs {name}")
    if doc["effect_kind"] != EFFECT_KIND:
        raise JobError(f"{path} was written for a {doc['effect_kind']} external service; this project's is "
                       f"{EFFECT_KIND} (a store does not change its service's kind across an upgrade)")
    if job_digest(doc["records"]) != doc["job_digest"]:
        raise JobError(f"{path} was written by a job.py that answers differently for its records; make a fixture "
                       f"with this project's code before changing the schema: `python -m {PACKAGE} drill "
                       "--save-upgrade-fixture`")


def load(doc: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    """Put the fixture back into the fresh ``ctx.data_dir``; returns its input records."""
    where = str(ctx.data_dir)
    if "files" in doc:
        for name, text in doc["files"].items():
            if "/" in name or name.startswith("."):
                raise JobError(f"upgrade fixture names a file outside the data directory: {name!r}")
            (ctx.data_dir / name).write_text(_decode(text, where), encoding="utf-8")
    if "tables" in doc:  # the state database, or (beside files) a plain call's ledger
        _load_tables(doc, ctx, where)
    service = ExternalService(ctx.data_dir)  # the current service's tables, then what was applied
    service.close()
    external = sqlite3.connect(ctx.data_dir / EXTERNAL_DB, isolation_level=None)
    try:
        external.execute("BEGIN")
        for table, part in doc["external"].items():
            _insert(external.execute, table, part, where)
        external.execute("COMMIT")
    finally:
        external.close()
    return list(doc["records"])


def _load_tables(doc: dict[str, Any], ctx: Context, where: str) -> None:
    store = connect(ctx.data_dir, ctx.settings, create=True)
    try:
        with store.transaction():
            for statement in split_sql(doc.get("schema_sql") or "", store.dialect):  # that release's schema.sql
                store.execute(statement)
        library = getattr(ctx.strategy, "open_events", None)  # a library's own tables (the event store's)
        if library is not None:
            library(ctx, create=True).close()
        missing = [t for t in doc["tables"] if t not in set(_tables(store))]
        with store.transaction():  # tables that release's runtime created on first use (the call ledger)
            for table in missing:
                if table not in doc.get("ddl", {}):
                    raise JobError(f"upgrade fixture: no SQL creates table {table} (neither its schema.sql nor "
                                   "its ddl)")
                for statement in split_sql(doc["ddl"][table], store.dialect):
                    store.execute(statement)
        with store.transaction():
            for table, part in doc["tables"].items():
                store.execute(f"DELETE FROM {table}")  # rows schema.sql seeds (its version) come from the fixture
                _insert(store.execute, table, part, where)
                _advance_serials(store, table, part["columns"])
    finally:
        store.close()


def _insert(execute: Any, table: str, part: dict[str, Any], where: str) -> None:
    columns = part["columns"]
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    for row in part["rows"]:
        execute(sql, [_decode(v, where) for v in row])


def _advance_serials(store: Store, table: str, columns: list[str]) -> None:
    """PostgreSQL: rows inserted with their ids leave a serial column's sequence behind; move it on."""
    if store.dialect != "postgresql":
        return  # SQLite's AUTOINCREMENT follows the largest id by itself
    for column in columns:
        found = store.one("SELECT pg_get_serial_sequence(?, ?) AS seq", (table, column))
        if found and found["seq"]:
            store.execute(f"SELECT setval(?, COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)",
                          (found["seq"],))
