"""``advisor``: the command line. Thin: parse flags, call one library function, print.

With no arguments it opens the TUI. Every user-caused failure is an AdvisorError, printed as
one clear line on stderr with exit code 2. Textual and Copier are imported only by the commands
that need them, so scripted calls start fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.errors import EXIT_USAGE, AdvisorError

if TYPE_CHECKING:
    from advisor.catalog import Catalog

Handler = Callable[[argparse.Namespace], int]


_catalog_dir: Path | None = None  # set by the global --catalog flag


def _catalog() -> Catalog:
    from advisor.catalog import load_catalog

    return load_catalog(_catalog_dir)


def _answers(args: argparse.Namespace, catalog: Catalog) -> dict[str, str]:
    """Answers from --answers FILE, then --set flags on top (flags win)."""
    from advisor.answers import load_answers_file, parse_set_flags

    answers = load_answers_file(Path(args.answers), catalog) if args.answers else {}
    answers.update(parse_set_flags(args.set or [], catalog))
    return {q: answers[q] for q in catalog.question_ids if q in answers}


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _wrap(text: str, indent: str = "    ") -> str:
    return textwrap.fill(text, width=100, initial_indent=indent, subsequent_indent=indent)


# --- commands ------------------------------------------------------------------------


def cmd_recommend(args: argparse.Namespace) -> int:
    from advisor.engine import recommend

    catalog = _catalog()
    rec = recommend(_answers(args, catalog), catalog)
    if args.json:
        _print_json(rec.to_json())
        return 0
    top = rec.top
    print(f"Recommended: {top.strategy.name} ({top.strategy.id}), score {top.score:g}")
    print(_wrap(top.strategy.summary, "  "))
    for line in top.because:
        print(f"  because {line}")
    if rec.scenario:
        print(f"  seed scenario: {rec.scenario.scenario} → {rec.scenario.why}")
    for note in rec.notes:
        print(_wrap(f"note: {note}", "  "))
    print("\nRanking:")
    for i, r in enumerate(rec.ranking, 1):
        print(f"  {i}. {r.strategy.id:<27} {r.score:>5g}  {r.strategy.name}")
    print("\nWhy not the others:")
    for sid, reasons in rec.why_not.items():
        print(f"  {sid}: {'; '.join(reasons)}")
    print("\nPitfalls to check:")
    for p in rec.pitfalls:
        print(f"  - {p.title} → {p.fix}")
    if rec.swings:
        print("\nUnanswered questions that would change the pick:")
        for s in rec.swings:
            print(f"  - {s.question}={s.value} → {s.would_pick}")
    print(f"\nNext: advisor generate {top.strategy.id} ./my-job   (or: advisor explain {top.strategy.id})")
    return 0


def cmd_questions(args: argparse.Namespace) -> int:
    catalog = _catalog()
    if args.json:
        _print_json([
            {"id": q.id, "group": q.group, "asks": q.asks, "help": q.help,
             "values": [{"id": c.id, "label": c.label, "help": c.help} for c in q.choices]}
            for q in catalog.questions
        ])  # fmt: skip
        return 0
    print("Write an answers file as YAML, one `question_id: value` per line (leave out what you don't know).\n")
    for q in catalog.questions:
        print(f"{q.id}  ({'recovery point' if q.group == 'recovery_point' else 'trait'})")
        print(f"  {q.asks}")
        print(_wrap(q.help, "  "))
        for c in q.choices:
            print(f"    {c.id:<16} {c.label}")
        print()
    return 0


def cmd_strategies(args: argparse.Namespace) -> int:
    catalog = _catalog()
    if args.json:
        _print_json([
            {"id": s.id, "name": s.name, "granularity": s.granularity, "summary": s.summary, "template": s.template}
            for s in catalog.strategies
        ])  # fmt: skip
        return 0
    for s in catalog.strategies:
        print(f"{s.id:<27} {s.granularity:<7} {s.name}")
    print("\nMore: advisor explain ID")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    catalog = _catalog()
    if args.strategy not in catalog.strategy_ids:
        raise AdvisorError(f"unknown strategy {args.strategy!r}. Valid: {', '.join(catalog.strategy_ids)}.")
    s = catalog.strategy(args.strategy)
    if args.json:
        _print_json({
            "id": s.id, "name": s.name, "granularity": s.granularity, "summary": s.summary,
            "recovery_point": vars(s.recovery_point), "when_to_use": s.when_to_use,
            "avoid_when": s.avoid_when, "pros": s.pros, "cons": s.cons, "costs": s.costs,
            "pitfalls": [{"id": p.id, "title": p.title, "problem": p.problem, "fix": p.fix, "seed": p.seed}
                         for p in s.pitfalls],
            "references": s.references, "template": s.template,
        })  # fmt: skip
        return 0
    print(f"{s.name} ({s.id}) — {s.granularity}-level recovery\n")
    print(_wrap(s.summary, ""))
    print("\nRecovery point:")
    print(_wrap(f"Q1 where stored: {s.recovery_point.where}", "  "))
    print(_wrap(f"Q2 how often: {s.recovery_point.how_often}", "  "))
    print(_wrap(f"Q3 duplicates and omissions: {s.recovery_point.duplicates}", "  "))
    for title, items in (("Use it when", s.when_to_use), ("Avoid it when", s.avoid_when),
                         ("Pros", s.pros), ("Cons", s.cons), ("Costs", s.costs)):  # fmt: skip
        print(f"\n{title}:")
        for item in items:
            print(f"  - {item}")
    print("\nPitfalls:")
    for p in s.pitfalls:
        print(f"  - {p.title} (seed {p.seed})")
        print(_wrap(f"problem: {p.problem}", "      "))
        print(_wrap(f"fix: {p.fix}", "      "))
    print("\nReferences:")
    for ref in s.references:
        print(f"  - {ref}")
    print(f"\nGenerate it: advisor generate {s.template} ./my-job")
    return 0


def cmd_review(args: argparse.Namespace) -> int:
    from advisor.engine import recommend
    from advisor.review import decision_record, judge_current, write_text_safely

    catalog = _catalog()
    answers = _answers(args, catalog)
    text = decision_record(answers, catalog, current=args.current, chosen=args.chosen, title=args.title)
    write_text_safely(Path(args.out), text, force=args.force)
    print(f"wrote {args.out}")
    if args.current:
        print(judge_current(recommend(answers, catalog), args.current).summary)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    import yaml

    import advisor.scaffold as scaffold

    data: dict[str, object] = {}
    if args.answers:
        try:
            loaded = yaml.safe_load(Path(args.answers).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise AdvisorError(f"{args.answers}: cannot read template answers ({exc}).") from None
        if not isinstance(loaded, dict):
            raise AdvisorError(f"{args.answers}: expected a mapping of template answers (key: value).")
        data.update(loaded)
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise AdvisorError(f"--set {item!r}: expected KEY=VALUE, e.g. --set project_name=nightly-sync.")
        data[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    generated = scaffold.generate(args.strategy, Path(args.dest), data, force=args.force)
    print(f"generated {args.strategy} project in {generated.dest} ({len(generated.files)} files)")
    print("next:")
    print(f"  cd {generated.dest}")
    print(f"  python -m {generated.package} submit-demo --records 2000 && python -m {generated.package} run")
    print(f"  python -m {generated.package} drill --records 2000 --kills 10 --seed 1")
    return 0


def cmd_drill(args: argparse.Namespace) -> int:
    import advisor.scaffold as scaffold

    options = dict(records=args.records, kills=args.kills, seed=args.seed, sigterm=args.sigterm)
    if args.json:
        report = scaffold.run_drill(Path(args.dest), **options)
        _print_json(report)
    else:
        report = {}
        for event in scaffold.drill_events(Path(args.dest), **options):
            kind = event.get("event")
            if kind == "kill":
                print(f"kill #{event.get('n')} ({event.get('signal')}) at {event.get('done')} records")
            elif kind == "recovered":
                print(f"  recovered in {event.get('ms')} ms")
            elif kind == "report":
                report = event
        rec = report.get("recovery_ms") or {}
        print(
            f"{'OK' if report.get('ok') else 'FAILED'}: lost {report.get('lost')}, duplicate effects"
            f" {report.get('duplicate_effects')}, redone calls {report.get('redone_calls')},"
            f" recovery p50 {rec.get('p50')} ms / p95 {rec.get('p95')} ms,"
            f" {report.get('throughput')} records/s"
        )
    return 0 if report.get("ok") else 1


def cmd_inspect(args: argparse.Namespace) -> int:
    from advisor.inspect import inspect_dir, render_text

    report = inspect_dir(Path(args.dir), Path(args.data_dir) if args.data_dir else None)
    if args.json:
        _print_json(report)
    else:
        print(render_text(report))
    return 0


def cmd_tui(args: argparse.Namespace) -> int:
    catalog = _catalog()  # a broken catalog is a CLI error (exit 2), not a crashed TUI
    from advisor.tui.app import make_app

    make_app(catalog=catalog).run()
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
            "advisor review --answers job.yml --current idempotent-retry --out docs/adr/0007-continuity.md")  # fmt: skip
    _answer_flags(p)
    p.add_argument("--out", metavar="FILE", required=True, help="where to write the record")
    p.add_argument("--current", metavar="ID", help="the strategy the team uses today, to be judged")
    p.add_argument("--chosen", metavar="ID", help="record this strategy as the decision instead of the top pick")
    p.add_argument("--title", default="the long-running job", help="what the record is about")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out file")

    p = add("generate", cmd_generate, "generate a crash-proof project for a strategy (Copier)",
            "advisor generate checkpoint ./nightly-sync --set project_name=nightly-sync")  # fmt: skip
    p.add_argument("strategy", metavar="STRATEGY")
    p.add_argument("dest", metavar="DEST")
    p.add_argument("--answers", metavar="FILE", help="YAML file of template answers (see docs/generated-project.md)")
    p.add_argument("--set", metavar="KEY=VALUE", action="append", help="one template answer (repeatable)")
    p.add_argument("--force", action="store_true", help="generate into a non-empty DEST")

    p = add("drill", cmd_drill, "crash-drill a generated project: random kills, then verify",
            "advisor drill ./nightly-sync --records 2000 --kills 10 --seed 1")  # fmt: skip
    p.add_argument("dest", metavar="DEST")
    p.add_argument("--records", type=int, default=2000, help="demo records (default 2000)")
    p.add_argument("--kills", type=int, default=10, help="random kills (default 10)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--sigterm", action="store_true", help="send SIGTERM instead of SIGKILL")
    p.add_argument("--json", action="store_true", help="print the JSON report")

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
    global _catalog_dir
    _catalog_dir = Path(args.catalog) if args.catalog else None
    handler: Handler = getattr(args, "handler", cmd_tui)
    try:
        return handler(args)
    except AdvisorError as exc:
        print(f"advisor: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `advisor questions | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
