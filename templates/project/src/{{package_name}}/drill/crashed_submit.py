"""The drill's submit-crash fault (schedule.py): the input submitted by a process killed just
before its last persistence point, before the workers start; the runner then submits it again
under the same correlation id, as a producer that crashed would retry.

A submit whose records and correlation id do not commit together leaves the retry answered
"already queued" with records missing (lost), or queues them twice: the drill's checks of the
effects and results see either. The points are counted first by the same submit on a scratch
data directory (faults.py numbers them the same in every run of the same input).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..runtime import faults
from ..runtime.errors import JobError
from ..settings import PACKAGE
from .workers import worker_env

#: The records the crashed submit read (JSON lines), in the drill's data directory.
SUBMIT_FILE = "drill-submit.jsonl"
SUBMIT_TIMEOUT_S = 300


def crash_a_submit(data_dir: Path, records: list[dict[str, Any]], correlation_id: str,
                   work_ms: float) -> dict[str, Any]:
    """Submit ``records`` into ``data_dir`` in a process killed at its last persistence point.
    Returns what happened: ``point`` (how many a clean submit passes), ``crashed``."""
    source = data_dir / SUBMIT_FILE
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    scratch = Path(tempfile.mkdtemp(prefix="drill-submit-census-"))
    try:
        points = scratch / "points"
        points.mkdir()
        census = _submit(source, scratch / "data", correlation_id, work_ms, {faults.POINTS_ENV: str(points)})
        if census.returncode != 0:
            raise JobError(f"the drill's submit on a scratch data directory failed (exit {census.returncode}): "
                           f"{census.stderr.strip()[-500:]}")
        reports = [json.loads(p.read_text(encoding="utf-8")) for p in points.glob("*.json")]
        total = max((int(r["total"]) for r in reports), default=0)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if total == 0:
        return {"point": 0, "crashed": False}  # nothing persisted by a submit: nothing to crash
    crashed = _submit(source, data_dir, correlation_id, work_ms, {faults.CRASH_ENV: str(total)})
    return {"point": total, "crashed": crashed.returncode == -9, "submit_exit": crashed.returncode}


def _submit(source: Path, data_dir: Path, correlation_id: str, work_ms: float,
            extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", PACKAGE, "submit", "--file", str(source), "--correlation-id", correlation_id,
           "--work-ms", str(work_ms), "--data-dir", str(data_dir)]
    return subprocess.run(cmd, env={**worker_env(), **extra}, capture_output=True, text=True,
                          timeout=SUBMIT_TIMEOUT_S, check=False)
