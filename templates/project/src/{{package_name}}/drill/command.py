"""The crash drill: prove that the job survives kill -9 (or SIGTERM) at random moments.

1. Submit the standard demo workload into a fresh data directory.
2. Start the worker(s) as child processes: ``python -m <package> run``.
3. K times, at moments drawn from ``--seed`` and spread over the run, kill one
   worker (SIGKILL, or SIGTERM with ``--sigterm``) and start it again at once;
   recovery time = restart → first new effect at the external service.
4. When the work is finished, judge the run against an oracle that knows only
   the input and job.py (oracle.py, run twice in clean processes meanwhile):
   the effects in ``external.db`` (lost, applied twice, unexpected, payloads,
   judged by the promise of the external call's kind: effects.py, verdict.py),
   the results and running state the strategy stored, whether job.py is a pure
   function of its record, whether every kill landed, calls re-sent beyond the
   strategy's promise, worker failures, graceful exits, and the durability the
   workers were observed to run with (durability.py). Every failing check is a
   ``{"check", "message"}`` in ``failures`` (verdict.py); exit 0 only when there
   is none.

``--aim WINDOW`` (or ``all``) aims every kill at one of the strategy's critical
windows (its module's ``WINDOWS``; faults.py): instead of the drill signalling
the worker, the worker is started armed (``<PKG>_DRILL_AIM=WINDOW:N``) and kills
itself with SIGKILL the N-th time it passes that point, N drawn from ``--seed``.
``all`` cycles through the windows, one kill each in turn. The report's
``kills_by_window`` says where each kill landed; an armed worker that finishes
without reaching its window is a kill not delivered.

``--events`` prints one JSON object per line while running (start, progress,
kill, restart, recovered, report) for live views such as the advisor's TUI.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..runtime import faults
from ..runtime.arguments import fraction, non_negative_float, non_negative_int, positive_int
from ..runtime.errors import JobError
from ..runtime.strategy import Context
from .report import summary
from .runner import Drill
from .sweep import run_sweep
from .sweep import summary_lines as sweep_lines
from .sweep_plan import PREFIX, SAMPLE
from .upgrade import run_upgrade
from .upgrade import save as save_upgrade_fixture
from .upgrade import summary_lines as upgrade_lines


def windows_help(strategy: Any) -> str:
    """The strategy's critical windows, one per line, for ``drill --help`` (epilog)."""
    windows = faults.declared(strategy)
    if not windows:
        return "this strategy declares no critical windows (--aim is not available)"
    lines = [f"critical windows of the {getattr(strategy, 'NAME', '?')} strategy (--aim WINDOW, or --aim all):"]
    for name, proves in windows.items():
        lines += textwrap.wrap(f"{name}: {proves}", 100, initial_indent="  ", subsequent_indent="      ")
    return "\n".join(lines)


def aim_plan(strategy: Any, aim: str | None, kills: int, sigterm: bool = False) -> list[str] | None:
    """The window of each kill (None: kills are timed by the drill, not aimed).

    ``WINDOW``: every kill there; ``all``: the windows in turn (needs at least one kill
    per window). An unknown window is a JobError (exit 2) naming the valid ones."""
    if aim is None:
        return None
    windows = list(faults.declared(strategy))
    valid = ", ".join(windows + ["all"]) if windows else "none (this strategy declares no windows)"
    if sigterm:
        raise JobError("--aim kills with SIGKILL at a window; it cannot be combined with --sigterm")
    if aim != "all" and aim not in windows:
        raise JobError(f"unknown window {aim!r} for the {getattr(strategy, 'NAME', '?')} strategy; valid: {valid}")
    if not windows:
        raise JobError(f"--aim all: the {getattr(strategy, 'NAME', '?')} strategy declares no windows")
    if aim == "all":
        if kills < len(windows):
            raise JobError(f"--aim all needs --kills {len(windows)} or more (one per window: {valid[:-5]})")
        return [windows[n % len(windows)] for n in range(kills)]
    return [aim] * kills


def add_arguments(p: argparse.ArgumentParser, strategy: Any = None) -> None:
    p.add_argument("--records", type=positive_int, default=None,
                   help="demo records (default 2000; with --sweep 20 batches' worth of calls, at least 200 calls)")
    p.add_argument("--kills", type=int, default=10, help="how many times to kill the worker (default 10)")
    p.add_argument("--seed", type=int, default=1, help="seed for the kill moments (default 1)")
    p.add_argument("--sigterm", action="store_true", help="send SIGTERM instead of SIGKILL")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--events", action="store_true", help="print JSON events, one per line, while running")
    p.add_argument("--work-ms", type=non_negative_float, default=0.5, help="simulated work per record (ms)")
    p.add_argument("--workers", type=positive_int, default=1, help="worker processes at once (default 1)")
    p.add_argument("--hosts", type=positive_int, default=1,
                   help="spread the workers over this many simulated hosts: separate data directories, each "
                        "with its own host id, sharing DATABASE_URL and one external service (PostgreSQL only)")
    p.add_argument("--fail-rate", type=fraction, default=None, metavar="F",
                   help="the external service fails this fraction of calls transiently (retrying strategies)")
    names = list(faults.declared(strategy)) if strategy is not None else []
    p.add_argument("--aim", default=None, metavar="WINDOW|all",
                   help="aim every SIGKILL at this critical window of the strategy (the worker kills itself "
                        "exactly there), or cycle through all of them"
                        + (f"; windows: {', '.join(names)}" if names else ""))
    p.add_argument("--data-dir", type=Path, default=None,
                   help="fresh directory for the drill's data (default: a new ./data/drill-<time>-...)")
    # The crash-point sweep (sweep.py): the worker kills itself at each persistence point in turn.
    p.add_argument("--sweep", action="store_true",
                   help="instead of kills at random moments, kill the worker at every persistence point in turn "
                        "(each commit, external call, file rename, window) of a prefix after each restart, then "
                        "at a seeded sample beyond it")
    p.add_argument("--sweep-prefix", type=positive_int, default=PREFIX, metavar="N",
                   help=f"--sweep: crash at the first N passes of each point after a restart (default {PREFIX})")
    p.add_argument("--sweep-sample", type=non_negative_int, default=SAMPLE, metavar="M",
                   help=f"--sweep: then M crashes at points drawn beyond the prefix (default {SAMPLE})")
    # The upgrade drill (upgrade.py): a store an older release wrote, killed mid-run, continued by this code.
    p.add_argument("--upgrade-from", default=None, metavar="VERSION|FILE",
                   help="start from the store a release of that schema version left when killed mid-run "
                        "(tests/fixtures/upgrade/vVERSION.json, or a fixture file) and continue it with crashes")
    p.add_argument("--save-upgrade-fixture", nargs="?", const="", default=None, metavar="FILE",
                   help="save this code's store, killed mid-run, as the fixture of its schema version (before "
                        "changing the schema; default tests/fixtures/upgrade/v<version>.json), and exit")


def _stop_on_sigterm() -> None:
    """A SIGTERM to the drill unwinds it (SystemExit), so its `finally` stops the workers."""
    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    try:
        signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (embedded use): leave signals alone
        pass


def run_drill(args: argparse.Namespace, ctx: Context) -> int:
    if args.kills < 0:
        raise JobError("--kills must be zero or more")
    if getattr(args, "save_upgrade_fixture", None) is not None:
        return save_upgrade_fixture(args, ctx)
    swept, upgrading = getattr(args, "sweep", False), getattr(args, "upgrade_from", None) is not None
    if (swept or upgrading) and (args.aim or args.sigterm):
        raise JobError("--sweep and --upgrade-from choose every kill themselves (SIGKILL at persistence points); "
                       "drop --aim and --sigterm")
    aims = aim_plan(ctx.strategy, getattr(args, "aim", None), args.kills, args.sigterm)
    _stop_on_sigterm()
    emit = _printer() if args.events else (lambda event: None)
    if upgrading:
        report = run_upgrade(args, ctx, emit)
    elif swept:
        report = run_sweep(args, ctx, emit)
    else:
        report = Drill(ctx, records=args.records or 2000, kills=args.kills, seed=args.seed, sigterm=args.sigterm,
                       work_ms=args.work_ms, workers=args.workers, data_dir=args.data_dir, emit=emit,
                       fail_rate=args.fail_rate, aims=aims, hosts=getattr(args, "hosts", 1)).run()
    if args.events:
        pass  # the report was the last event
    elif args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print("\n".join([summary(report), *upgrade_lines(report), *sweep_lines(report)]))
    return 0 if report["ok"] else 1


def _printer() -> Callable[[dict[str, Any]], None]:
    def emit(event: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(event, sort_keys=True) + "\n")
        sys.stdout.flush()
    return emit
