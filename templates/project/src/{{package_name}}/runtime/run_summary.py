"""The one line ``run`` prints when it ends well: records done, time, recoveries, calls in doubt.

A run that says nothing leaves a newcomer guessing whether it did anything. The line is
built from what the strategy's ``status`` reads at the end, the records this run committed
(counted as the strategy commits them: its ``metrics.records_done`` calls), the takeovers the
owners' rule reported while it ran (runtime/owners.py: a unit left by a killed or silent
worker), and the plain calls in doubt (effects.py). It costs one status read, after the work:
nothing is read before the first batch, so a restart does not wait for a read of every task
(a status read grows with the tasks: ~50 ms at 200,000 records, benchmarks/bench_recovery.py).
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
        self.by_run = 0  # records committed by this process
        self.takeovers = 0
        self._previous = previous_takeover, previous_done = metrics.takeover, metrics.records_done

        # The metrics' own hooks still run (they may be on).
        def counted(reason: str) -> None:
            self.takeovers += 1
            previous_takeover(reason)

        def committed(n: int) -> None:
            self.by_run += n
            previous_done(n)

        metrics.takeover, metrics.records_done = counted, committed

    def stop(self) -> None:
        metrics.takeover, metrics.records_done = self._previous

    def line(self) -> str:
        self.stop()
        seconds = time.monotonic() - self.started
        try:
            report = self.ctx.strategy.status(self.ctx)
            doubt = int(effects.summary(self.ctx.data_dir, self.ctx.settings)["in_doubt"])
        except Exception:
            # The summary never decides how run ends: the work is finished; only the line is shorter.
            return f"run done in {seconds:.1f} s ({self.by_run} records by this run)"
        done, total = int(report.get("done") or 0), int(report.get("total") or 0)
        by_run = f" ({self.by_run} by this run)"
        recovered = (f"{self.takeovers} unit(s) taken over from a killed or silent worker" if self.takeovers
                     else "nothing to recover")
        doubted = (f"{doubt} call(s) in doubt (see `reconcile`)" if doubt else "0 calls in doubt")
        return (f"run done: {done} of {total} records done{by_run} "
                f"in {seconds:.1f} s; {recovered}; {doubted}")
