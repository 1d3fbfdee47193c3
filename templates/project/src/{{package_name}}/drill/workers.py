"""The drill's worker processes: started (armed or not, on a simulated host), signalled, reaped.

Every slot can be armed (runtime/faults.py): the worker then kills itself with SIGKILL
at the armed point. A SIGTERM is only sent once the worker said its handlers are
installed (runtime/shutdown.py leaves ``<pid>`` in the ready directory): a signal that
arrives before the handler would end the worker by the default action, a false alarm.
Everything is written to the history (history.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import settings as settings_module
from ..runtime import faults
from ..runtime.owners import HOST_ID_ENV
from ..runtime.shutdown import READY_DIR_ENV
from .durability import PROBE_ENV
from .history import History
from .store_away import WORKER_APP

#: --hosts N: simulated host k keeps its data directory in <drill dir>/host-k.
HOST_DIR = "host-"
EXTERNAL_DIR_ENV = settings_module.ENV_PREFIX + "EXTERNAL_DIR"
#: The persistence-point crash of a sweep (runtime/faults.py; the sweep's own variable
#: when it defines one): die at the N-th commit or external call.
POINT_ENV = getattr(faults, "POINT_ENV", settings_module.ENV_PREFIX + "DRILL_POINT")
#: How long a SIGTERM waits for the worker to say it is ready (a loaded machine can take
#: seconds to start Python); past it the signal is sent anyway.
READY_WAIT_S = 15.0
READY_DIR = "drill-ready"
#: A worker's metrics port (0: none): one machine, one port, so only slot 0 serves on the one set.
METRICS_PORT_ENV = settings_module.ENV_PREFIX + "METRICS_PORT"
#: The host id a successor gets when the schedule moves it to another host (other-host).
OTHER_HOST = "drill-other-host"


def arming(event: dict[str, Any] | None) -> dict[str, str]:
    """The environment that arms a worker for an armed event (schedule.py)."""
    if event is None:
        return {}
    if "window" in event:
        return {faults.AIM_ENV: f"{event['window']}:{event['pass']}"}
    if "point" in event:
        return {POINT_ENV: str(event["point"])}
    if "crash_point" in event:  # the operator's run (reconciler.py): KIND:N of runtime/faults.py
        return {faults.CRASH_ENV: event["crash_point"]}
    return {}


class Pool:
    """The worker slots of one drill; slot i's process is ``procs[i]``."""

    def __init__(self, data_dir: Path, workers: int, hosts: int, base_env: dict[str, str], log: Any,
                 history: History, probe_dir: Path) -> None:
        self.data_dir, self.hosts, self.base_env, self.log = data_dir, hosts, base_env, log
        self.history, self.probe_dir = history, probe_dir
        self.ready_dir = data_dir / READY_DIR
        self.ready_dir.mkdir(exist_ok=True)
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * workers
        self.armed: list[dict[str, Any] | None] = [None] * workers
        #: The host id each slot runs under (None: this machine's own; --hosts N: drill-host-k).
        self.host: list[str | None] = [None] * workers
        #: --hosts N: the simulated host (0-based) of each slot, hence its data directory.
        self.host_index = [slot % hosts for slot in range(workers)]
        #: The pids of the workers killed by SIGKILL (the drill's, or their own armed kill).
        self.killed: set[int] = set()
        #: The last exit seen per slot, reaped once.
        self.reaped: list[bool] = [False] * workers
        #: When each slot's current worker was started (time.monotonic()): it looks for work after that.
        self.spawned_at: list[float] = [0.0] * workers

    def alive(self) -> list[int]:
        return [i for i, p in enumerate(self.procs) if p is not None and p.poll() is None]

    def move_host(self, slot: int) -> None:
        """The slot's next worker runs on another (simulated) host: another host id, and with
        --hosts N the next host's data directory."""
        if self.hosts > 1:
            self.host_index[slot] = (self.host_index[slot] + 1) % self.hosts
        else:
            self.host[slot] = None if self.host[slot] == OTHER_HOST else OTHER_HOST

    def add_slot(self) -> int:
        """One more worker slot (scale-out), on the host the next slot would start on; its index."""
        slot = len(self.procs)
        self.procs.append(None)
        self.armed.append(None)
        self.host.append(None)
        self.host_index.append(slot % self.hosts)
        self.reaped.append(False)
        self.spawned_at.append(0.0)
        return slot

    def on_host_of(self, slot: int) -> list[int]:
        """The slots on the same (simulated) host as ``slot``, running or not, ``slot`` first."""
        where = (self.host[slot], self.host_index[slot])
        return [slot] + [s for s in range(len(self.procs)) if s != slot and (self.host[s], self.host_index[s]) == where]

    def moved(self) -> bool:
        """Has any slot been moved to another host (other-host)?"""
        home = [slot % self.hosts for slot in range(len(self.procs))]
        return self.host_index != home or (self.hosts == 1 and any(h is not None for h in self.host))

    def home(self, slot: int) -> None:
        """The slot's next worker runs on the host it started on."""
        self.host_index[slot] = slot % self.hosts
        if self.hosts == 1:
            self.host[slot] = None

    def spawn(self, slot: int, armed: dict[str, Any] | None = None, *,
              done: int | None = None, env_extra: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start the slot's worker; ``env_extra``: settings of its own (second_outage.py: a short limit)."""
        env = dict(self.base_env)
        env[EXTERNAL_DIR_ENV] = str(self.data_dir)  # every worker, on every simulated host, calls one service
        env["PGAPPNAME"] = WORKER_APP  # PostgreSQL: the store-outage fault tells its connections apart (store_away.py)
        env[PROBE_ENV] = str(self.probe_dir)  # the worker reports what it really runs with
        env[READY_DIR_ENV] = str(self.ready_dir)
        work_dir = self.data_dir
        if self.hosts > 1:  # worker slot -> host: its own data directory and host id (owners.py)
            number = self.host_index[slot] + 1
            work_dir = self.data_dir / f"{HOST_DIR}{number}"
            self.host[slot] = f"drill-host-{number}"
        if self.host[slot] is not None:
            env[HOST_ID_ENV] = self.host[slot]  # type: ignore[assignment]
        if slot > 0:  # workers on one machine cannot share the metrics port the settings name: the first keeps it
            env[METRICS_PORT_ENV] = "0"
        env.update(arming(armed))
        env.update(env_extra or {})
        cmd = [sys.executable, "-m", settings_module.PACKAGE, "run", "--data-dir", str(work_dir)]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, env=env)
        self.procs[slot], self.armed[slot], self.reaped[slot] = proc, armed, False
        self.spawned_at[slot] = time.monotonic()
        self.history.add("spawn", slot=slot, pid=proc.pid, host=self.host[slot],
                         armed=armed["n"] if armed else None, done=done)
        return proc

    def start_again(self, slot: int) -> subprocess.Popen[bytes]:
        """The job started once more on ``slot``'s data directory while that worker runs (the
        second-start fault): no slot of its own, unarmed, unwatched by the probe, the same service."""
        env = {k: v for k, v in self.base_env.items() if k not in (PROBE_ENV, READY_DIR_ENV)}
        env[EXTERNAL_DIR_ENV] = str(self.data_dir)
        env["PGAPPNAME"] = WORKER_APP
        work_dir = self.data_dir / f"{HOST_DIR}{self.host_index[slot] + 1}" if self.hosts > 1 else self.data_dir
        cmd = [sys.executable, "-m", settings_module.PACKAGE, "run", "--data-dir", str(work_dir)]
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, env=env)

    def exited(self) -> list[int]:
        """Slots whose process ended since the last call (each reported once)."""
        found = []
        for i, p in enumerate(self.procs):
            if p is not None and not self.reaped[i] and p.poll() is not None:
                self.reaped[i] = True
                found.append(i)
        return found

    def wait_ready(self, slot: int) -> bool:
        """True once the worker in ``slot`` has installed its handlers; False if it ended first."""
        proc = self.procs[slot]
        assert proc is not None
        marker = self.ready_dir / str(proc.pid)
        deadline = time.monotonic() + READY_WAIT_S
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        if marker.exists():
            self.history.add("ready", slot=slot, pid=proc.pid)
        return proc.poll() is None

    def sigkill(self, slot: int, event: dict[str, Any], done: int) -> dict[str, Any]:
        """``landed`` is 1 only if the worker was still running and the signal ended it."""
        proc = self.procs[slot]
        assert proc is not None
        if proc.poll() is not None:
            return {"landed": 0}
        proc.send_signal(signal.SIGKILL)
        code = proc.wait()
        self.reaped[slot] = True
        if code == -signal.SIGKILL:
            self.killed.add(proc.pid)
        self.history.add("exit", slot=slot, pid=proc.pid, code=code, by="drill", event=event["n"], done=done)
        return {"landed": int(code == -signal.SIGKILL)}

    def sigterm(self, slot: int, event: dict[str, Any], grace_s: float, done: int,
                sent: Callable[[], None] | None = None) -> dict[str, Any]:
        """Ask the worker to stop; wait for it (its grace period, then 5 s more at most). ``sent``:
        called once the signal is on its way, before the wait."""
        if not self.wait_ready(slot):
            return {"landed": 0}
        proc = self.procs[slot]
        assert proc is not None
        sent_mono, sent_at = time.monotonic(), time.time()
        proc.send_signal(signal.SIGTERM)
        if sent is not None:
            sent()
        try:
            code = proc.wait(timeout=grace_s + 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        seconds = round(time.monotonic() - sent_mono, 3)
        self.reaped[slot] = True
        finished = code == -signal.SIGTERM and self.finished_before(proc.pid, sent_at)
        self.history.add("exit", slot=slot, pid=proc.pid, code=code, by="drill", event=event["n"],
                         signal="SIGTERM", exit_s=seconds, done=done, **({"finished_first": True} if finished else {}))
        return {"exit_code": code, "exit_s": seconds, "within_grace": seconds <= grace_s, "landed": 1,
                **({"finished_first": True} if finished else {})}

    def finished_before(self, pid: int, sent_at: float) -> bool:
        """Had this worker's run already returned 0 by itself when the SIGTERM was sent? Then the
        signal met the interpreter on its way out (Python puts the default handlers back as it
        exits) and the worker's exit code says nothing about its handler: its own account, written
        when its run ended (drill/witness.py), says it finished."""
        ended = self.probe_report(pid).get("ended")
        return bool(ended and ended.get("code") == 0 and not ended.get("signal") and ended.get("at", sent_at) <= sent_at)

    def probe_report(self, pid: int) -> dict[str, Any]:
        """What a worker's probe wrote of it so far (durability.py); {} before it wrote, or caught mid-write."""
        try:
            return dict(json.loads((self.probe_dir / f"{pid}.json").read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return {}

    def stop_all(self) -> None:
        for p in self.procs:
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def worker_env() -> dict[str, str]:
    """The workers' (and the oracle's) environment: this one, unarmed, the package importable."""
    env = dict(os.environ)
    for name in (faults.AIM_ENV, POINT_ENV, READY_DIR_ENV):
        env.pop(name, None)  # armed only where the drill says so (Pool.spawn)
    src = str(Path(__file__).resolve().parents[2])  # src/: importable even when not installed
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
