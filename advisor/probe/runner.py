"""``advisor probe``: crash-drill a job the team already has.

The probe runs the team's command (``bash -c CMD``) in its own process group, kills the group at
random moments drawn from a seed, restarts the command until it exits 0 on its own, then runs
the team's verify command (exit 0 = the data is right). With a progress command (prints a number:
records done) it measures the work each kill cost and how long the job took to make new progress
after a restart. The report and its verdict are built in :mod:`advisor.probe.report`.

Safety: only the process group the probe started is ever signalled (never a name); every wait
is bounded; nothing of the user's is deleted (``--reset`` is the user's own command, run only
when given). Pure library: no Textual, no Copier.
"""

from __future__ import annotations

import math
import random
import re
import signal
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from advisor.errors import ProbeError
from advisor.probe.process_group import Finished, Group, run_command
from advisor.probe.report import build_report, evidence_lines, load_report, summary

__all__ = ["ProbeOptions", "Finished", "probe_events", "run_probe", "run_command", "stop_on_sigterm",
           "build_report", "evidence_lines", "load_report", "summary"]

POLL_S = 0.01            # how often the probe looks at the job (exit, kill moment, next sample)
MAX_FAILURES = 3         # restarts after runs that exit non-zero on their own, before giving up
CANNOT_START = (126, 127)  # bash: not executable / command not found

Events = Generator[dict[str, Any], None, None]


@dataclass(frozen=True)
class ProbeOptions:
    """What to probe and how; :meth:`check` turns a bad value into a :class:`ProbeError`."""

    run: str
    verify: str | None = None
    progress: str | None = None
    reset: str | None = None
    cwd: Path = Path(".")
    #: --power-loss: the job's data directory (relative to ``cwd``) goes on LazyFS and every kill
    #: is a power cut too (power_cut.py)
    power_loss: bool = False
    data: str | None = None
    kills: int = 5
    sigterm: bool = False
    grace_s: float = 10.0
    min_s: float = 1.0
    max_s: float = 10.0
    seed: int = 1
    timeout_s: float = 600.0
    baseline: bool = False
    sample_s: float = 0.2

    def check(self) -> None:
        for flag, command in (("--run", self.run), ("--verify", self.verify), ("--progress", self.progress),
                              ("--reset", self.reset)):  # fmt: skip
            if command is not None and not command.strip():
                raise ProbeError(f"{flag} is empty: give the shell command to run, e.g. {flag} 'python job.py'.")
        if self.kills < 1:
            raise ProbeError(f"--kills {self.kills}: give at least 1 kill.")
        for flag, value in (("--grace", self.grace_s), ("--timeout", self.timeout_s), ("--sample-s", self.sample_s)):
            if not (value > 0 and math.isfinite(value)):  # also rejects NaN and inf
                raise ProbeError(f"{flag} {value}: give a number of seconds above 0.")
        if not (0 <= self.min_s <= self.max_s and 0 < self.max_s < math.inf):
            raise ProbeError(f"--min-s {self.min_s} --max-s {self.max_s}: kill moments need 0 <= min-s <= max-s, "
                             "max-s above 0 (seconds after each start).")
        if self.baseline and not self.reset:
            raise ProbeError("--baseline needs --reset CMD: the drill must start from the same state as the "
                             "uninterrupted run, and the probe never deletes your data itself.")
        if not Path(self.cwd).is_dir():
            raise ProbeError(f"--cwd {self.cwd}: no such folder.")
        if self.data is not None and not self.power_loss:
            raise ProbeError("--data names the directory a power cut hits: give it with --power-loss.")
        if self.power_loss:
            if not self.data:
                raise ProbeError("--power-loss needs --data DIR: the directory where the job keeps its state.")
            if self.sigterm:
                raise ProbeError("--power-loss cuts the power: no SIGTERM first; drop --sigterm.")
            data = self.data_dir()
            if not data.is_dir():
                raise ProbeError(f"--data {self.data}: no such folder in {Path(self.cwd).resolve()} (create it, or"
                                 " let --reset create it: the probe mounts over it, it never removes it).")
            if data.resolve() == Path(self.cwd).resolve() or data.resolve() in Path(self.cwd).resolve().parents:
                raise ProbeError(f"--data {self.data}: give the job's data directory, inside --cwd, not --cwd itself.")

    def data_dir(self) -> Path:
        return Path(self.cwd) / (self.data or ".")

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["cwd"] = str(Path(self.cwd).resolve())
        return data


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _number(lines: list[str]) -> float | None:
    """The last number the progress command printed."""
    found = _NUMBER.findall(" ".join(lines))
    if not found:
        return None
    value = float(found[-1])
    return int(value) if value.is_integer() else value


# ---------------------------------------------------------------------- the probe
class _Probe:
    def __init__(self, o: ProbeOptions, tmp: Path) -> None:
        self.o, self.tmp = o, tmp
        self.cwd = Path(o.cwd).resolve()
        self.rng = random.Random(o.seed)
        self.t0 = time.monotonic()
        self.logs = 0
        self.progress_errors: list[str] = []
        self.baseline_result: dict[str, Any] | None = None
        self.runs: list[dict[str, Any]] = []
        self.kills: list[dict[str, Any]] = []
        self.outcome = "not run"
        self.wall_s = 0.0
        self.last: float | None = None   # the latest progress reading
        self.pending: dict[str, Any] | None = None  # the last kill, until new progress shows its recovery
        self.power: Any = None  # --power-loss: the LazyFS mount whose cache a kill drops (power_cut.py)

    def t(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def log(self) -> Path:
        self.logs += 1
        return self.tmp / f"{self.logs}.log"

    def command(self, flag: str, command: str, timeout_s: float | None = None) -> Finished:
        done = run_command(command, self.cwd, timeout_s or self.o.timeout_s, self.log())
        if done.exit_code in CANNOT_START:
            raise self.cannot_start(flag, command, done.exit_code, done.tail)
        return done

    def cannot_start(self, flag: str, command: str, code: int | None, tail: list[str]) -> ProbeError:
        return ProbeError(f"{flag} {command!r} cannot start (exit {code}: {tail[-1] if tail else 'no output'})."
                          f" Check the command in a shell in {self.cwd}.")

    def reset(self) -> Events:
        if self.o.reset:
            done = self.command("--reset", self.o.reset)
            yield {"event": "reset", "exit_code": done.exit_code, "seconds": done.seconds, "t": self.t()}
            if done.exit_code != 0:
                what = "timed out" if done.exit_code is None else f"exited {done.exit_code}"
                raise ProbeError(f"--reset {what} ({done.last_line or 'no output'}); the job was not started.")

    def sample(self) -> float | None:
        if not self.o.progress:
            return None
        done = self.command("--progress", self.o.progress, min(10.0, self.o.timeout_s))
        value = _number(done.tail) if done.exit_code == 0 else None
        if value is None:
            self.progress_errors.append(f"exit {done.exit_code}: {done.last_line or 'no output'}")
        return value

    def verify(self) -> dict[str, Any] | None:
        if not self.o.verify:
            return None
        done = self.command("--verify", self.o.verify)
        return {"command": self.o.verify, "exit_code": done.exit_code, "passed": done.exit_code == 0,
                "seconds": done.seconds, "tail": done.tail}

    def baseline(self) -> Events:
        """One uninterrupted run after the reset, then its verify: does the job pass without kills?"""
        yield from self.reset()
        with Group(self.o.run, self.cwd, self.log()) as group:
            code = group.wait(self.o.timeout_s)
            wall_s = round(time.monotonic() - group.started, 3)
        if code in CANNOT_START:
            raise self.cannot_start("--run", self.o.run, code, group.tail())
        finished = code == 0  # a failed run is not worth verifying
        self.baseline_result = {"exit_code": code, "wall_s": wall_s, "tail": [] if finished else group.tail(),
                                "progress": self.sample(), "verify": self.verify() if finished else None}
        verify = self.baseline_result["verify"]
        yield {"event": "baseline", "exit_code": code, "wall_s": wall_s, "t": self.t(),
               "verify_passed": verify["passed"] if verify else None}

    def drill(self) -> Events:
        """Start, kill at a random moment, restart, ... until a run exits 0 on its own (or bounds hit)."""
        o = self.o
        started = time.monotonic()
        deadline = started + o.timeout_s
        failures, self.outcome = 0, "finished"
        while True:
            with Group(o.run, self.cwd, self.log()) as group:  # stopped on leaving, whatever happens
                run: dict[str, Any] = {"n": len(self.runs) + 1, "start_t": self.t()}
                self.runs.append(run)
                if self.pending is not None:
                    self.pending["restart_at"] = group.started
                    yield {"event": "restart", "n": self.pending["n"], "t": self.t()}
                more = len(self.kills) < o.kills
                kill_at = group.started + self.rng.uniform(o.min_s, o.max_s) if more else math.inf
                code = yield from self.watch(group, min(kill_at, deadline))
                if code is None and time.monotonic() >= deadline:
                    run.update(ended="timed out", exit_code=group.kill(), seconds=self.since(group))
                    self.outcome = "timed out"
                    break
                if code is None:  # the kill moment came
                    yield from self.kill(group, run)
                    continue
                group.kill()  # exited on its own: stop anything it left behind in its group
                run.update(ended="exited", exit_code=code, seconds=self.since(group))
                yield {"event": "exit", "run": run["n"], "exit_code": code, "seconds": run["seconds"], "t": self.t()}
                if code in CANNOT_START and len(self.runs) == 1:
                    raise self.cannot_start("--run", o.run, code, group.tail())
                if code == 0:
                    if self.pending is not None:  # nothing new left to do: recovered by finishing
                        yield self.recovered(time.monotonic())
                    break
                run["tail"] = group.tail()
                failures += 1
                if failures > MAX_FAILURES or time.monotonic() >= deadline:
                    self.outcome = "gave up" if failures > MAX_FAILURES else "timed out"
                    break
        self.wall_s = round(time.monotonic() - started, 3)

    @staticmethod
    def since(group: Group) -> float:
        return round(time.monotonic() - group.started, 3)

    def watch(self, group: Group, until: float) -> Generator[dict[str, Any], None, int | None]:
        """Sample progress while the run lasts; its exit code, or None when ``until`` came first."""
        next_sample = group.started
        while True:
            code = group.poll()
            now = time.monotonic()
            if self.o.progress and (now >= next_sample or code is not None):
                next_sample = now + self.o.sample_s
                yield from self.reading(self.sample())
            if code is not None or now >= until:
                return code
            wait = min(POLL_S, next_sample - now) if self.o.progress else POLL_S
            time.sleep(max(0.0, min(wait, until - now)))

    def reading(self, value: float | None) -> Iterator[dict[str, Any]]:
        """One progress reading: the chart's point, and the recovery of the last kill once it is exceeded."""
        if value is None:
            return
        self.last = value
        yield {"event": "progress", "done": value, "total": None, "t": self.t()}
        p = self.pending
        if p is not None:
            p["low"] = value if p["low"] is None else min(p["low"], value)
            if p["mark"] is None or value > p["mark"]:
                yield self.recovered(time.monotonic())

    def kill(self, group: Group, run: dict[str, Any]) -> Iterator[dict[str, Any]]:
        kill: dict[str, Any] = {"n": len(self.kills) + 1, "signal": "SIGTERM" if self.o.sigterm else "SIGKILL",
                                "after_s": self.since(group)}
        kill.update(self.stop(group))
        if self.power is not None:  # the whole group is dead: drop what it never fsynced
            kill["power_cut_s"] = round(self.power.clear_cache(), 3)
        run.update(ended="killed", exit_code=kill["exit_code"], seconds=kill["after_s"])
        before, after = self.last, self.sample()  # the job is down: `after` is what survived the kill
        mark = after if after is not None else before
        if after is not None:
            self.last = after
        kill.update(progress_before=before, progress_after=after, progress_at_kill=mark)
        self.kills.append(kill)
        yield {"event": "kill", "t": self.t(), "done": before if before is not None else after, **kill}
        if self.pending is not None:  # killed again before it showed new progress
            self.close(self.pending)
            self.pending = None
        if self.o.progress:  # recovery shows as progress beyond the mark the job had reached at the kill
            self.pending = {"n": kill["n"], "mark": mark, "low": after, "kill": kill}

    def recovered(self, now: float) -> dict[str, Any]:
        """The job made new progress (or finished) after the last kill: its recovery time."""
        assert self.pending is not None
        kill = self.close(self.pending)
        kill["recovery_ms"] = round((now - self.pending.get("restart_at", now)) * 1000, 1)
        self.pending = None
        return {"event": "recovered", "n": kill["n"], "ms": kill["recovery_ms"], "t": self.t()}

    @staticmethod
    def close(pending: dict[str, Any]) -> dict[str, Any]:
        """A kill's redone work: the progress at the kill minus the lowest reading after it."""
        kill: dict[str, Any] = pending["kill"]
        kill["recovery_ms"] = None
        mark, low = pending["mark"], pending["low"]
        if mark is not None and low is not None:
            kill["redone"] = max(0, mark - low)
            kill["lowest_after"] = low
        return kill

    def stop(self, group: Group) -> dict[str, Any]:
        """SIGKILL the group; with --sigterm, SIGTERM first and measure how it stops."""
        if not self.o.sigterm:
            return {"exit_code": group.kill()}
        sent = time.monotonic()
        group.signal(signal.SIGTERM)
        in_time = group.wait_gone(self.o.grace_s)
        exit_s = round(time.monotonic() - sent, 3)
        code = group.kill() if not in_time else group.proc.returncode
        assert code is not None
        honoured = in_time and code == 0
        return {"exit_code": code, "exit_s": exit_s, "within_grace": in_time, "honoured": honoured}


def probe_events(o: ProbeOptions) -> Events:
    """Run the probe and yield its events (start, reset, baseline, progress, kill, restart, recovered,
    exit, verify, report); the last one is the report. Closing the generator early stops the job."""
    o.check()
    with tempfile.TemporaryDirectory(prefix="advisor-probe-") as tmp:
        p = _Probe(o, Path(tmp))
        date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        yield {"event": "start", "run": o.run, "kills": o.kills, "signal": "SIGTERM" if o.sigterm else "SIGKILL",
               "seed": o.seed, "records": None, "t": p.t()}
        baseline = None
        if o.baseline:
            yield from p.baseline()
            baseline = p.baseline_result
            assert baseline is not None
            if baseline["exit_code"] != 0 or (baseline["verify"] and not baseline["verify"]["passed"]):
                report = build_report(o.as_json(), date=date, baseline=baseline, runs=[], kills=[],
                                      outcome="baseline failed", wall_s=0.0, verify=None, progress=None,
                                      progress_errors=p.progress_errors)
                yield {"event": "report", **report}
                return
        yield from p.reset()
        with _power_loss(o, Path(tmp)) as mount:  # --reset ran on the directory itself, before the mount
            p.power = mount
            yield from p.drill()
            verify = p.verify() if p.outcome == "finished" else None  # it reads what survived the cuts
        if verify is not None:
            yield {"event": "verify", "t": p.t(), **verify}
        report = build_report(o.as_json(), date=date, baseline=baseline, runs=p.runs, kills=p.kills,
                              outcome=p.outcome, wall_s=p.wall_s, verify=verify, progress=p.last,
                              progress_errors=p.progress_errors)
        yield {"event": "report", **report}


@contextmanager
def _power_loss(o: ProbeOptions, tmp: Path) -> Iterator[Any]:
    """The LazyFS mount over --data with --power-loss, else nothing (None)."""
    if not o.power_loss:
        yield None
        return
    from advisor.probe.power_cut import power_loss_mount

    with power_loss_mount(o.data_dir().resolve(), tmp) as fs:
        yield fs


def run_probe(o: ProbeOptions, emit: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the probe to its end; every event goes to ``emit``; returns the report."""
    report: dict[str, Any] = {}
    events = probe_events(o)
    try:
        for event in events:
            if emit is not None:
                emit(event)
            if event.get("event") == "report":
                report = {k: v for k, v in event.items() if k != "event"}
    finally:
        events.close()  # an exception in emit: the generator's cleanup stops the job's group
    return report


@contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """While probing from the command line, SIGTERM unwinds like Ctrl-C, so the job's group is stopped."""
    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
