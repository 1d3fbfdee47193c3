"""The benchmarks' optional DBOS side: without the `bench` extra it says how to get it and steps
aside (bench_curve.py runs the other sides), never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_dbos_side_without_dbos_says_skipped(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "dbos"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("dbos is not installed (simulated)")\n')
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "shadow")}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "curve_sides.py"), "dbos", "no_such_job",
                           str(tmp_path / "data"), "10"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("skipped: dbos is not installed") and "pip install" in done.stdout, done.stdout
    assert not (tmp_path / "data").exists()  # nothing was run
