"""``advisor inspect``: where a generated project's job would resume, and why — read only.

:func:`inspect_dir` takes a generated project (its ``.copier-answers.yml`` names the
strategy and package; its data directory defaults to ``DIR/data``, or the newest drill's
``data/drill-…`` when only drills ran) or a data directory itself (the strategy is
recognized from the state database's tables, or the checkpoint files). It returns a
JSON-ready report (shape documented in docs/inspect.md, ``inspect_version`` 1);
:func:`render_text` words it the strategy's way. It never writes: SQLite is opened
read-only without creating ``-wal``/``-shm`` files (sources.py), PostgreSQL in
a READ ONLY transaction. No Textual, no Copier.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from advisor.inspect.external import verdict
from advisor.inspect.files import checkpoint_file
from advisor.inspect.owners import host_id
from advisor.inspect.reading import Reading
from advisor.redact import redact
from advisor.inspect.sources import (FILE_CHECKPOINTS, FILE_INPUT, STATE_DB, InspectError, Location, PostgresSource,
                                     SQLiteSource, Source, locate)
from advisor.inspect.stream import checkpoint_dir, stream_checkpoint
from advisor.inspect.streams import event_sourcing
from advisor.inspect.tasks import checkpoint, idempotent_retry, state_machine

INSPECT_VERSION = 1

#: The tables that identify each strategy's state database.
SIGNATURES: list[tuple[str, frozenset[str]]] = [
    ("stream-checkpoint", frozenset({"stream_batches", "stream_files", "stream_results"})),
    ("event-sourcing", frozenset({"es_tasks", "es_subscribers", "stored_events"})),
    ("state-machine", frozenset({"orders", "transitions", "step_log"})),
    ("checkpoint", frozenset({"tasks", "intents", "results"})),
    ("idempotent-retry", frozenset({"tasks", "processed", "results"})),
]


def recognize(tables: list[str], where: str) -> str:
    present = set(tables)
    for strategy, needed in SIGNATURES:
        if needed <= present:
            return strategy
    shown = ", ".join(sorted(present)[:8]) or "none"
    raise InspectError(f"{where} is a database but not a generated project's state (tables: {shown}); "
                       "give a generated project or its data directory")


def _is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def _open(loc: Location, url: str) -> Source:
    if _is_postgres(url):
        return PostgresSource(url)
    if url and not url.startswith("sqlite"):
        raise InspectError(f"DATABASE_URL={redact(url)!r}: only postgresql://... is understood (unset it for SQLite)")
    return SQLiteSource(loc.data_dir / STATE_DB)


def read(loc: Location, url: str, environ: Mapping[str, str] | None = None) -> tuple[Reading, dict[str, str]]:
    """The strategy's reading of the state, and where that state is."""
    answers = loc.answers
    env = os.environ if environ is None else environ
    here = host_id(answers.get("package_name"), env)
    lease_s = float(answers.get("lease_s", 30.0))
    batch = int(answers.get("batch_size", 100))
    is_file = answers.get("checkpoint_store") == "file" or (
        not answers and not (loc.data_dir / STATE_DB).exists() and not _is_postgres(url)
        and any((loc.data_dir / n).exists() for n in (FILE_INPUT, *FILE_CHECKPOINTS)))
    if is_file:
        return checkpoint_file(loc.data_dir, batch), {"kind": "files", "location": str(loc.data_dir)}
    if not _is_postgres(url) and not (loc.data_dir / STATE_DB).exists():
        raise InspectError(f"no state database at {loc.data_dir / STATE_DB}; queue work first (submit-demo), "
                           "or set DATABASE_URL=postgresql://... if the project's state is in PostgreSQL")
    source = _open(loc, url)
    try:
        found = recognize(source.tables(), source.location)
        declared = answers.get("strategy")
        if declared and not str(declared).startswith(found):
            raise InspectError(f"{source.location} holds {found} state but {loc.project_dir}/.copier-answers.yml "
                               f"says strategy {declared}")
        if found == "checkpoint":
            reading = checkpoint(source, lease_s, here, str(answers.get("effect_kind", "")), batch)
        elif found == "idempotent-retry":
            reading = idempotent_retry(source, lease_s, here)
        elif found == "state-machine":
            reading = state_machine(source, lease_s, here)
        elif found == "stream-checkpoint":
            configured = env.get(f"{answers.get('package_name')}_CHECKPOINT_LOCATION".upper(), "")
            reading = stream_checkpoint(source, checkpoint_dir(loc.data_dir, configured),
                                        str(answers.get("effect_kind", "")))
        else:
            reading = event_sourcing(source, lease_s, here, str(declared) if declared else None)
        return reading, {"kind": source.kind, "location": source.location}
    finally:
        source.close()


def inspect_dir(directory: Path, data_dir: Path | None = None,
                environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Inspect a generated project or its data directory; raises InspectError (exit 2)."""
    env = os.environ if environ is None else environ
    url = env.get("DATABASE_URL", "")
    loc = locate(Path(directory), Path(data_dir) if data_dir else None, postgres=_is_postgres(url))
    reading, store = read(loc, url, env)
    # The project's <PKG>_EXTERNAL_DIR, read as its own commands read it: hosts with separate
    # data directories share one external service there.
    package = loc.answers.get("package_name")
    shared = env.get(f"{package}_EXTERNAL_DIR".upper(), "") if package else ""
    external = verdict(Path(shared) if shared else loc.data_dir, reading.expected, reading.complete,
                       reading.in_doubt)
    return {
        "inspect_version": INSPECT_VERSION,
        "project": str(loc.project_dir) if loc.project_dir else None,
        "package": loc.answers.get("package_name"),
        "data_dir": str(loc.data_dir),
        "note": loc.note,
        "strategy": reading.strategy,
        "variant": reading.variant,
        "store": store,
        "schema_version": reading.schema_version,
        "tables": reading.tables,
        "recovery_points": [p.to_json() for p in reading.points],
        "more_recovery_points": reading.more_points,
        "summary": reading.summary,
        "in_doubt": reading.in_doubt,
        "complete": reading.complete,
        "resume": reading.resume,
        "external": external,
    }


def render_text(report: Mapping[str, Any]) -> str:
    """The report in the strategy's own words (what `advisor inspect` prints)."""
    from advisor.inspect.text import render

    return render(report)
