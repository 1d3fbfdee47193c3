"""``advisor``: the command line. Thin: parse flags, hand them to one command, print its errors.

The commands live in ``advisor/commands/`` (one module per group); each calls one library
function and prints. With no arguments it opens the TUI. Every user-caused failure is an
AdvisorError, printed as one clear line on stderr with exit code 2. Textual and Copier are
imported only by the commands that need them, so scripted calls start fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from advisor.commands.advice import cmd_explain, cmd_questions, cmd_recommend, cmd_strategies
from advisor.commands.common import catalog_for
from advisor.commands.probe import cmd_probe
from advisor.commands.project import cmd_drill, cmd_generate, cmd_inspect
from advisor.commands.review import cmd_review
from advisor.errors import EXIT_USAGE, AdvisorError

Handler = Callable[[argparse.Namespace], int]


def cmd_tui(args: argparse.Namespace) -> int:
    loaded = catalog_for(args)  # a broken catalog is a CLI error (exit 2), not a crashed TUI
    from advisor.tui.app import make_app

    make_app(catalog=loaded).run()
    return 0


# --- parser --------------------------------------------------------------------------


def _answer_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--answers", metavar="FILE", help="YAML answers file (question_id: value)")
    p.add_argument("--set", metavar="ID=VALUE", action="append", help="answer one question (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="advisor",
        description="Which continuity mechanism should a job that gets killed use? "
        "With no command, opens the interactive advisor.",
        epilog="Example: advisor recommend --set duration=hours --set work_shape=record_batch",
    )
    parser.add_argument("--catalog", metavar="DIR", help="use another strategy catalog (default: the bundled one)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, handler: Handler, help: str, example: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, epilog=f"Example: {example}")
        p.set_defaults(handler=handler)
        return p

    p = add("recommend", cmd_recommend, "rank the strategies for your answers",
            "advisor recommend --answers job.yml --json")  # fmt: skip
    _answer_flags(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--strict", action="store_true", help="exit 2 when answers conflict (after printing the output)")

    p = add("questions", cmd_questions, "list the questions, their values and help",
            "advisor questions > answers-help.txt")  # fmt: skip
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = add("strategies", cmd_strategies, "list the strategies in the catalog", "advisor strategies --json")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = add("explain", cmd_explain, "explain one strategy: recovery point, trade-offs, pitfalls",
            "advisor explain checkpoint")  # fmt: skip
    p.add_argument("strategy", metavar="ID")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = add("review", cmd_review, "write a decision record (Markdown, MADR) for your answers",
            "advisor review --answers job.yml --current checkpoint --control optimistic-progress-update=no"
            " --out docs/adr/0007-continuity.md")  # fmt: skip
    _answer_flags(p)
    p.add_argument("--out", metavar="FILE", required=True, help="where to write the record")
    p.add_argument("--current", metavar="ID", help="the strategy the team uses today, to be judged")
    p.add_argument("--control", metavar="ID=STATE", action="append",
                   help="one essential control of the current design: yes, no or unknown (repeatable;"
                        " `advisor explain ID` lists them)")  # fmt: skip
    p.add_argument("--context", metavar="TEXT",
                   help="the incident or the job, in the team's words (@FILE reads a file)")  # fmt: skip
    p.add_argument("--context-file", metavar="FILE", help="read --context from a file")
    p.add_argument("--chosen", metavar="ID", help="record this strategy as the decision instead of the top pick")
    p.add_argument("--title", default=None,
                   help="the job's name for the title (default: the context's first sentence, else the job your answers describe)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    p.add_argument("--probe", metavar="REPORT", help="a report from `advisor probe --out`: its figures become"
                   " evidence in the verification plan")

    p = add("generate", cmd_generate, "generate a crash-proof project for a strategy (Copier)",
            "advisor generate checkpoint ./nightly-sync --set project_name=nightly-sync")  # fmt: skip
    p.add_argument("strategy", metavar="STRATEGY")
    p.add_argument("dest", metavar="DEST")
    p.add_argument("--answers", metavar="FILE",
                   help="YAML file of template answers (see docs/generated-project.md); your answers to the"
                        " advisor's questions in it (advisor recommend --answers) set the template settings they"
                        " imply")  # fmt: skip
    p.add_argument("--set", metavar="KEY=VALUE", action="append", help="one template answer (repeatable; wins)")
    p.add_argument("--no-settings", action="store_true",
                   help="ignore the template settings your answers imply: the template's defaults")
    p.add_argument("--force", action="store_true",
                   help="generate into a non-empty DEST: the template's files are replaced, an earlier generated"
                        " variant's files this one lacks are removed, every other file (data/, yours) is kept")

    p = add("drill", cmd_drill, "crash-drill a generated project: random kills, then verify",
            "advisor drill ./nightly-sync --records 2000 --kills 10 --seed 1")  # fmt: skip
    p.add_argument("dest", metavar="DEST")
    p.add_argument("--records", type=int, default=2000, help="demo records (default 2000)")
    p.add_argument("--kills", type=int, default=10, help="random kills (default 10)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--sigterm", action="store_true", help="send SIGTERM instead of SIGKILL")
    p.add_argument("--aim", metavar="WINDOW|all", default=None,
                   help="kill exactly in this critical window of the strategy, or in each in turn (see the "
                        "project's `drill --help`)")
    p.add_argument("--only", metavar="KIND", action="append", default=None,
                   help="only this fault kind (repeatable; default: every kind that applies: sigkill, sigterm,"
                        " other-host, service-fail, service-timeout, resubmit-same, resubmit-new, store-outage,"
                        " key-reuse, redelivery)")
    p.add_argument("--no-shrink", action="store_true", help="a failed drill is not shrunk to its smallest schedule")
    p.add_argument("--json", action="store_true", help="print the JSON report")

    p = add("probe", cmd_probe, "crash-drill a job you already have: random kills, restarts, then your verify",
            "advisor probe --run 'python etl.py' --verify 'python check.py' --progress 'wc -l < out.csv'"
            " --kills 5 --out probe.json")  # fmt: skip
    p.add_argument("--run", metavar="CMD", required=True, help="the job (a bash command); it must exit 0 when done")
    p.add_argument("--verify", metavar="CMD", help="checks the job's data after the drill: exit 0 = right")
    p.add_argument("--progress", metavar="CMD", help="prints a number: records done (measures redone work)")
    p.add_argument("--reset", metavar="CMD", help="your command that resets the job's data; run before the drill"
                   " (and before --baseline). The probe itself never deletes anything")
    p.add_argument("--cwd", metavar="DIR", default=".", help="run every command in DIR (default: here)")
    p.add_argument("--kills", type=int, default=5, help="kills to deliver (default 5)")
    p.add_argument("--min-s", type=float, default=1.0, metavar="S", help="earliest kill, s after a start (default 1)")
    p.add_argument("--max-s", type=float, default=10.0, metavar="S", help="latest kill, s after a start (default 10)")
    p.add_argument("--seed", type=int, default=1, help="seed for the kill moments (default 1)")
    p.add_argument("--sigterm", action="store_true", help="SIGTERM first; SIGKILL when not gone within --grace")
    p.add_argument("--grace", type=float, default=30.0, metavar="S", help="SIGTERM grace period (default 30)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="bound on the drill and on each command (default 600)")
    p.add_argument("--baseline", action="store_true", help="time one uninterrupted run first (needs --reset)")
    p.add_argument("--power-loss", action="store_true",
                   help="every kill is a power cut too: --data on LazyFS, what the job did not fsync is dropped")
    p.add_argument("--data", metavar="DIR", help="with --power-loss: the job's data directory (in --cwd); the probe"
                   " works on a copy of it and leaves it as it was")
    p.add_argument("--sample-s", type=float, default=0.2, metavar="S", help="progress sampling interval (default 0.2)")
    p.add_argument("--json", action="store_true", help="print the JSON report")
    p.add_argument("--events", action="store_true", help="print JSON events, one per line, the report last")
    p.add_argument("--out", metavar="FILE", help="write the JSON report to FILE (for advisor review --probe)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    p = add("inspect", cmd_inspect, "show a generated project's recovery point (read only): where it would resume",
            "advisor inspect ./nightly-sync   (or: advisor inspect ./nightly-sync/data --json)")  # fmt: skip
    p.add_argument("dir", metavar="DIR", help="a generated project, or its data directory")
    p.add_argument("--data-dir", metavar="D", help="the project's data directory (default: DIR/data)")
    p.add_argument("--json", action="store_true", help="machine-readable output (see docs/inspect.md)")

    add("tui", cmd_tui, "open the interactive advisor (the default)", "advisor tui")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = getattr(args, "handler", cmd_tui)
    try:
        code = handler(args)
        sys.stdout.flush()  # here, not at exit, so that a reader gone early is caught below
        return code
    except AdvisorError as exc:
        print(f"advisor: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `advisor questions | head`: the reader has what it wanted
        # Python's own flush at exit would report the broken pipe again: stdout goes to /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0


if __name__ == "__main__":
    sys.exit(main())
