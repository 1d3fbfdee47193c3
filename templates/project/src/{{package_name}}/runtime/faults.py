"""Aimed kills: fault-injection points at the strategy's critical windows.

A crash is dangerous only in a few places: after the external call went through
and before the commit that records it; after results commit and before the
offset; between two steps of a flow; between an event append and the
subscriber's position. Random kills land there rarely (a window can be a
millisecond wide), so every strategy module names its windows as data::

    WINDOWS = {"after_call_before_commit": "the call went through; the commit that records it has not happened"}

and calls ``faults.window("after_call_before_commit")`` at that exact point.

The call does nothing unless the environment arms it: ``<PKG>_DRILL_AIM=WINDOW:N``
(set by ``drill --aim``, never by hand in production) makes the process kill
ITSELF with SIGKILL the N-th time it passes ``WINDOW``, exactly like a real
crash there: no ``finally``, no atexit, no flush. The drill sees the worker exit
with -9, counts a kill delivered in that window and restarts it (armed again for
the next aimed kill, or not at all).

Disarmed, ``window`` is a function that returns at once (about as costly as an
empty function call): zero behaviour change when the drill is not aiming.
"""

from __future__ import annotations

import os
import signal
import sys

from ..settings import ENV_PREFIX

#: ``WINDOW:N``: die the N-th time WINDOW is passed (N >= 1).
AIM_ENV = ENV_PREFIX + "DRILL_AIM"


def parse(value: str | None) -> tuple[str, int] | None:
    """``"WINDOW:N"`` -> (WINDOW, N); None (or empty) -> None. Malformed: ValueError."""
    if not value:
        return None
    name, _, count = value.rpartition(":")
    if not name or not count.isdigit() or int(count) < 1:
        raise ValueError(f"{AIM_ENV}={value!r}: expected WINDOW:N with N >= 1")
    return name, int(count)


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
        print(f"[drill] aimed kill: SIGKILL in window {name}", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


#: Called by strategy code at each named window (``faults.window("...")``; look it up
#: on the module at each call, so arm() takes effect).
window = _disarmed


def arm(name: str | None, count: int = 1) -> None:
    """Arm (or with None, disarm) this process: die the ``count``-th time ``name`` is passed."""
    global _aim, _left, window
    _aim, _left = name, count
    window = _armed if name is not None else _disarmed


def declared(strategy: object) -> dict[str, str]:
    """The windows a strategy module declares (``WINDOWS``), name -> what a kill there proves."""
    return dict(getattr(strategy, "WINDOWS", None) or {})


_from_env = parse(os.environ.get(AIM_ENV))
if _from_env is not None:
    arm(*_from_env)
