"""`run` says what it did (one line on success: records, time, recoveries, calls in doubt), in every
database strategy; `status` keeps its columns in line however long the task ids are."""

from __future__ import annotations

import importlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.scaffold.generation import generate
from test_inspect import _effects  # effects the simulated service applied so far

SUMMARY = re.compile(r"^run done: (\d+) of (\d+) records done \((\d+) by this run\) in [\d.]+ s; (.+); (.+)$", re.M)


def _env(dest: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return {**env, "PYTHONPATH": str(dest / "src")}


def _cli(dest: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "demo_job", *args], cwd=dest, env=_env(dest), capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["checkpoint", "idempotent-retry", "state-machine", "event-sourcing",
                                      "event-sourcing-idempotent"])
def test_run_prints_one_summary_line(tmp_path: Path, strategy: str) -> None:
    dest = tmp_path / "proj"
    generate(strategy, dest, {"project_name": "demo job"})
    assert _cli(dest, "submit-demo", "--records", "120").returncode == 0
    ran = _cli(dest, "run")
    assert ran.returncode == 0, ran.stderr
    found = SUMMARY.findall(ran.stdout)
    assert len(found) == 1, ran.stdout
    done, total, by_run, recovered, doubt = found[0]
    assert (done, total, by_run) == ("120", "120", "120"), ran.stdout
    assert recovered == "nothing to recover" and doubt == "0 calls in doubt", ran.stdout


@pytest.mark.slow
def test_after_kill_9_the_summary_counts_the_takeover(tmp_path: Path) -> None:
    dest = tmp_path / "proj"
    generate("checkpoint", dest, {"project_name": "demo job"})
    assert _cli(dest, "submit-demo", "--records", "600", "--work-ms", "2").returncode == 0
    worker = subprocess.Popen([sys.executable, "-m", "demo_job", "run"], cwd=dest, env=_env(dest),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while _effects(dest / "data") < 250 and time.monotonic() < deadline and worker.poll() is None:
        time.sleep(0.01)
    assert worker.poll() is None, "the worker ended before it could be killed"
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    ran = _cli(dest, "run")
    assert ran.returncode == 0, ran.stderr
    found = SUMMARY.findall(ran.stdout)
    assert len(found) == 1 and found[0][:2] == ("600", "600"), ran.stdout
    assert 0 < int(found[0][2]) < 600, ran.stdout
    assert found[0][3] == "1 unit(s) taken over from a killed or silent worker", ran.stdout


def test_status_columns_hold_with_long_task_ids(tmp_path: Path) -> None:
    dest = tmp_path / "proj"
    generate("checkpoint", dest, {"project_name": "demo job"})
    sys.path.insert(0, str(dest / "src"))
    try:
        status = importlib.import_module("demo_job.ops.status")
        task = {"status": "running", "done": 5, "total": 500, "percent": 1.0, "last_checkpoint_age_s": 2.5,
                "rate_per_s": 40.0, "attempts": 1, "error": None}
        report = {"strategy": "checkpoint", "done": 5, "total": 1000, "percent": 0.5, "failed": 0,
                  "tasks": [{**task, "task_id": "demo-00000"},
                            {**task, "task_id": "orders-2024-06-01-batch-000042-from-the-night-run"}]}
        lines = status.render(report, as_json=False).splitlines()[1:]
    finally:
        sys.path.remove(str(dest / "src"))
        for name in [m for m in sys.modules if m == "demo_job" or m.startswith("demo_job.")]:
            del sys.modules[name]
    # Every column ends where its header ends: the rows are as long as the header.
    assert len({len(line) for line in lines}) == 1, "\n".join(lines)
    assert lines[1].index(" running") == lines[2].index(" running"), "\n".join(lines)
