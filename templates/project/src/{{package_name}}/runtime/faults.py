"""Where the drill kills: the strategy's named windows, and every persistence point.

**Named windows (aimed kills).** A crash is dangerous only in a few places: after the
external call went through and before the commit that records it; after results commit
and before the offset; between two steps of a flow; between an event append and the
subscriber's position. Random kills land there rarely (a window can be a millisecond
wide), so every strategy module names its windows as data::

    WINDOWS = {"after_call_before_commit": "the call went through; the commit that records it has not happened"}

and calls ``faults.window("after_call_before_commit")`` at that exact point.
``<PKG>_DRILL_AIM=WINDOW:N`` (set by ``drill --aim``, never by hand in production) makes
the process kill ITSELF with SIGKILL the N-th time it passes ``WINDOW``, exactly like a
real crash there: no ``finally``, no atexit, no flush.

**Persistence points (the crash-point sweep, ``drill --sweep``).** A window exists only
where someone thought of it; a bug can open a new one (a queue message acked before its
records commit). So every moment at which the durable state is about to change, or has
just changed at the other side, is a numbered point as well, the way ALICE and
CrashMonkey enumerate crash states:

``commit``   a state-store transaction, just before its COMMIT (store.py)
``append``   an event-store append, before the library's transaction (event sourcing)
``call``     an external call, just before it is sent (effects.py)
``called``   an external call that returned, before anything records its answer
``fsync`` ``dirsync`` ``rename``   a file's fsync, a directory's fsync, an ``os.replace``
             or ``os.rename`` (checkpoint files), each just before it happens
``window``   a named window (above), which counts as a point too

A point is named ``KIND@SITE``: the module and function that asked for it
(``commit@worker.checkpoint``, ``call@worker.effect``, ``window@after_commit_before_next_batch``).
``<PKG>_DRILL_CRASH_AT`` arms the process: ``N`` kills it at its N-th point of any
kind, ``KIND:N`` or ``KIND@SITE:N`` at the N-th point of that kind or site, ``state:N`` at
its N-th change of the durable state, whatever the store (a ``commit``, an ``append`` or a
``rename``: the default drill's kill just before one of the worker's writes, wherever the
code writes, so a batch written in two transactions where one was meant is cut between them). Points are
counted per process from its start, so a worker's numbering is the same in every run of
the same input on one worker. ``<PKG>_DRILL_POINTS=DIR`` makes the process write
``DIR/<pid>.json`` (each point's name, counts per name, where it was killed) when it is
killed there and when it exits: the sweep learns the sites from it.

Unarmed (the default: no variable set), ``window`` and ``point`` are functions that return
at once: one empty call per commit or external call, nothing measurable beside the commit
(benchmarks/bench_crash_points.py measures it).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import stat
import sys
from typing import Any

from ..settings import ENV_PREFIX

#: ``WINDOW:N``: die the N-th time WINDOW is passed (N >= 1).
AIM_ENV = ENV_PREFIX + "DRILL_AIM"
#: ``N``, ``KIND:N`` or ``KIND@SITE:N``: die at that persistence point (N >= 1).
CRASH_ENV = ENV_PREFIX + "DRILL_CRASH_AT"
#: A directory: count every point and report them there (``<pid>.json``).
POINTS_ENV = ENV_PREFIX + "DRILL_POINTS"
#: The kinds of point, in the order the sweep's report lists them.
KINDS = ("commit", "append", "call", "called", "fsync", "dirsync", "rename", "window")
#: ``state``: any of these kinds, the moments the durable state changes (CRASH_ENV ``state:N``).
STATE_KINDS = ("commit", "append", "rename")
#: Frames of these modules are the hook, not the site that asked for the point.
_HOOK_MODULES = ("runtime.faults", "runtime.store", "runtime.effects", "event_store", "contextlib",
                 "drill.durability")


def parse(value: str | None) -> tuple[str, int] | None:
    """``"WINDOW:N"`` -> (WINDOW, N); None (or empty) -> None. Malformed: ValueError."""
    if not value:
        return None
    name, _, count = value.rpartition(":")
    if not name or not count.isdigit() or int(count) < 1:
        raise ValueError(f"{AIM_ENV}={value!r}: expected WINDOW:N with N >= 1")
    return name, int(count)


def parse_crash(value: str | None) -> tuple[str, int] | None:
    """``"N"`` -> ("", N) (any point); ``"KIND:N"``/``"KIND@SITE:N"``/``"state:N"`` -> (name, N); empty -> None."""
    if not value:
        return None
    name, _, count = value.rpartition(":")
    if not count.isdigit() or int(count) < 1 or (name and name != "state" and name.split("@", 1)[0] not in KINDS):
        raise ValueError(f"{CRASH_ENV}={value!r}: expected N, KIND:N, KIND@SITE:N or state:N with N >= 1 "
                         f"and KIND one of {', '.join(KINDS)}")
    return name, int(count)


def _die(why: str) -> None:
    print(f"[drill] {why}: SIGKILL", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


# ------------------------------------------------------------- named windows
_aim: str | None = None
_left = 0


def _disarmed(name: str) -> None:
    return None


def _armed(name: str) -> None:
    global _left
    if name != _aim:
        return
    _left -= 1
    if _left <= 0:
        _die(f"aimed kill in window {name}")


def _counted_window(name: str) -> None:
    _counter.passed("window", name)
    if _aim is not None:
        _armed(name)


#: Called by strategy code at each named window (``faults.window("...")``; look it up
#: on the module at each call, so arm() takes effect).
window = _disarmed


def arm(name: str | None, count: int = 1) -> None:
    """Arm (or with None, disarm) this process: die the ``count``-th time ``name`` is passed."""
    global _aim, _left, window
    _aim, _left = name, count
    window = _counted_window if _counter.on else _armed if name is not None else _disarmed


def declared(strategy: object) -> dict[str, str]:
    """The windows a strategy module declares (``WINDOWS``), name -> what a kill there proves."""
    return dict(getattr(strategy, "WINDOWS", None) or {})


# ------------------------------------------------------- persistence points
def _site() -> str:
    """``module.function`` of the code that asked for the point (the hooks skipped)."""
    frame = sys._getframe(2)  # 0: here, 1: the hook's own function, 2: who called it
    while frame.f_back is not None and frame.f_globals.get("__name__", "").endswith(_HOOK_MODULES):
        frame = frame.f_back
    return f"{frame.f_globals.get('__name__', '?').rpartition('.')[2]}.{frame.f_code.co_name}"


class _Counter:
    """Counts this process's points; kills it at its target; reports what it passed."""

    def __init__(self) -> None:
        self.on = False
        self.target: tuple[str, int] | None = None
        self.report_dir: str | None = None
        self.total = 0
        self.counts: dict[str, int] = {}
        self.names: dict[str, int] = {}  # each point's name -> its index, in order of first passing
        self.sequence: list[int] = []  # every point passed, as an index into names

    def start(self, target: tuple[str, int] | None, report_dir: str | None) -> None:
        self.on, self.target, self.report_dir = True, target, report_dir
        if report_dir:
            atexit.register(self.report, None)

    def passed(self, kind: str, site: str) -> None:
        name = f"{kind}@{site}"
        self.total += 1
        count = self.counts.get(name, 0) + 1
        self.counts[name] = count
        self.sequence.append(self.names.setdefault(name, len(self.names)))
        if self.target is None:
            return
        wanted, n = self.target
        if (not wanted and self.total == n) or (_matches(wanted, name, kind) and self._of(wanted) == n):
            self.report(name)
            _die(f"crash point {self.total} ({name}, #{count} at this site)")

    def _of(self, wanted: str) -> int:
        if "@" in wanted:
            return self.counts[wanted]
        return sum(n for name, n in self.counts.items() if _matches(wanted, name, name.split("@", 1)[0]))

    def report(self, crashed_at: str | None) -> None:
        if not self.report_dir:
            return
        target = f"{self.target[0]}:{self.target[1]}" if self.target and self.target[0] else (
            str(self.target[1]) if self.target else None)
        doc = {"pid": os.getpid(), "target": target, "crashed_at": crashed_at, "total": self.total,
               "counts": self.counts, "names": list(self.names), "sequence": self.sequence}
        try:  # plain writes, no fsync: a process kill does not lose the page cache
            with open(os.path.join(self.report_dir, f"{os.getpid()}.json"), "w", encoding="utf-8") as out:
                out.write(json.dumps(doc, sort_keys=True))
        except OSError:
            pass  # the drill's directory went away: nobody is left to read it


def _matches(wanted: str, name: str, kind: str) -> bool:
    """Is a point ``name`` of ``kind`` one the target ``wanted`` counts (a site, a kind, or ``state``)?"""
    return wanted in (name, kind) or (wanted == "state" and kind in STATE_KINDS)


_counter = _Counter()


def _point_off(kind: str) -> None:
    return None


def _point_on(kind: str) -> None:
    _counter.passed(kind, _site())


#: Called by the runtime at each persistence point (``faults.point("commit")``): store.py,
#: effects.py, the event store. Like ``window``, looked up on the module at each call.
point = _point_off


def _the_probes_own() -> bool:
    """The drill's durability probe (drill/durability.py, installed after this module wraps
    the file functions) writes its reports with them: not a point of the job's."""
    caller = sys._getframe(2)
    return caller.f_code.co_name == "write" and caller.f_globals.get("__name__", "").endswith("drill.durability")


def _wrap_file_ops() -> None:
    """Counting: a point before every fsync (file or directory) and every rename."""
    real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename

    def fsync(fd: Any) -> None:
        _counter.passed("dirsync" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync", _site())
        real_fsync(fd)

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if not _the_probes_own():
            _counter.passed("rename", _site())
        real_replace(src, dst, *args, **kwargs)

    def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if not _the_probes_own():
            _counter.passed("rename", _site())
        real_rename(src, dst, *args, **kwargs)

    os.fsync, os.replace, os.rename = fsync, replace, rename  # type: ignore[assignment]


def count_points(target: tuple[str, int] | None, report_dir: str | None) -> None:
    """Count this process's points from now on (and die at ``target``, if any)."""
    global point, window
    if _counter.on:
        return
    _counter.start(target, report_dir)
    point = _point_on
    window = _counted_window
    _wrap_file_ops()


def _from_environment() -> None:
    """Arm this process as the drill asked (its variables); a malformed value is refused
    with one line and exit 2, before anything runs."""
    try:
        aim, crash = parse(os.environ.get(AIM_ENV)), parse_crash(os.environ.get(CRASH_ENV))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if aim is not None:
        arm(*aim)
    if crash is not None or os.environ.get(POINTS_ENV):
        count_points(crash, os.environ.get(POINTS_ENV) or None)


_from_environment()
