"""``advisor``: the command line. Thin: parse flags, call one library function, print.

With no arguments it opens the TUI. Every user-caused failure is an AdvisorError, printed as
one clear line on stderr with exit code 2. Textual and Copier are imported only by the commands
that need them, so scripted calls start fast.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.errors import EXIT_USAGE, AdvisorError

if TYPE_CHECKING:
    from advisor.model.catalog import Catalog
    from advisor.model.template_settings import Setting

Handler = Callable[[argparse.Namespace], int]


_catalog_dir: Path | None = None  # set by the global --catalog flag


def _catalog() -> Catalog:
    from advisor.model.loader import load_catalog

    return load_catalog(_catalog_dir)


def _answers(args: argparse.Namespace, catalog: Catalog) -> dict[str, str]:
    """Answers from --answers FILE, then --set flags on top (flags win)."""
    from advisor.model.answers import load_answers_file, parse_set_flags

    answers = load_answers_file(Path(args.answers), catalog) if args.answers else {}
    answers.update(parse_set_flags(args.set or [], catalog))
    return {q: answers[q] for q in catalog.question_ids if q in answers}


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _wrap(text: str, indent: str = "    ") -> str:
    return textwrap.fill(text, width=100, initial_indent=indent, subsequent_indent=indent)


def _bullet(text: str, indent: str = "  ", mark: str = "- ") -> str:
    """A list item whose continuation lines align under its text."""
    return textwrap.fill(text, width=100, initial_indent=indent + mark, subsequent_indent=indent + " " * len(mark))


# --- commands ------------------------------------------------------------------------


def _label(catalog: Catalog, question: str, value: str) -> str:
    from advisor.model.engine import short_label

    label = short_label(catalog.question(question), value)
    plain = label.lower() in {value.replace("_", " "), "yes", "no"} or len(label) < 4
    return f"{question} = {value}" if plain else f"{question} = {value} ({label})"


def _generatable(strategy_id: str) -> bool:
    """Whether `advisor generate` accepts the strategy (text mode only: keeps --json light)."""
    from advisor.model.template_questions import generated_strategies

    return strategy_id in generated_strategies()


def cmd_recommend(args: argparse.Namespace) -> int:
    from advisor.model.engine import recommend

    catalog = _catalog()
    rec = recommend(_answers(args, catalog), catalog)
    failed = EXIT_USAGE if args.strict and rec.warnings else 0
    settings = _template_settings(rec.top.strategy.template, rec.answers, catalog)
    if args.json:
        _print_json({**rec.to_json(), "template_settings": [s.to_json() for s in settings]})
        return failed
    top, close = rec.top, rec.close_call
    name = f"{top.strategy.name} ({top.strategy.id})"
    if not top.allowed:
        print(f"No strategy fits these answers as given (see Conflicting answers); the closest: {name}")
    elif close is None:
        print(f"Recommended: {name}, score {top.score:g}")
    else:
        other = catalog.strategy(close.runner_up)
        lead = "ties with" if close.margin == 0 else f"leads by {close.margin:g} point{'s' * (close.margin != 1)} over"
        print(f"Close call: {name}, score {top.score:g}, {lead} {other.name} ({other.id})")
    print(_wrap(top.strategy.summary, "  "))
    for line in top.because:
        print(_bullet(line, "  ", "+ "))
    for line in top.against:
        print(_bullet(f"against: {line}", "  ", "- "))
    for line in top.ruled_out:
        print(_bullet(f"ruled out: {line}", "  ", "! "))

    if rec.warnings:
        print("\nConflicting answers (check these first; --strict exits 2):")
        for w in rec.warnings:
            print(_bullet(w.message))
            print(f"    revisit: {', '.join(w.revisit)}" + (f"  ({w.reference})" if w.reference else ""))
    if close is not None:
        print(f"\nClose call (a lead under {close.threshold:g} points). What would settle it:")
        if not close.settle:
            print("  - no single answer settles it: weigh the two against each other (advisor explain ID)")
        by_question: dict[str, list[str]] = {}
        for s in close.settle:
            outcome = (catalog.strategy(s.would_pick).name if s.would_pick != top.strategy.id
                       else f"{top.strategy.name}, clearly")  # fmt: skip
            by_question.setdefault(s.question, []).append(f"{s.value} → {outcome}")
        answered = {s.question for s in close.settle if s.answered}
        flips = {s.question for s in close.settle if s.would_pick != top.strategy.id}
        ordered = sorted(by_question.items(), key=lambda item: item[0] not in flips)  # changes of pick first
        for question, outcomes in ordered[:6]:
            verb = "revisit" if question in answered else "answer"
            ends = {o.split(" → ", 1)[1] for o in outcomes}
            if len(outcomes) == len(catalog.question(question).values) and len(ends) == 1:
                outcomes = [f"any answer → {ends.pop()}"]
            print(_bullet(f"{verb} {question} ({catalog.question(question).asks}): {'; '.join(outcomes)}"))
        if len(by_question) > 6:
            print(f"  … and {len(by_question) - 6} more questions (--json lists them all)")

    if rec.recipe is not None:
        print("\nThe recovery point, for your answers:")
        print(_bullet(f"Q1 where: {rec.recipe.where}", "  ", ""))
        print(_bullet(f"Q2 how often: {rec.recipe.how_often}", "  ", ""))
        print(_bullet(f"Q3 duplicates and omissions: {rec.recipe.duplicates}", "  ", ""))
        for step in rec.recipe.steps:
            print(_bullet(step))
    if rec.scenario or rec.notes:
        print()
    if rec.scenario:
        print(_wrap(f"Typical case: {rec.scenario.scenario} → {rec.scenario.why}", "  "))
    for note in rec.notes:
        print(_wrap(f"Note: {note}", "  "))

    print("\nRanking:")
    for i, r in enumerate(rec.ranking, 1):
        flag = "  (ruled out)" if r.ruled_out else ""
        print(f"  {i}. {r.strategy.id:<27} {r.score:>5g}  {r.strategy.name}{flag}")
    print("\nWhy not the others:")
    for sid, reasons in rec.why_not.items():
        print(f"  {sid}:")
        for reason in reasons:
            print(_bullet(reason, "    "))
    print("\nPitfalls to check:")
    for p in rec.pitfalls:
        print(_bullet(f"{p.title} → {rec.fix(p)}"))
    if rec.swings:
        print("\nUnanswered questions that would change the pick:")
        for sw in rec.swings:
            print(f"  - {_label(catalog, sw.question, sw.value)} → {sw.would_pick}")
    sid = top.strategy.id
    if settings:
        print("\nTemplate settings for your answers (`advisor generate` applies them; an explicit --set wins):")
        for setting in settings:
            print(_bullet(f"{setting.key} = {setting.value}: {setting.reason}"))
    if _generatable(top.strategy.template):
        print(f"\nNext: advisor generate {top.strategy.template} ./my-job{_generate_options(args, settings)}"
              f"   (or: advisor explain {sid})")
    else:
        print(f"\nNext: advisor explain {sid}   ({top.strategy.name} is not generated by the template yet)")
    return failed


def _template_settings(
    strategy: str, answers: Mapping[str, str], catalog: Catalog, explicit: Mapping[str, object] | None = None
) -> tuple[Setting, ...]:
    """The template answers ``answers`` imply for ``strategy`` (advisor/model/template_settings.py)."""
    from advisor.model.template_settings import settings_for

    return settings_for(strategy, answers, catalog, explicit)


def _generate_options(args: argparse.Namespace, settings: Sequence[Setting]) -> str:
    """How the next command carries the settings: the same answers file when it alone gave the
    answers (`generate --answers` reads it), else one --set flag per setting."""
    from advisor.model.template_settings import flags

    if not any(not s.default for s in settings):
        return ""
    if args.answers and not args.set:
        return f" --answers {shlex.quote(args.answers)}"
    return flags(settings)


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
            print(f"    {c.id:<23} {c.label}")
            print(_wrap(c.help, " " * 28))
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
            "pitfalls": [{"id": p.id, "title": p.title, "problem": p.problem, "fix": p.fix} for p in s.pitfalls],
            "references": s.references, "template": s.template,
            "controls": [{"id": c.id, "question": c.question, "why": c.why, "how_to_check": c.how_to_check,
                          "fix": c.fix, "applies_when": {q: list(v) for q, v in c.applies_when.items()},
                          "reference": c.reference} for c in s.controls],
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
        print(f"  - {p.title}")
        print(_wrap(f"problem: {p.problem}", "      "))
        print(_wrap(f"fix: {p.fix}", "      "))
    if s.controls:
        usage = f"advisor review --current {s.id} --control ID=yes|no|unknown"
        print(f"\nEssential controls (a review asks each: {usage}):")
        for c in s.controls:
            print(f"  - {c.id}: {c.question}")
            print(_wrap(f"check: {c.how_to_check}", "      "))
    print("\nReferences:")
    for ref in s.references:
        print(f"  - {ref}")
    if _generatable(s.template):
        print(f"\nGenerate it: advisor generate {s.template} ./my-job")
    else:
        print(f"\n{s.name} is not generated by the template yet.")
    return 0


def cmd_review(args: argparse.Namespace) -> int:
    from advisor.model.answers import review_input
    from advisor.review.judge import review
    from advisor.review.render import render
    from advisor.safe_write import write_text_safely

    catalog = _catalog()
    context: str | None = args.context
    context_file: str | None = args.context_file
    if context is not None and context.startswith("@"):  # --context @incident.txt, as curl reads a file
        context_file = context[1:]
        context = None
    if context_file:
        from advisor.safe_read import read_text

        try:
            context = read_text(Path(context_file), "context file")
        except AdvisorError as exc:
            raise AdvisorError(f"--context-file cannot be read: {exc}") from None
    given = review_input(
        catalog,
        answers_file=Path(args.answers) if args.answers else None,
        set_flags=args.set or [],
        current=args.current,
        control_flags=args.control or [],
        context=context,
    )
    probe = None
    if args.probe:  # a probe report's figures become evidence in the verification plan
        from advisor.probe.report import evidence_lines, load_report

        probe = evidence_lines(load_report(Path(args.probe)))
    result = review(given.answers, catalog, current=given.current, chosen=args.chosen, context=given.context)
    write_text_safely(Path(args.out), render(result, catalog, title=args.title, probe=probe), force=args.force)
    print(f"wrote {args.out}")
    if result.verdict is not None:
        print(result.verdict.summary)
        for label, group in (("missing", result.missing), ("unknown", result.unknown)):
            if group:
                print(f"  {label}: {', '.join(f.control.id for f in group)}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    import yaml

    from advisor.model.template_questions import validate_answers as validate_template_answers
    from advisor.scaffold.generation import generate, next_commands
    from advisor.scaffold.project import recorded_answer

    data: dict[str, object] = {}
    advice: dict[str, object] = {}  # the advisor's answers in the same file (`advisor recommend --answers`)
    if args.answers:
        from advisor.safe_read import load_yaml

        loaded = load_yaml(Path(args.answers), "template answers file") or {}
        if not isinstance(loaded, dict):
            raise AdvisorError(f"{args.answers}: expected a mapping of template answers (key: value).")
        advice, template = _split_answers(loaded)
        data.update(template)
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise AdvisorError(f"--set {item!r}: expected KEY=VALUE, e.g. --set project_name=nightly-sync.")
        data[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    applied = None
    if advice and not args.no_settings:
        from advisor.model.answers import validate_answers
        from advisor.model.template_settings import apply

        catalog = _catalog()
        answers = validate_answers(advice, catalog, source=str(args.answers))
        validate_template_answers(args.strategy, data, Path(args.dest))  # a bad explicit answer is named first
        applied = apply(_template_settings(args.strategy, answers, catalog, data), data)
        data = applied.data
    generated = generate(args.strategy, Path(args.dest), data, force=args.force)
    print(f"generated {args.strategy} project in {generated.dest} ({len(generated.files)} files)")
    if applied is not None and (applied.applied or applied.overridden):
        print("template settings from your answers (explicit answers win; --no-settings: the template's defaults):")
        for setting in applied.applied:
            print(_bullet(f"{setting.key} = {setting.value}: {setting.reason}"))
        for setting, yours in applied.overridden:
            print(_bullet(f"{setting.key} = {yours} (yours; your answers suggest {setting.value}: {setting.reason})"))
    if generated.removed:
        print(_bullet(f"removed, the earlier variant's files this one does not have: {', '.join(generated.removed)}",
                      "", ""))
    if generated.kept:
        shown = ", ".join(generated.kept[:8]) + (f" and {len(generated.kept) - 8} more" if len(generated.kept) > 8 else "")
        print(_bullet(f"kept, not the template's: {shown}", "", ""))
    print("next:")
    queue = recorded_answer(generated.dest, "input_source") or "cli"  # asked only where a message is work
    for line in next_commands(generated.package, args.dest, args.strategy, queue):
        print(f"  {line}")
    return 0


def _split_answers(loaded: Mapping[object, object]) -> tuple[dict[str, object], dict[str, object]]:
    """(the advisor's answers, the template answers) of one file: the two sets of ids are disjoint;
    `context` and `current` (a review's) are left out."""
    from advisor.model.answers import REVIEW_KEYS

    catalog_ids = set(_catalog().question_ids)
    advice = {str(k): v for k, v in loaded.items() if k in catalog_ids}
    template = {str(k): v for k, v in loaded.items() if k not in catalog_ids and k not in REVIEW_KEYS}
    return advice, template


def cmd_drill(args: argparse.Namespace) -> int:
    from advisor.scaffold import drill

    options = dict(records=args.records, kills=args.kills, seed=args.seed, sigterm=args.sigterm, aim=args.aim)
    if args.json:
        report = drill.run_drill(Path(args.dest), **options)
        _print_json(report)
    else:
        report = {}
        for event in drill.drill_events(Path(args.dest), **options):
            kind = event.get("event")
            if kind == "kill":
                where = f" in window {event['window']}" if event.get("window") else ""
                print(f"kill #{event.get('n')} ({event.get('signal')}){where} at {event.get('done')} records")
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
        for failure in report.get("failures") or []:  # what the drill's judge found, check by check
            print(f"FAILED: {failure.get('check')}: {failure.get('message')}")
    return 0 if report.get("ok") else 1


def cmd_probe(args: argparse.Namespace) -> int:
    from contextlib import closing

    from advisor.probe.runner import ProbeOptions, probe_events, stop_on_sigterm
    from advisor.probe.report import event_line, summary

    options = ProbeOptions(
        run=args.run, verify=args.verify, progress=args.progress, reset=args.reset, cwd=Path(args.cwd),
        kills=args.kills, sigterm=args.sigterm, grace_s=args.grace, min_s=args.min_s, max_s=args.max_s,
        seed=args.seed, timeout_s=args.timeout, baseline=args.baseline, sample_s=args.sample_s,
    )
    options.check()
    out = Path(args.out) if args.out else None
    if out is not None:
        _check_new_file(out, force=args.force)  # before the probe runs, not after minutes of it
    report: dict[str, object] = {}
    from advisor.redact import redact_all

    with stop_on_sigterm(), closing(probe_events(options)) as events:
        for event in map(redact_all, events):  # the job's command or errors may carry a password
            if args.events:
                print(json.dumps(event, ensure_ascii=False), flush=True)
            elif not args.json and (line := event_line(event)) is not None:
                print(line, flush=True)
            if event.get("event") == "report":
                report = {k: v for k, v in event.items() if k != "event"}
    if out is not None:
        from advisor.safe_write import write_text_safely

        write_text_safely(out, json.dumps(report, indent=2, ensure_ascii=False) + "\n", force=args.force)
    if args.json and not args.events:
        _print_json(report)
    elif not args.events:
        print(summary(report))
        if out is not None:
            print(f"wrote {out}\nnext: advisor review --probe {shlex.quote(str(out))} --out decision.md"
                  "   (add --answers FILE: your answers, see advisor questions)")
    return 0 if report.get("ok") else 1


def _check_new_file(path: Path, *, force: bool) -> None:
    from advisor.errors import OutputExistsError

    if path.is_dir():
        raise AdvisorError(f"{path}: is a directory; give a file name such as {path / 'probe.json'}.")
    if path.exists() and not force:
        raise OutputExistsError(f"{path}: already exists. Use --force to overwrite it, or pick another --out.")
    if not (path.parent if str(path.parent) else Path(".")).is_dir():
        raise AdvisorError(f"{path}: the folder {path.parent} does not exist.")


def cmd_inspect(args: argparse.Namespace) -> int:
    from advisor.inspect.report import inspect_dir, render_text

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
    p.add_argument("--title", default="the long-running job", help="what the record is about")
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
    global _catalog_dir
    _catalog_dir = Path(args.catalog) if args.catalog else None
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
