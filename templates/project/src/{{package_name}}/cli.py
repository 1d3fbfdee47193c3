"""The command line: the same commands in every generated project.

    python -m <package> submit-demo --records 2000 [--work-ms 1]
    python -m <package> submit --file orders.csv [--correlation-id ID] [--work-ms MS]
    python -m <package> run
    python -m <package> status [--json]
    python -m <package> reset [--yes]
    python -m <package> reconcile [--applied ID | --not-applied ID] [--json]
    python -m <package> drill --records 2000 --kills 10 --seed 1 [--sigterm] [--json]

``main(argv) -> int`` is testable without a subprocess. A :class:`JobError`
becomes one line on stderr and exit code 2; bad flags also exit 2 (argparse).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .runtime import outage, probe_hook
from .ops import reset as reset_module
from .runtime import effects, metrics
from .ops import reconcile, reconcile_bulk
from . import settings as settings_module
from .ops import status as status_module
from .runtime import submission
from .runtime.run_summary import RunSummary
from .runtime.arguments import fraction, non_negative_float, port_number, positive_int
from .runtime.errors import EXIT_OK, EXIT_USAGE, JobError

#: The drill lines of the README and the printed next step (a strategy may name its own: DRILL_EXAMPLES).
DRILL_EXAMPLES = ("--records 2000 --kills 10 --seed 1", "--records 1000 --kills 6 --aim all")
from .job import demo_records
from .runtime.safe_read import INPUT_FORMATS
from .settings import Settings
from .runtime.shell import fresh_shell_command
from .runtime.shutdown import Shutdown
from .runtime.store import describe
from .runtime.strategy import Context, load


#: The commands whose command lines never reach the drill's options.
NOT_THE_DRILL = frozenset({"submit-demo", "submit", "run", "status", "reset", "reconcile"})


def build_parser(strategy: object, command: str | None = None) -> argparse.ArgumentParser:
    """The parser; ``command`` (the first argument) one of NOT_THE_DRILL: the drill's options
    are left out, so its modules are not imported (they were ~half the start of `run`)."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {settings_module.PACKAGE}",
        description=f"{settings_module.PROJECT_NAME}: a {settings_module.STRATEGY} job that survives kill -9.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", type=Path, default=Path("data"),
                        help="directory holding the state database and external.db (default: ./data)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("submit-demo", parents=[common], help="queue the standard demo workload",
                       epilog="example: python -m %(prog)s --records 2000 --work-ms 1")
    p.add_argument("--records", type=positive_int, required=True, help="number of demo records")
    p.add_argument("--work-ms", type=non_negative_float, default=0.0, help="simulated work per record (ms)")
    p.add_argument("--fail-rate", type=fraction, default=None, metavar="F",
                   help="make the simulated external service fail this fraction of calls transiently (0 <= F < 1)")
    p.set_defaults(func=cmd_submit_demo)

    p = sub.add_parser("submit", parents=[common], help="queue your own records from a file (all or nothing)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="formats (by extension): " + ", ".join(
                           f"{ext} = {what}" for ext, what in INPUT_FORMATS.items()) + ";\n"
                              "every record an object with a unique record_id and the fields job.RECORD_FIELDS names.\n"
                              "example: submit --file orders.csv --correlation-id batch-2024-06-01")
    p.add_argument("--file", type=Path, required=True, help="the records: .jsonl, .json or .csv")
    p.add_argument("--correlation-id", default=None, metavar="ID",
                   help="names this submission: submitting the same ID again queues nothing and answers "
                        "with the first submission's tasks (default: a new id, printed)")
    p.add_argument("--work-ms", type=non_negative_float, default=0.0, help="simulated work per record (ms)")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("run", parents=[common], help="work until nothing is left, then exit 0")
    p.add_argument("--limit", type=positive_int, default=None,
                   help="stop after checkpointing about this many records (a slice; for tests and canaries)"
                        + ("; the queue is not consumed then" if settings_module.INPUT_SOURCE == "rabbitmq" else ""))
    p.add_argument("--metrics-port", type=port_number, default=None, metavar="PORT",
                   help="serve Prometheus metrics on http://ADDRESS:PORT/metrics and a liveness probe on /healthz "
                        "(default: off; the METRICS_PORT setting)")
    p.add_argument("--metrics-address", default=None, metavar="ADDRESS",
                   help="the address to serve them on (default 127.0.0.1; 0.0.0.0 in a container)")
    p.add_argument("--metrics-file", default=None, metavar="PATH",
                   help="also write them to PATH, atomically, every 15 s and at exit (a batch job; node_exporter's "
                        "textfile collector)")
    if settings_module.INPUT_SOURCE == "rabbitmq":
        p.add_argument("--follow", action="store_true",
                       help="keep consuming the queue when it is empty (without it, run exits 0 once the queue "
                            "is drained and the work is done)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("status", parents=[common], help="progress, last checkpoint age and rate per task")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("reset", parents=[common], help="empty the state store (asks first; --yes for scripts)",
                       epilog="examples: %(prog)s --data-dir data;  DATABASE_URL=postgresql://... %(prog)s --yes")
    p.add_argument("--yes", action="store_true", help="do not ask (scripts); without it reset asks in the terminal")
    p.set_defaults(func=cmd_reset)

    p = sub.add_parser("reconcile", parents=[common],
                       help="list the external calls in doubt after a crash (plain calls), or record a "
                            "person's answer for one",
                       epilog="examples: reconcile\n          reconcile --not-applied demo-00000/r0000042\n"
                              "          reconcile --file checked.txt --applied\n"
                              "          reconcile --from-export applied-by-provider.txt",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    answer = p.add_mutually_exclusive_group()
    answer.add_argument("--applied", metavar="ID", nargs="?", const=True, default=None,
                        help="you checked: the call got through (it is never sent again); without ID: every id "
                             "of --file")
    answer.add_argument("--not-applied", metavar="ID", nargs="?", const=True, default=None,
                        help="you checked: it never arrived (the next `run` sends it); without ID: every id of --file")
    answer.add_argument("--from-export", metavar="FILE", type=Path, default=None,
                        help="settle every call in doubt against what the provider applied: FILE is one reference "
                             "a line, JSON Lines with a 'reference', or the simulated service's external.db")
    p.add_argument("--file", metavar="IDS", type=Path, default=None,
                   help="with --applied or --not-applied (no ID): the same answer for every id in IDS, one a line")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_reconcile)

    drill_help = "crash drill: kill the worker at random moments, then verify"
    if command in NOT_THE_DRILL:  # argparse picks the subparser by the first argument: this one is never used
        sub.add_parser("drill", help=drill_help)
    else:
        from .drill import command as drill_module

        p = sub.add_parser("drill", help=drill_help, formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog="examples: " + "\n          ".join(
                               f"drill {line}" for line in getattr(strategy, "DRILL_EXAMPLES", DRILL_EXAMPLES))
                                  + "\n\n" + drill_module.windows_help(strategy))
        drill_module.add_arguments(p, strategy)
        p.set_defaults(func=cmd_drill)

    add_commands = getattr(strategy, "add_commands", None)
    if add_commands is not None:
        add_commands(sub, common)
    return parser


def cmd_submit_demo(args: argparse.Namespace, ctx: Context) -> int:
    ids = ctx.strategy.submit(ctx, demo_records(args.records), work_ms=args.work_ms)
    print(f"queued {args.records} demo records as {len(ids)} task(s) in {ctx.data_dir}")
    if args.fail_rate is not None:
        service = ctx.external()
        try:
            service.set_failure_rate(args.fail_rate)
        finally:
            service.close()
        print(f"the external service fails {args.fail_rate:.0%} of calls transiently")
    return EXIT_OK


def cmd_submit(args: argparse.Namespace, ctx: Context) -> int:
    # Every record is read and checked before one is queued (submission.py, safe_read.py).
    records = submission.read_file(args.file)
    ids = submission.queue(ctx, records, correlation_id=args.correlation_id, work_ms=args.work_ms)
    if ids.added:
        print(f"queued {len(records)} record(s) from {args.file} as {len(ids)} task(s) in {ctx.data_dir}, "
              f"correlation id {ids.correlation_id}")
        if args.correlation_id is None:
            print(f"to submit this file again without queueing it twice, add --correlation-id {ids.correlation_id}")
    else:
        print(f"correlation id {ids.correlation_id} was submitted before: its {len(ids)} task(s) are queued "
              "already; nothing added")
    print(f"next: {fresh_shell_command('run', ctx.data_dir)}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace, ctx: Context) -> int:
    shutdown = Shutdown(ctx.settings.grace_period_s).install()
    watched = probe_hook.observer  # a drilled worker: it tells the drill how its run ended
    if watched is not None:
        watched.run_started(ctx)
    start_metrics(args, ctx)
    # One line on success (records, time, recoveries, calls in doubt); a strategy that prints its own
    # (stream checkpoint: micro-batches) says so with PRINTS_RUN_SUMMARY.
    summary = None if getattr(ctx.strategy, "PRINTS_RUN_SUMMARY", False) else RunSummary(ctx)
    code: int | None = None
    try:
        if settings_module.INPUT_SOURCE == "rabbitmq" and args.limit is None:  # the queue is the input
            from .runtime import amqp_input

            def work() -> int:
                return amqp_input.run(ctx, shutdown, follow=args.follow)
        else:
            # A strategy that adds options to `run` (the stream's --follow) hands them on itself.
            options = getattr(ctx.strategy, "run_options", lambda _args: {})(args)

            def work() -> int:
                return int(ctx.strategy.run(ctx, shutdown, limit=args.limit, **options))
        # A store outage (a PostgreSQL restart) is ridden out: the work is started again in
        # this process, from the committed state (outage.py); unacked messages come back.
        code = outage.ride_out(work, shutdown, ctx.settings.store_outage_s)
    finally:
        shutdown.cancel()
        metrics.run_ended(code, shutdown.requested_at)
        if summary is not None:
            summary.stop()
    if watched is not None:
        watched.run_ended(ctx, shutdown.signal_name, code)
    if summary is not None and code == EXIT_OK and shutdown.signal_name is None:  # finished, not stopped
        print(summary.line(), flush=True)
    return code


def start_metrics(args: argparse.Namespace, ctx: Context) -> None:
    """The options win over the settings (<PKG>_METRICS_PORT, ...); nothing happens when both are off."""
    s = ctx.settings
    in_doubt = (lambda: int(effects.summary(ctx.data_dir, s)["in_doubt"])) if effects.KIND == "plain" else None
    metrics.start(s, port=s.metrics_port if args.metrics_port is None else args.metrics_port,
                  address=args.metrics_address or s.metrics_address,
                  textfile=s.metrics_file if args.metrics_file is None else args.metrics_file, in_doubt=in_doubt)


def cmd_status(args: argparse.Namespace, ctx: Context) -> int:
    report = ctx.strategy.status(ctx)
    # Which store answered: with several hosts, the data directory alone does not say.
    report["store"] = describe(ctx.data_dir, ctx.settings,
                               files=getattr(ctx.strategy, "STATE_STORE", "database") == "files")
    report["effects"] = effects.summary(ctx.data_dir, ctx.settings)  # the calls in doubt, if any
    print(status_module.render(report, as_json=args.json))
    return EXIT_OK


def cmd_reconcile(args: argparse.Namespace, ctx: Context) -> int:
    given = args.applied if args.applied is not None else args.not_applied  # an ID, True (no ID) or None
    if args.from_export is not None:
        if args.file is not None:
            raise JobError("--from-export settles every call in doubt by itself; leave out --file")
        print(reconcile_bulk.settle_from_export(ctx.data_dir, ctx.settings, args.from_export))
        return EXIT_OK
    if args.file is not None:
        if given is not True:
            raise JobError("--file IDS needs --applied or --not-applied without an ID: the answer for every id listed")
        print(reconcile_bulk.answer_many(ctx.data_dir, ctx.settings, reconcile_bulk.read_ids(args.file),
                                         applied=args.applied is not None))
        return EXIT_OK
    if given is True:
        raise JobError("--applied/--not-applied needs the call's ID (as `reconcile` lists it), or --file IDS")
    if given:
        print(reconcile.resolve(ctx.data_dir, ctx.settings, given, applied=args.applied is not None))
        return EXIT_OK
    listing = reconcile.doubt_listing(ctx.data_dir, ctx.settings)
    print(json.dumps(listing, indent=2) if args.json else reconcile.render_listing(listing))
    return EXIT_OK


def cmd_reset(args: argparse.Namespace, ctx: Context) -> int:
    return reset_module.run(ctx, yes=args.yes)


def cmd_drill(args: argparse.Namespace, ctx: Context) -> int:
    from .drill import command as drill_module

    return drill_module.run_drill(args, ctx)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        strategy = load()
        argv = list(sys.argv[1:] if argv is None else argv)
        parser = build_parser(strategy, argv[0] if argv else None)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # argparse: --help (0) or bad flags (2)
            return int(exc.code or 0)
        settings = Settings.from_env()
        data_dir = getattr(args, "data_dir", None) or Path("data")
        ctx = Context(data_dir=data_dir, settings=settings, strategy=strategy)
        code = int(args.func(args, ctx))
        sys.stdout.flush()  # here, not at exit, so that a reader gone early is caught below
        return code
    except JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `python -m <pkg> status | head -2`: the reader has what it wanted
        quiet_stdout()
        return EXIT_OK


def quiet_stdout() -> None:
    """Point stdout at /dev/null: Python's own flush at exit would report the broken pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
