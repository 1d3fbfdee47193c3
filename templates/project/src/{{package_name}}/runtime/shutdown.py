"""Graceful shutdown on SIGTERM and SIGINT.

The incident this prevents: a worker that handled only SIGINT was sent SIGTERM
by its orchestrator, ignored it, got SIGKILL and lost everything in memory.

1. The first SIGTERM/SIGINT sets :attr:`Shutdown.requested`: the worker stops
   taking work, finishes the record in hand (a safe point), writes the final
   checkpoint and exits 0.
2. A watchdog ends the process if that takes longer than the grace period
   (keep it below the orchestrator's, e.g. Kubernetes' 30 s).
3. A second signal exits at once.

SIGKILL cannot be caught: only the checkpoints already written defend against it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType

from . import metrics
from .errors import EXIT_GRACE_EXPIRED
from ..settings import ENV_PREFIX

#: Set by the drill only: a directory where a worker leaves ``<pid>`` once its handlers are
#: installed, so that the drill never sends SIGTERM to a process that cannot handle it yet.
READY_DIR_ENV = ENV_PREFIX + "DRILL_READY_DIR"


class Shutdown:
    def __init__(self, grace_period_s: float) -> None:
        self.grace_period_s = grace_period_s
        self.requested = False
        self.signal_name: str | None = None
        #: time.monotonic() of the first signal (metrics: how long the stop took)
        self.requested_at: float | None = None
        self._watchdog: threading.Timer | None = None

    def install(self) -> Shutdown:
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)
        ready_dir = os.environ.get(READY_DIR_ENV)
        if ready_dir:  # drilled: say so, now that a SIGTERM is handled
            try:
                (Path(ready_dir) / str(os.getpid())).touch()
            except OSError:
                pass  # the drill then waits its bounded time and signals anyway
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested:
            # os.write and os._exit are safe inside a signal handler; print() is not.
            os.write(2, f"{name} again: exiting now without a final checkpoint\n".encode())
            os._exit(128 + signum)
        self.requested, self.signal_name, self.requested_at = True, name, time.monotonic()
        os.write(2, f"{name}: finishing the current record, then writing the final checkpoint "
                    f"(grace period {self.grace_period_s:g} s)\n".encode())
        self._watchdog = threading.Timer(self.grace_period_s, self._expire)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _expire(self) -> None:
        os.write(2, b"grace period expired before a safe point: exiting now\n")
        metrics.grace_expired()  # counted, and a batch job's textfile written: no finally runs
        os._exit(EXIT_GRACE_EXPIRED)

    def cancel(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
