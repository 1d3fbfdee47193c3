"""The crash-point sweep (``drill --sweep``): kill the worker at every persistence point in turn.

Random kills land where the time falls; aimed kills (``--aim``) land in the windows the
strategy names. A bug can open a window nobody named: a queue consumer that acks a
message before its records commit has a crash state between the ack and the commit that
no named window reaches and a timed kill almost never hits. The sweep enumerates crash
states the way ALICE and CrashMonkey do, over the persistence points of runtime/faults.py
(every commit, event append, external call sent and returned, file fsync and rename, and
every named window), each named ``KIND@SITE`` (``commit@worker.checkpoint``):

1. **Census.** A first worker runs with its points counted and dies at its call after
   about two batches' worth of effects: its report names every point it passed and how
   often (faults.py, ``<PKG>_DRILL_POINTS``).
2. **Prefix.** For each point found, its first ``--sweep-prefix`` passes after a restart
   are each one crash: a worker started with ``<PKG>_DRILL_CRASH_AT=POINT:N`` kills itself
   there (SIGKILL), the next one starts at once and recovers. Points first seen during a
   recovery join the plan as they are found. Round by round: every point's first pass,
   then every point's second, ...
3. **Sample.** ``--sweep-sample`` more crashes at points beyond the prefix, drawn from
   ``--seed``: a point that recurs with the work, and a pass spread over what is left.
4. The last worker runs unarmed to the end; the run is judged like every drill.

The report's ``sweep`` says what was covered: the crashes by kind and by point, the
prefix, the sample, and any point the run ended before reaching.

sweep_plan.py decides where the next worker dies; segments.py runs the workers.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from .. import job
from ..job import demo_records
from ..runtime.errors import JobError
from ..runtime.strategy import Context
from .segments import CrashPointRun
from .sweep_plan import SweepPlan

#: The sweep's default input: fewer records than the timed drill (each crash restarts a worker),
#: enough batches for the census, the prefix and the sample.
RECORDS_MIN = 200
BATCHES = 20


def default_records(ctx: Context) -> int:
    """BATCHES batches' worth of effects (at least RECORDS_MIN records' worth): a record of a flow
    makes one call per step."""
    return max(RECORDS_MIN, BATCHES * ctx.settings.batch_size) // len(job.STEPS)


def demo_submitter(records: int, work_ms: float) -> Callable[[Context], list[dict[str, Any]]]:
    """The run's ``prepare``: ``records`` demo records submitted to the fresh store."""
    def submit(run_ctx: Context) -> list[dict[str, Any]]:
        chosen = demo_records(records)
        # A queue input (drill_submit, strategy.py) publishes the records for the workers instead.
        getattr(run_ctx.strategy, "drill_submit", run_ctx.strategy.submit)(run_ctx, chosen, work_ms=work_ms)
        return chosen
    return submit


def run_sweep(args: argparse.Namespace, ctx: Context, emit: Callable[[dict[str, Any]], None], *,
              plan: SweepPlan | None = None, run: type[CrashPointRun] = CrashPointRun,
              several_workers: bool = False) -> dict[str, Any]:
    """``drill --sweep``: the demo records, swept (see the module docstring); ``plan`` and ``run``: a mode's
    own (power_loss.py); ``several_workers``: the run kills every worker at once (power_loss_workers.py)."""
    if args.workers != 1 and not several_workers:
        raise JobError("--sweep kills one worker at each of its points in turn (points are counted per "
                       "process); drop --workers")
    records = args.records or default_records(ctx)
    plan = plan or SweepPlan(args.sweep_prefix, args.sweep_sample, args.seed)
    return run(ctx, plan, demo_submitter(records, args.work_ms), seed=args.seed, work_ms=args.work_ms,
               data_dir=args.data_dir, emit=emit, fail_rate=args.fail_rate).run()


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The sweep's part of the text report."""
    sweep = report.get("sweep")
    if not sweep or report.get("power_loss", {}).get("workers", 1) > 1:  # no points: cuts at moments only
        return []
    kinds = ", ".join(f"{kind} {n}" for kind, n in sweep["crashes_by_kind"].items()) or "none"
    opening = f"{sweep['opening_crashes']} at the first worker's opening points, " if sweep["opening_crashes"] else ""
    lines = [f"sweep: {sweep['crashes']} crash points ({opening}{sweep['prefix_crashes']} in the prefix: up to "
             f"{sweep['prefix']} pass(es) of each of the {sweep['points_found']} points found; "
             f"{sweep['sample_crashes']} of {sweep['sample']} sampled beyond it); by kind: {kinds}"]
    if sweep["not_reached"]:
        lines.append(f"sweep: the run ended before {len(sweep['not_reached'])} planned crash point(s): "
                     + ", ".join(sweep["not_reached"][:4]) + (", ..." if len(sweep["not_reached"]) > 4 else ""))
    return lines
