"""Run a shell command in its own process group, and stop that group, grandchildren included.

The probe's only way of touching processes: it signals the group it started (never a name, never
another group); every wait is bounded. On Linux, zombies are not counted as members (an init that
does not reap orphans must not make a stopped group look alive).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from advisor.errors import ProbeError

POLL_S = 0.01       # how often a wait looks again
GONE_WAIT_S = 5.0   # after SIGKILL, how long to wait for the whole group to disappear
TAIL_LINES = 8      # lines of output kept from a command


@dataclass
class Finished:
    """A command run to its end (or stopped at its time limit)."""

    exit_code: int | None  # None: stopped at the time limit
    seconds: float
    tail: list[str] = field(default_factory=list)

    @property
    def last_line(self) -> str:
        return self.tail[-1] if self.tail else ""


def members(pgid: int) -> bool:
    """Is any live (non-zombie) process left in the group? /proc on Linux, else kill(0)."""
    proc = Path("/proc")
    if proc.is_dir():
        for entry in os.scandir(proc):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class Group:
    """One command in its own session and process group; only this group is ever signalled."""

    def __init__(self, command: str, cwd: Path, log: Path) -> None:
        with open(log, "wb") as out:
            try:
                self.proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, stdin=subprocess.DEVNULL,
                                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as exc:
                raise ProbeError(f"cannot start bash for {command!r} in {cwd}: {exc.strerror or exc}.") from None
        self.pgid = self.proc.pid  # start_new_session: the leader's pid is the group id
        self.log = log
        self.started = time.monotonic()

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()  # whatever happened (an error, Ctrl-C, a closed generator): the group is stopped

    def wait(self, timeout_s: float) -> int | None:
        """The leader's exit code, or None when it is still running after ``timeout_s``."""
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def signal(self, sig: int) -> None:
        # Once the leader is reaped, signal only while members remain (the id is then still theirs).
        if self.proc.returncode is not None and not members(self.pgid):
            return
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def poll(self) -> int | None:
        return self.proc.poll()

    def gone(self) -> bool:
        return self.proc.poll() is not None and not members(self.pgid)

    def wait_gone(self, timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while not self.gone():
            if time.monotonic() >= end:
                return False
            time.sleep(POLL_S)
        return True

    def kill(self) -> int:
        """SIGKILL the whole group (grandchildren too) and reap the leader; its exit code."""
        self.signal(signal.SIGKILL)
        try:
            code = self.proc.wait(timeout=GONE_WAIT_S)
        except subprocess.TimeoutExpired:  # stuck in the kernel; report and go on
            code = -signal.SIGKILL
        self.wait_gone(GONE_WAIT_S)
        return code

    def tail(self, lines: int = TAIL_LINES) -> list[str]:
        """The last lines of the command's output (only the end of a long log is read)."""
        try:
            with open(self.log, "rb") as fh:
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - 16384))
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            return []
        return [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]


def run_command(command: str, cwd: Path, timeout_s: float, log: Path) -> Finished:
    """Run a command to its end, bounded by ``timeout_s``; leftovers in its group are stopped."""
    with Group(command, cwd, log) as group:  # on leaving: a timed-out command, or its leftovers, stopped
        code = group.wait(timeout_s)
        seconds = time.monotonic() - group.started
    return Finished(code, round(seconds, 3), group.tail())
