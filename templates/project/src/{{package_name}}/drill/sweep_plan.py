"""The sweep's plan: where the next worker dies, from what the workers reported (pure: no processes).

sweep.py says what the sweep proves; segments.py runs the workers this plan arms. A runner
that folds the sweep into a schedule of its own asks :meth:`SweepPlan.next` at each (re)start
of the armed worker, arms it with the target's ``env_value`` (``<PKG>_DRILL_CRASH_AT``,
runtime/faults.py), tells the plan each worker's report (:meth:`SweepPlan.learn`, the census's
with ``census_effects``) and sets each target's ``outcome``.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

#: Defaults: about a minute for the standard demo on a loaded 2-core machine.
PREFIX = 2
SAMPLE = 6
#: The census worker dies after this many batches' worth of calls (a quarter of the run at most).
CENSUS_BATCHES = 2


@dataclass
class Target:
    """Where one worker is to die: the N-th pass of ``point`` after its start."""

    point: str
    n: int
    phase: str  # "opening", "census", "prefix" or "sample"
    outcome: str = "armed"  # then "killed", "run ended first" or "worker failed"
    landed: str = ""  # killed: the point it died at (an opening's or the census's is any point, or any call)
    effects_done: int = 0  # the effects applied in the whole run when it died (or exited)

    @property
    def env_value(self) -> str:
        """``<PKG>_DRILL_CRASH_AT`` for this target (faults.py): ``POINT:N``, or ``N`` for any point."""
        return f"{self.point}:{self.n}" if self.point else str(self.n)


class SweepPlan:
    """Which crash point comes next, from what the workers reported (pure: no processes)."""

    def __init__(self, prefix: int = PREFIX, sample: int = SAMPLE, seed: int = 1, *, opening: int = 0) -> None:
        """``opening``: first, crash the first worker at each of its first ``opening`` points (of any
        kind): on a store an older release wrote, its schema check and its migrations (upgrade.py)."""
        self.prefix, self.sample, self.opening = prefix, sample, opening
        self.rng = random.Random(seed)
        self.reach: dict[str, int] = {}   # point -> the passes the prefix aims at (at most prefix)
        self.order: list[str] = []        # points in the order they were found
        self.rate: dict[str, float] = {}  # point -> passes per effect, in the census
        self.aimed: dict[str, int] = {}   # point -> the highest prefix pass aimed at
        self.targets: list[Target] = []
        self.census: dict[str, Any] = {}

    def _next_opening(self) -> Target | None:
        done = sum(t.phase == "opening" for t in self.targets)
        return Target("", done + 1, "opening") if done < self.opening else None

    def _next_census(self, remaining_effects: int, effects_per_batch: int) -> Target | None:
        """The first armed worker's: its call after about CENSUS_BATCHES batches' worth of effects
        (a quarter of what is left at most), having passed every point of a batch or two."""
        if any(t.phase == "census" for t in self.targets):
            return None
        calls = max(2, min(CENSUS_BATCHES * effects_per_batch + effects_per_batch // 2, remaining_effects // 4))
        return Target("call", calls, "census")

    def learn(self, trace: dict[str, Any] | None, *, census_effects: int | None = None) -> None:
        """A worker's report (faults.py): the points it passed, and how often."""
        if not trace:
            return
        counts = trace.get("counts") or {}
        for name in trace.get("names") or []:
            if name not in self.reach:
                self.order.append(name)
                # How often a point recurs in a worker is taken from the census (a fresh worker well
                # into the work); one first seen later (a recovery's) is aimed at once, its first pass.
                self.reach[name] = int(counts.get(name, 0)) if census_effects is not None else 1
        if census_effects is not None:
            self.census = {"points": int(trace.get("total", 0)), "effects": census_effects, "found": list(counts)}
            if census_effects > 0:
                self.rate = {name: int(n) / census_effects for name, n in counts.items()}

    def next(self, remaining_effects: int, effects_per_batch: int) -> Target | None:
        """The next crash, or None: the last worker runs unarmed to the end."""
        target = (self._next_opening() or self._next_census(remaining_effects, effects_per_batch)
                  or self._next_prefix() or self._next_sample(remaining_effects))
        if target is not None:
            self.targets.append(target)
        return target

    def _next_prefix(self) -> Target | None:
        for n in range(1, self.prefix + 1):  # every point's first pass, then every point's second, ...
            for name in self.order:
                if self.aimed.get(name, 0) < n <= self.reach[name]:
                    self.aimed[name] = n
                    return Target(name, n, "prefix")
        return None

    def _next_sample(self, remaining_effects: int) -> Target | None:
        drawn = sum(t.phase == "sample" for t in self.targets)
        recurring = [name for name in self.order if self.rate.get(name, 0) > 0 and self.reach[name] > self.prefix]
        if drawn >= self.sample or not recurring or remaining_effects <= 0:
            return None
        name = self.rng.choice(recurring)
        # Spread over what is left: on average a (1 / crashes left) share of the remaining work.
        span = max(1, round(2 * self.rate[name] * remaining_effects / (self.sample - drawn + 1)))
        return Target(name, self.prefix + self.rng.randint(1, span), "sample")

    # ------------------------------------------------------------ the report
    def coverage(self) -> dict[str, Any]:
        killed = [t for t in self.targets if t.outcome == "killed"]
        by_kind = Counter(t.landed.split("@", 1)[0] for t in killed)
        return {
            "prefix": self.prefix, "sample": self.sample, "census": self.census,
            "points_found": len(self.order),
            "crashes": len(killed),
            "crashes_by_kind": dict(sorted(by_kind.items())),
            "crashes_by_point": dict(sorted(Counter(t.landed for t in killed).items())),
            "opening_crashes": sum(t.phase == "opening" for t in killed),
            "prefix_crashes": sum(t.phase == "prefix" for t in killed),
            "sample_crashes": sum(t.phase == "sample" for t in killed),
            "not_reached": [t.env_value for t in self.targets if t.outcome == "run ended first"],
            "targets": [asdict(t) for t in self.targets],
        }

    def missed(self) -> list[str]:
        """What the run ended before and the input should have allowed: the opening and the census,
        or the first pass of a point the census found (every later target depends on where the
        work stands)."""
        found = set(self.census.get("found", ()))
        return [t.env_value for t in self.targets if t.outcome == "run ended first"
                and (t.phase in ("opening", "census") or (t.phase == "prefix" and t.n == 1 and t.point in found))]
