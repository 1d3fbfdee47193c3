"""Recovery point of stream checkpoint: two places, each owned by one party.

Spark's checkpoint location holds ``offsets/<n>`` (batch n planned: logged *before* it runs),
``commits/<n>`` (batch n finished) and ``sources/0/<n>`` (the landing files batch n reads;
every tenth folded into ``<n>.compact``). The state store holds what the foreachBatch sink
committed: ``stream_batches`` (batch ids, in the transaction of their results), ``stream_results``,
``stream_skipped`` (replays it recognised) and ``stream_files`` (the landing files submitted).

After a kill, Spark replays the newest planned batch that has no commit; the sink skips it when
its id is in ``stream_batches`` (killed after the sink's commit), else processes it again — its
calls re-sent with the same keys, or recovered by the project's effect_kind.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from advisor.inspect.reading import Point, Reading, ago, redone_by, schema_version, table_counts
from advisor.inspect.sources import Source

CHECKPOINT_DIR = "spark-checkpoint"
TABLES = ["stream_files", "stream_batches", "stream_results", "stream_skipped", "submissions", "schema_version"]
#: A landing file read for its record ids stays small: the demo's are batch_size lines.
MAX_LANDING_BYTES = 8 * 1024 * 1024


def _batch_ids(d: Path) -> list[int]:
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []


def _batch_files(checkpoint: Path, batch: int) -> list[str]:
    """The landing files of one batch from the file source's log (plain or compacted)."""
    log = checkpoint / "sources" / "0"
    candidates = [log / str(batch)] + sorted(log.glob("*.compact")) if log.is_dir() else []
    found: list[str] = []
    for path in candidates:
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()[1:]:  # line 1: "v1"
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("batchId") == batch and isinstance(entry.get("path"), str):
                found.append(re.sub(r"^file:(//)?", "", entry["path"]))
    return sorted(set(found))


def _record_ids(files: list[str]) -> list[str]:
    ids: list[str] = []
    for name in files:
        path = Path(name)
        if not path.is_file() or path.stat().st_size > MAX_LANDING_BYTES:
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "record_id" in record:
                ids.append(str(record["record_id"]))
    return ids


def checkpoint_dir(data_dir: Path, configured: str) -> Path:
    """``<PKG>_CHECKPOINT_LOCATION`` as the project reads it, else ``<data-dir>/spark-checkpoint``."""
    return Path(re.sub(r"^file:(//)?", "", configured)) if configured else data_dir / CHECKPOINT_DIR


def stream_checkpoint(source: Source, checkpoint: Path, effect_kind: str) -> Reading:
    now = time.time()
    files = source.rows("SELECT path, records FROM stream_files ORDER BY path")
    total = sum(int(f["records"]) for f in files)
    batches = source.rows("SELECT COUNT(*) AS n, MAX(batch_id) AS last, MAX(committed_at) AS at, "
                          "COALESCE(SUM(records), 0) AS records FROM stream_batches")[0]
    committed = {int(r["batch_id"]) for r in source.rows("SELECT batch_id FROM stream_batches")}
    done = int(source.rows("SELECT COUNT(DISTINCT record_id) AS n FROM stream_results")[0]["n"])
    skipped = source.count("stream_skipped")
    points = [Point("sink", "stream", "done" if total and done >= total else "open",
                    f"sink: {len(files)} landing file(s) submitted ({total} records); {int(batches['n'])} "
                    f"micro-batch(es) committed ({done} records), last {ago(batches['at'], now)}; "
                    f"{skipped} replayed batch(es) recognised and skipped", done, total)]
    planned, finished = _batch_ids(checkpoint / "offsets"), _batch_ids(checkpoint / "commits")
    last_planned = planned[-1] if planned else None
    last_finished = finished[-1] if finished else None
    replay = last_planned if last_planned is not None and last_planned != last_finished else None
    in_doubt: list[dict[str, str]] = []
    where = f"Spark checkpoint {checkpoint}"
    read_files = {p for b in planned for p in _batch_files(checkpoint, b)}
    unread = [f for f in files if f["path"] not in read_files] if read_files else files
    if not planned:
        text = f"{where}: no batch planned yet; the first run starts at batch 0 with the oldest landing file"
        resume = f"the next run reads the {len(files)} landing file(s) from the start, one micro-batch each"
        detail: dict[str, Any] = {}
    else:
        last_planned = planned[-1]  # (the same value, known not None here)
        text = (f"{where}: offsets logged up to batch {last_planned}, commit log up to batch "
                f"{'none' if last_finished is None else last_finished}")
        detail = {"checkpoint": str(checkpoint), "offsets": last_planned, "commits": last_finished}
        if replay is None:
            text += f": batch {last_planned} finished; the next run plans batch {last_planned + 1}"
            resume = (f"all {total} records are committed; nothing to resume" if total and done >= total else
                      f"the next run plans batch {last_planned + 1} from the {len(unread)} landing file(s) "
                      "not read yet")
        else:
            names = ", ".join(Path(p).name for p in _batch_files(checkpoint, replay)) or "its landing file"
            detail["replay"] = replay
            if replay in committed:
                text += (f": batch {replay} ({names}) is replayed on restart; the sink already committed it (killed "
                         "between the sink's commit and Spark's commit log), so the replay is skipped: nothing is "
                         "called again")
                resume = f"the next run replays batch {replay} (the sink skips it: already committed)"
            else:
                ids = _record_ids(_batch_files(checkpoint, replay))
                kept = redone_by(effect_kind)
                text += (f": batch {replay} ({names}) is replayed on restart and the sink has not committed it: "
                         f"its {len(ids) or 'records'} record(s) are processed again, calls that may have been "
                         f"made {kept}")
                in_doubt = [{"key": f"{rid}:", "record_id": rid, "step": "", "where": f"batch {replay}"}
                            for rid in ids]
                resume = f"the next run replays batch {replay} whole; its calls are {kept}"
            more = len(unread)
            if more:
                resume += f", then plans batch {replay + 1} from the {more} landing file(s) not read yet"
    points.append(Point("spark", "stream", "replay" if replay is not None else "planned" if planned else "pending",
                        text, highlight=True, detail=detail))
    expected = {(str(rid), "") for rid in _record_ids([f["path"] for f in files])} if files else None
    return Reading("stream-checkpoint", None, schema_version(source), table_counts(source, TABLES), points,
                   {"landing_files": len(files), "records_total": total, "records_done": done,
                    "batches_committed": int(batches["n"]), "replayed_batches_skipped": skipped,
                    "spark_offsets": last_planned, "spark_commits": last_finished},
                   in_doubt, resume, expected or None, bool(total) and done >= total)
