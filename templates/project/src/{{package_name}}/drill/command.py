"""The crash drill: prove that the job survives the faults of production, on a seeded schedule.

1. Draw the fault schedule from ``--seed`` (schedule.py) and write it beside the run
   (``drill-schedule.json``): kills (SIGKILL and SIGTERM), the external service failing
   and timing out, the input submitted again under its own and under a new correlation
   id, the state store taken away, a successor on another host, a reused idempotency
   key, a queue redelivering, as far as they apply to this project. ``--no-KIND``
   switches one off, ``--only KIND`` runs one; ``drill --help`` lists them.
2. Submit the demo workload, start the worker(s) (``python -m <package> run``), play
   the schedule (runner.py, nemesis.py): every kill restarts its worker at once;
   recovery time = restart -> first new effect at the external service. Everything
   that happened goes to the history (``drill-history.jsonl``, history.py).
3. When the work is finished, judge the run against an oracle that knows only the
   input and job.py (judge.py, verdict.py, checks/resubmission.py): effects lost, applied
   twice or unexpected (by the promise of the call's kind), results and running state,
   a deterministic job, calls re-sent beyond the promise, resubmissions answered as
   promised, reused keys refused, graceful exits, the durability observed. Every failing
   check is a ``{"check", "message"}`` in ``failures``; exit 0 only when there is none.
4. A failing run is shrunk (shrink.py; ``--no-shrink`` to skip): fewer records, fewer
   faults, earlier crash points, as long as the same check still fails; the smallest
   schedule is written and printed as one command, ``drill --replay FILE``.

``--sigterm`` makes every kill a SIGTERM. ``--aim WINDOW`` (or ``all``) aims every kill
at the strategy's critical windows (its module's ``WINDOWS``; runtime/faults.py): the
worker is started armed (``<PKG>_DRILL_AIM=WINDOW:N``) and kills itself with SIGKILL the
N-th time it passes that point, N drawn from ``--seed``; every worker slot is armed.

``--events`` prints one JSON object per line while running (start, progress, kill,
restart, recovered, fault, shrink, report) for live views such as the advisor's TUI.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import settings as settings_module
from ..runtime import faults
from ..runtime.arguments import fraction, non_negative_float, non_negative_int, positive_float, positive_int
from ..runtime.errors import JobError
from ..runtime.store import is_postgresql
from ..runtime.strategy import Context
from . import power_loss, shrink
from . import schedule as schedule_module
from .power_loss import PowerLossRun
from .power_loss import summary_lines as power_lines
from .power_loss_pg import PostgresPowerLossRun
from .power_loss_workers import MachineCutPlan, with_workers
from .report import summary
from .runner import Drill
from .sweep import run_sweep
from .sweep import summary_lines as sweep_lines
from .sweep_plan import PREFIX, SAMPLE, SweepPlan
from .upgrade import run_upgrade
from .upgrade import save as save_upgrade_fixture
from .upgrade import summary_lines as upgrade_lines

#: The options a schedule is made of (None: not given, the default applies; --replay refuses them).
DEFAULTS: dict[str, Any] = {"records": 2000, "kills": 10, "seed": 1, "work_ms": 0.5, "workers": 1, "hosts": 1}


def windows_help(strategy: Any) -> str:
    """The fault kinds and the strategy's critical windows, for ``drill --help`` (epilog)."""
    lines = ["fault kinds (a default drill mixes every one that applies; --no-KIND, --only KIND):"]
    for kind in schedule_module.DEFAULT_KINDS:
        lines += textwrap.wrap(f"{kind}: {schedule_module.KINDS[kind]}", 100, initial_indent="  ",
                               subsequent_indent="      ")
    windows = faults.declared(strategy)
    if not windows:
        return "\n".join(lines + ["this strategy declares no critical windows (--aim is not available)"])
    lines.append(f"critical windows of the {getattr(strategy, 'NAME', '?')} strategy (--aim WINDOW, or --aim all):")
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


def enough_passes(strategy: Any, settings: Any, records: int, kills: int) -> None:
    """Aimed kills land one per window pass at least: a strategy that says how many passes a run
    has (``window_passes``) refuses, up front, more kills than passes (JobError, exit 2)."""
    window_passes = getattr(strategy, "window_passes", None)
    if window_passes is None or window_passes(records, settings) >= kills:
        return
    have = int(window_passes(records, settings))
    need = -(-records * kills // max(1, have))  # as many records per pass as now
    while window_passes(need, settings) < kills:
        need += 1
    raise JobError(f"--aim: {kills} kills need {kills} passes of the windows, and {records} records pass them "
                   f"{have} time(s) here; use --records {need} or more, or --kills {have} or fewer")


def add_arguments(p: argparse.ArgumentParser, strategy: Any = None) -> None:
    p.add_argument("--records", type=positive_int, default=None,
                   help="demo records (default 2000; with --sweep 20 batches' worth of calls, at least 200 calls)")
    p.add_argument("--kills", type=int, default=None,
                   help="how many times to kill a worker, SIGKILL and SIGTERM mixed (default 10); with SIGKILLs "
                        f"(from 2 kills), up to {schedule_module.WRITES_CUT} more, each just before one of a "
                        "worker's first writes")
    p.add_argument("--seed", type=int, default=None, help="seed of the fault schedule (default 1)")
    p.add_argument("--sigterm", action="store_true", help="every kill a SIGTERM")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--events", action="store_true", help="print JSON events, one per line, while running")
    p.add_argument("--work-ms", type=non_negative_float, default=None, help="simulated work per record (ms)")
    p.add_argument("--workers", type=positive_int, default=None, help="worker processes at once (default 1)")
    p.add_argument("--hosts", type=positive_int, default=None,
                   help="spread the workers over this many simulated hosts: separate data directories, each "
                        "with its own host id, sharing DATABASE_URL and one external service (PostgreSQL only)")
    p.add_argument("--fail-rate", type=fraction, default=None, metavar="F",
                   help="the external service fails this fraction of calls transiently (retrying strategies)")
    names = list(faults.declared(strategy)) if strategy is not None else []
    p.add_argument("--aim", default=None, metavar="WINDOW|all",
                   help="aim every SIGKILL at this critical window of the strategy (the worker kills itself "
                        "exactly there), or cycle through all of them"
                        + (f"; windows: {', '.join(names)}" if names else ""))
    p.add_argument("--only", action="append", default=None, metavar="KIND",
                   help="only this fault kind (repeatable); kinds: " + ", ".join(schedule_module.DEFAULT_KINDS))
    for kind in schedule_module.DEFAULT_KINDS:
        p.add_argument(f"--no-{kind}", dest="no_" + kind.replace("-", "_"), action="store_true",
                       help=argparse.SUPPRESS)
    p.add_argument("--replay", type=Path, default=None, metavar="FILE",
                   help="run exactly the schedule in FILE (a drill-schedule.json an earlier drill wrote, or the "
                        "smallest failing one it printed)")
    p.add_argument("--stall-s", type=positive_float, default=None, metavar="S",
                   help="call the run stalled (a failure) and stop its workers after S seconds with no call, no "
                        "effect and no worker starting or ending (default: 120, or 4 leases if that is longer)")
    p.add_argument("--no-shrink", action="store_true",
                   help="when the drill fails, do not look for a smaller failing schedule")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="fresh directory for the drill's data (default: a new ./data/drill-<time>-...)")
    # The crash-point sweep (sweep.py): the worker kills itself at each persistence point in turn.
    p.add_argument("--sweep", action="store_true",
                   help="instead of kills at random moments, kill the worker at every persistence point in turn "
                        "(each commit, external call, file rename, window) of a prefix after each restart, then "
                        "at a seeded sample beyond it")
    p.add_argument("--sweep-prefix", type=positive_int, default=None, metavar="N",
                   help=f"--sweep: crash at the first N passes of each point after a restart (default {PREFIX}; "
                        f"--power-loss {power_loss.PREFIX})")
    p.add_argument("--sweep-sample", type=non_negative_int, default=None, metavar="M",
                   help=f"--sweep: then M crashes at points drawn beyond the prefix (default {SAMPLE}; "
                        f"--power-loss {power_loss.SAMPLE})")
    # The power-loss drill (power_loss.py): the sweep on LazyFS, un-fsynced writes dropped at every crash.
    p.add_argument("--power-loss", action="store_true",
                   help="the workers' data directory on LazyFS: every crash (at persistence points, as --sweep, "
                        "and at random moments) is a power cut that drops what was not fsynced (needs LazyFS); "
                        "on PostgreSQL a throwaway server of its own with your server's settings; with --workers N "
                        "each cut kills every worker at once")
    p.add_argument("--random-cuts", type=non_negative_int, default=power_loss.RANDOM_CUTS, metavar="K",
                   help=f"--power-loss: K more cuts at seeded moments (default {power_loss.RANDOM_CUTS}; with "
                        "--workers N, the cuts)")
    # The upgrade drill (upgrade.py): a store an older release wrote, killed mid-run, continued by this code.
    p.add_argument("--upgrade-from", default=None, metavar="VERSION|FILE",
                   help="start from the store a release of that schema version left when killed mid-run "
                        "(tests/fixtures/upgrade/vVERSION.json, or a fixture file) and continue it with crashes")
    p.add_argument("--save-upgrade-fixture", nargs="?", const="", default=None, metavar="FILE",
                   help="save this code's store, killed mid-run, as the fixture of its schema version (before "
                        "changing the schema; default tests/fixtures/upgrade/v<version>.json), and exit")


def kinds_of(args: argparse.Namespace) -> list[str]:
    """The fault kinds switched on by --only / --no-KIND (and --sigterm)."""
    valid = schedule_module.DEFAULT_KINDS
    only = args.only or []
    for kind in only:
        if kind not in valid:
            raise JobError(f"unknown fault kind {kind!r} for --only; valid: {', '.join(valid)}")
    kinds = [k for k in valid if (not only or k in only) and not getattr(args, "no_" + k.replace("-", "_"))]
    if args.sigterm and "sigterm" not in kinds:
        raise JobError("--sigterm makes every kill a SIGTERM, but SIGTERM is switched off (--no-sigterm or --only)")
    return kinds


def schedule_from(args: argparse.Namespace, ctx: Context) -> schedule_module.Schedule:
    """The schedule this command runs: read back (--replay) or drawn from the options."""
    given = {k: getattr(args, k) for k in DEFAULTS if getattr(args, k) is not None}
    if args.replay is not None:
        shaped = sorted(given) + [f for f in ("sigterm", "aim", "only", "fail_rate") if getattr(args, f)]
        if shaped:
            raise JobError(f"--replay runs the schedule as written; drop --{shaped[0].replace('_', '-')} "
                           "(the file says it)")
        return with_stall(schedule_module.load(args.replay, ctx.strategy.NAME), args)
    o = {**DEFAULTS, **given}
    if o["kills"] < 0:
        raise JobError("--kills must be zero or more")
    kinds = kinds_of(args)
    aims = aim_plan(ctx.strategy, args.aim, o["kills"], args.sigterm)
    if aims:
        enough_passes(ctx.strategy, ctx.settings, o["records"], o["kills"])
    plan = schedule_module.plan(ctx.strategy, ctx.settings, seed=o["seed"], records=o["records"], kills=o["kills"],
                                workers=o["workers"], hosts=o["hosts"], work_ms=o["work_ms"],
                                fail_rate=args.fail_rate, kinds=kinds, sigterm_only=args.sigterm, aims=aims)
    if args.only and not plan.kinds:
        why = "; ".join(f"{k}: {reason}" for k, reason in plan.skipped.items())
        raise JobError(f"--only {', '.join(args.only)}: not applicable to this project ({why})")
    return with_stall(plan, args)


def with_stall(plan: schedule_module.Schedule, args: argparse.Namespace) -> schedule_module.Schedule:
    """--stall-s, when given, also for a replay (how long to wait is no part of what the schedule tests)."""
    if getattr(args, "stall_s", None) is not None:
        plan.stall_s = args.stall_s
    return plan


def _stop_on_sigterm() -> None:
    """A SIGTERM to the drill unwinds it (SystemExit), so its `finally` stops the workers."""
    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    try:
        signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (embedded use): leave signals alone
        pass


def run_drill(args: argparse.Namespace, ctx: Context) -> int:
    if getattr(args, "save_upgrade_fixture", None) is not None:
        return save_upgrade_fixture(args, ctx)
    swept, upgrading = getattr(args, "sweep", False), getattr(args, "upgrade_from", None) is not None
    if swept or upgrading or getattr(args, "power_loss", False):
        report = _crash_points(args, ctx)
    else:
        plan = schedule_from(args, ctx)
        _stop_on_sigterm()
        emit = _printer() if args.events else (lambda event: None)
        report = Drill(ctx, plan, data_dir=args.data_dir, emit=emit).run()
        if not report["ok"] and not args.no_shrink and args.replay is None:
            if is_postgresql(ctx.settings.database_url):
                # Every smaller try submits its input again, into the same database: it would collide.
                print("not shrunk: each smaller try needs an empty database of its own; rerun the schedule below "
                      "on one", file=sys.stderr, flush=True)
            elif report.get("stalled"):
                print(f"not shrunk: the run stalled, and every smaller try would wait {report['stalled']['limit_s']:g} s "
                      "for it too", file=sys.stderr, flush=True)
            else:
                if not args.events:
                    print(f"the drill failed ({', '.join(sorted({f['check'] for f in report['failures']}))}); "
                          f"looking for a smaller failing schedule (at most {shrink.MAX_TRIES} drills, "
                          f"{shrink.BUDGET_S:g} s; --no-shrink skips this)", file=sys.stderr, flush=True)
                report["shrunk"] = shrink.shrink(ctx, plan, report, emit=emit)
        emit({"event": "report", **report})
    if args.events:
        pass  # the report was the last event
    elif args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print("\n".join([summary(report), *upgrade_lines(report), *sweep_lines(report), *power_lines(report)]))
    return 0 if report["ok"] else 1


def _crash_points(args: argparse.Namespace, ctx: Context) -> dict[str, Any]:
    """--sweep / --upgrade-from / --power-loss: one worker at a time, killed at persistence points (sweep.py,
    upgrade.py, power_loss.py)."""
    shaped = [f for f in ("kills", "sigterm", "aim", "only", "replay") if getattr(args, f)]
    if shaped:
        raise JobError(f"--sweep, --upgrade-from and --power-loss choose every crash themselves (SIGKILL at "
                       f"persistence points); drop --{shaped[0]}")
    powered = getattr(args, "power_loss", False)
    if powered and (args.sweep or args.upgrade_from is not None):
        raise JobError("--power-loss sweeps the persistence points itself, with a power cut at each; drop "
                       + ("--sweep" if args.sweep else "--upgrade-from"))
    for name in ("seed", "work_ms", "workers"):  # the schedule's defaults; records: the sweep's own
        if getattr(args, name) is None:
            setattr(args, name, DEFAULTS[name])
    if args.sweep_prefix is None:
        args.sweep_prefix = power_loss.PREFIX if powered else PREFIX
    if args.sweep_sample is None:
        args.sweep_sample = power_loss.SAMPLE if powered else SAMPLE
    _stop_on_sigterm()
    emit = _printer() if args.events else (lambda event: None)
    if powered:
        # PostgreSQL: a throwaway server of the drill's own on LazyFS. Several workers: each cut under all
        # of them at once, at seeded moments (power_loss_workers.py).
        run: type[PowerLossRun] = PostgresPowerLossRun if is_postgresql(ctx.settings.database_url) else PowerLossRun
        plan: SweepPlan | None = None
        if args.workers > 1:
            run, plan = with_workers(run, args.workers), MachineCutPlan(max(1, args.random_cuts), args.seed,
                                                                         args.workers)
        report = power_loss.run_power_loss(args, ctx, emit, run=run, plan=plan)
    elif args.upgrade_from is not None:
        report = run_upgrade(args, ctx, emit)
    else:
        report = run_sweep(args, ctx, emit)
    report["rerun"] = _rerun_command(args, report)
    emit({"event": "report", **report})
    return report


def _rerun_command(args: argparse.Namespace, report: dict[str, Any]) -> str:
    """The command that runs this crash-point drill again, crash for crash (same input, seed, plan)."""
    mode = ("--power-loss" if getattr(args, "power_loss", False) else
            f"--upgrade-from {shlex.quote(str(args.upgrade_from))}" if args.upgrade_from is not None else "--sweep")
    command = (f"python -m {settings_module.PACKAGE} drill {mode} --seed {args.seed} --records {report['records']} "
               f"--sweep-prefix {args.sweep_prefix} --sweep-sample {args.sweep_sample}")
    if getattr(args, "power_loss", False):
        command += f" --random-cuts {args.random_cuts}"
    return command + (f" --work-ms {args.work_ms:g}" if args.work_ms != DEFAULTS["work_ms"] else "")


def _printer() -> Callable[[dict[str, Any]], None]:
    def emit(event: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(event, sort_keys=True) + "\n")
        sys.stdout.flush()
    return emit
