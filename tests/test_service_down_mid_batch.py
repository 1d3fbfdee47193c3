"""The external service stays down through a call's own retries, in the middle of a batch: the
checkpoint strategies keep what was done, pause and go on (no crash, nothing lost, nothing
applied twice). The drill's fault schedule can stack several bursts of refused or timed-out
calls on one record; a worker that crashes there fails the drill on a correct project."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor import scaffold

pytestmark = pytest.mark.slow

#: More consecutive faults than one call's retries (5 retries and a last try): the batch is cut short.
STACKED = 14


def _env(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DATABASE_URL")}
    env["PYTHONPATH"] = str(project / "src")
    return env


@pytest.mark.parametrize("answers", [{"checkpoint_store": "file"}, {"checkpoint_store": "table"}],
                         ids=["file", "table"])
@pytest.mark.parametrize("fault", ["fail", "timeout"])
def test_a_service_down_past_the_retries_pauses_the_batch_instead_of_crashing(answers, fault, tmp_path: Path) -> None:
    made = scaffold.generate("checkpoint", tmp_path / "job", {"project_name": "Down Job", **answers})
    data = tmp_path / "data"
    env = _env(made.dest)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", made.package, *args, "--data-dir", str(data)], cwd=made.dest,
                              env=env, capture_output=True, text=True, timeout=300)

    assert run("submit-demo", "--records", "40", "--work-ms", "0").returncode == 0
    # The service's own schedule (as the drill's nemesis sets it): the next STACKED calls fail or time out.
    schedule = (f"from pathlib import Path; from {made.package}.runtime.external import ExternalService; "
                f"ExternalService(Path({str(data)!r})).schedule_faults({fault}={STACKED})")
    scheduled = subprocess.run([sys.executable, "-c", schedule], cwd=made.dest, env=env, capture_output=True,
                               text=True, timeout=60)
    assert scheduled.returncode == 0, scheduled.stderr
    done = run("run")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "unavailable" in done.stdout + done.stderr  # it said so, and went on
    status = json.loads(run("status", "--json").stdout)
    assert (status["done"], status["failed"]) == (40, 0), status
    count = subprocess.run([sys.executable, "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1])"
                            ".execute('SELECT COUNT(*) FROM effects').fetchone()[0])", str(data / "external.db")],
                           capture_output=True, text=True, timeout=60)
    assert count.stdout.strip() == "40", count.stdout + count.stderr  # each record's effect exactly once
