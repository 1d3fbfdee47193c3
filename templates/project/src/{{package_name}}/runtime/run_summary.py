"""The one line ``run`` prints when it ends well: records done, time, recoveries, calls in doubt.

A run that says nothing leaves a newcomer guessing whether it did anything. The line is
built from what the strategy's ``status`` already reads (before and after), the takeovers
the owners' rule reported while it ran (runtime/owners.py: a unit left by a killed or
silent worker), and the plain calls in doubt (effects.py). It costs two status reads.
"""

from __future__ import annotations

import time
from typing import Any

from . import effects, metrics


class RunSummary:
    """Start it before the work; :meth:`line` after it ended with exit code 0."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.started = time.monotonic()
        self.before = self._done()
        self.takeovers = 0
        self._previous = metrics.takeover
        previous = self._previous

        def counted(reason: str) -> None:  # the metrics' own hook still runs (it may be on)
            self.takeovers += 1
            previous(reason)

        metrics.takeover = counted

    def _done(self) -> int | None:
        # The summary never decides how run ends: a store that cannot be read here (nobody submitted
        # yet, an outage run rides out, a lock) is run's own business, with its own message and code.
        try:
            return int(self.ctx.strategy.status(self.ctx).get("done") or 0)
        except Exception:
            return None

    def stop(self) -> None:
        if metrics.takeover is not self._previous:
            metrics.takeover = self._previous

    def line(self) -> str:
        self.stop()
        seconds = time.monotonic() - self.started
        try:
            report = self.ctx.strategy.status(self.ctx)
            doubt = int(effects.summary(self.ctx.data_dir, self.ctx.settings)["in_doubt"])
        except Exception:  # see _done: the work is finished; only the line is shorter
            return f"run done in {seconds:.1f} s"
        done, total = int(report.get("done") or 0), int(report.get("total") or 0)
        by_run = "" if self.before is None else f" ({max(0, done - self.before)} by this run)"
        recovered = (f"{self.takeovers} unit(s) taken over from a killed or silent worker" if self.takeovers
                     else "nothing to recover")
        doubted = (f"{doubt} call(s) in doubt (see `reconcile`)" if doubt else "0 calls in doubt")
        return (f"run done: {done} of {total} records done{by_run} "
                f"in {seconds:.1f} s; {recovered}; {doubted}")
