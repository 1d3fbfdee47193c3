"""What the faults of one drill did, as its report counts them (the history has every detail):
kills landed per window, graceful exits, recovery times, the events printed with --events."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .nemesis import KILLS


class Tally:
    """What the faults did, as the report counts it (the history has every detail)."""

    def __init__(self) -> None:
        self.recovery_ms: list[float] = []
        self.pending: list[tuple[int, int, float]] = []  # (kill number, effects at restart, when)
        self.graceful: list[dict[str, Any]] = []
        self.worker_failures: list[int] = []
        self.kills_landed = 0
        self.kills_by_window: dict[str, int] = {}
        self.injected_by_kind: dict[str, int] = {}
        #: Workers killed with a lost host (host-lost: the victim and every worker beside it).
        self.workers_lost = 0
        #: Hung workers whose units another took over (hung-worker): one unit in flight redone each, by the
        #: taker alone (history.takeovers credits it), never by every worker as a lost host's is.
        self.hung_taken = 0
        self.restarts = 0

    def injected(self, event: dict[str, Any], outcome: dict[str, Any], emit: Callable[[dict[str, Any]], None],
                 t: Callable[[], float], done: int) -> None:
        kind = event["kind"]
        self.injected_by_kind[kind] = self.injected_by_kind.get(kind, 0) + 1
        if kind == "host-lost":
            self.workers_lost += 1 + len(outcome.get("also", []))
        if kind == "hung-worker" and outcome.get("frozen"):  # its unit in flight redone by the worker that took it
            self.hung_taken += 1
        if outcome.get("damaged"):  # the kill's damage landed too (nemesis.py): a fault of its own
            self.injected_by_kind["damaged-checkpoint"] = self.injected_by_kind.get("damaged-checkpoint", 0) + 1
            emit({"event": "fault", "n": event["n"], "kind": "damaged-checkpoint", "done": done, "t": t(),
                  "file": outcome["damaged"], "how": event.get("damage")})
        if kind in ("sigkill", "sigterm"):
            self.kills_landed += 1
            where = event.get("window") or (f"point {event['point']}" if "point" in event else
                                             event.get("crash_point") or "unaimed")
            self.kills_by_window[where] = self.kills_by_window.get(where, 0) + 1
        if "exit_code" in outcome:
            self.graceful.append({k: outcome[k] for k in ("exit_code", "exit_s", "within_grace", "finished_first")
                                  if k in outcome} | {"kind": kind})
        if kind in KILLS or "window" in event or "point" in event:
            signal_name = "SIGTERM" if kind in ("sigterm", "other-host") else "SIGKILL"
            emit({"event": "kill", "n": event["n"], "kind": kind, "signal": signal_name, "done": done, "t": t(),
                  **({"window": event["window"]} if "window" in event else {}),
                  **{k: v for k, v in outcome.items() if k not in ("landed",)}})
        else:
            emit({"event": "fault", "n": event["n"], "kind": kind, "done": done, "t": t(), **outcome})

    def restarted(self, done: int, emit: Callable[[dict[str, Any]], None], t: Callable[[], float]) -> None:
        self.restarts += 1
        self.pending.append((self.restarts, done, time.monotonic()))
        emit({"event": "restart", "n": self.restarts, "t": t()})

    def recovered(self, done: int, now: float, emit: Callable[[dict[str, Any]], None], t: Callable[[], float],
                  *, everyone_gone: bool) -> None:
        """Recovery time = restart -> the first new effect at the service."""
        for item in list(self.pending):
            n, at_restart, when = item
            if done > at_restart or everyone_gone:
                ms = round((now - when) * 1000, 1)
                self.recovery_ms.append(ms)
                emit({"event": "recovered", "n": n, "ms": ms, "t": t()})
                self.pending.remove(item)
