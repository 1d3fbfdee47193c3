"""Fault-injection points: where ``drill --aim WINDOW`` kills the worker exactly.

A strategy names its critical windows (``AIM_WINDOWS`` in its module) and calls
:func:`point` at each. A point does nothing unless the drill armed it: the drill
sets ``<PREFIX>FAULTS=<dir>`` for the workers it starts and creates
``<dir>/arm-<window>`` when it wants the next kill to land there. The worker that
reaches an armed point renames the file to ``hit-<window>`` (so exactly one worker
takes it) and holds still; the drill sees the ``hit`` file and sends its SIGKILL.
A hold never lasts longer than :data:`HOLD_S`: a leaked setting cannot hang a run.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .settings import ENV_PREFIX

FAULT_ENV = ENV_PREFIX + "FAULTS"
HOLD_S = 60.0


def point(window: str) -> None:
    """Hold here if the drill armed ``window`` (off otherwise: one environment lookup)."""
    where = os.environ.get(FAULT_ENV)
    if not where:
        return
    try:
        os.rename(Path(where) / f"arm-{window}", Path(where) / f"hit-{window}")
    except FileNotFoundError:
        return  # not armed (or another worker took it)
    deadline = time.monotonic() + HOLD_S
    while time.monotonic() < deadline:  # the drill's SIGKILL ends this
        time.sleep(0.05)


def arm(fault_dir: Path, window: str) -> None:
    fault_dir.mkdir(parents=True, exist_ok=True)
    (fault_dir / f"hit-{window}").unlink(missing_ok=True)
    (fault_dir / f"arm-{window}").write_text(str(time.time()))


def wait_hit(fault_dir: Path, window: str, timeout_s: float, still_running: "object") -> bool:
    """True once a worker holds at ``window``; False after ``timeout_s`` or when
    ``still_running()`` says the worker exited (the run ended first)."""
    deadline = time.monotonic() + timeout_s
    hit = fault_dir / f"hit-{window}"
    while time.monotonic() < deadline:
        if hit.exists():
            hit.unlink(missing_ok=True)
            return True
        if not still_running():  # type: ignore[operator]
            break
        time.sleep(0.01)
    (fault_dir / f"arm-{window}").unlink(missing_ok=True)  # disarm: the next kill is a plain one
    return False
