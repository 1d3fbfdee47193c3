"""`advisor inspect` right after a worker was killed with SIGKILL: the owner is named gone (owners are
`<host id>:<start>:<pid>`, judged as the project's runtime/owners.py judges them), and thousands of
not-started tasks read as one counted line, not one line each."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.cli import main
from test_inspect import _effects  # effects the simulated service applied so far

pytestmark = pytest.mark.slow


def test_after_kill_9_the_owner_is_gone_and_not_started_tasks_are_counted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from advisor.scaffold.generation import generate

    dest = tmp_path / "proj"
    generate("checkpoint", dest, {"project_name": "demo job", "task_size": "50"})
    env = {**os.environ, "PYTHONPATH": str(dest / "src")}
    env.pop("DATABASE_URL", None)
    env.pop("DEMO_JOB_HOST_ID", None)
    queued = subprocess.run([sys.executable, "-m", "demo_job", "submit-demo", "--records", "2000", "--work-ms", "2"],
                            cwd=dest, env=env, capture_output=True, text=True, timeout=120)
    assert queued.returncode == 0, queued.stderr
    worker = subprocess.Popen([sys.executable, "-m", "demo_job", "run"], cwd=dest, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data = dest / "data"
    deadline = time.monotonic() + 90
    while _effects(data) < 70 and time.monotonic() < deadline and worker.poll() is None:
        time.sleep(0.01)
    assert worker.poll() is None, "the worker ended before it could be killed"
    worker.send_signal(signal.SIGKILL)
    worker.wait()

    assert main(["inspect", str(dest)]) == 0
    text = capsys.readouterr().out
    # The owner the worker wrote is <host id>:<start>:<pid>; its pid is gone on this host.
    assert f"owner pid {worker.pid} on host " in text, text
    assert "is gone" in text and "the next worker takes it over at once" in text, text
    # 40 tasks of 50 records: the not-started ones are one counted line naming a few ids.
    folded = re.search(r"^  (\d+) tasks \((demo-\d+), (demo-\d+), (demo-\d+), …\) not started: each resumes at "
                       r"record 0$", text, re.M)
    assert folded and int(folded.group(1)) >= 30, text
    assert not re.search(r"^  task \S+ not started", text, re.M), text
    assert len(text.splitlines()) < 25, text
