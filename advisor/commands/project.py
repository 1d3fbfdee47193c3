"""``advisor generate``, ``drill`` and ``inspect``: a generated project made, crash-drilled and read."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path

from advisor.commands.common import bullet, catalog_for, print_json
from advisor.errors import AdvisorError


def cmd_generate(args: argparse.Namespace) -> int:
    import yaml

    from advisor.model.template_questions import validate_answers as validate_template_answers
    from advisor.scaffold.generation import generate, next_commands, update_commands
    from advisor.scaffold.project import recorded_answer

    data: dict[str, object] = {}
    advice: dict[str, object] = {}  # the advisor's answers in the same file (`advisor recommend --answers`)
    if args.answers:
        from advisor.safe_read import load_yaml

        loaded = load_yaml(Path(args.answers), "template answers file") or {}
        if not isinstance(loaded, dict):
            raise AdvisorError(f"{args.answers}: expected a mapping of template answers (key: value).")
        advice, template = _split_answers(loaded, catalog_for(args).question_ids)
        data.update(template)
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise AdvisorError(f"--set {item!r}: expected KEY=VALUE, e.g. --set project_name=nightly-sync.")
        data[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    applied = None
    if advice and not args.no_settings:
        from advisor.model.answers import validate_answers
        from advisor.model.template_settings import apply, settings_for

        catalog = catalog_for(args)
        answers = validate_answers(advice, catalog, source=str(args.answers))
        validate_template_answers(args.strategy, data, Path(args.dest))  # a bad explicit answer is named first
        applied = apply(settings_for(args.strategy, answers, catalog, data), data)
        data = applied.data
    generated = generate(args.strategy, Path(args.dest), data, force=args.force)
    print(f"generated {args.strategy} project in {generated.dest} ({len(generated.files)} files)")
    if applied is not None and (applied.applied or applied.overridden):
        print("template settings from your answers (explicit answers win; --no-settings: the template's defaults):")
        for setting in applied.applied:
            print(bullet(f"{setting.key} = {setting.value}: {setting.reason}"))
        for setting, yours in applied.overridden:
            print(bullet(f"{setting.key} = {yours} (yours; your answers suggest {setting.value}: {setting.reason})"))
    if generated.removed:
        print(bullet(f"removed, the earlier variant's files this one does not have: {', '.join(generated.removed)}",
                     "", ""))
    if generated.kept:
        shown = ", ".join(generated.kept[:8]) + (f" and {len(generated.kept) - 8} more" if len(generated.kept) > 8 else "")
        print(bullet(f"kept, not the template's: {shown}", "", ""))
    print("next:")
    queue = recorded_answer(generated.dest, "input_source") or "cli"  # asked only where a message is work
    for line in next_commands(generated.package, args.dest, args.strategy, queue):
        print(f"  {line}")
    print("template updates (in the project):")
    for line in update_commands(generated):
        print(f"  {line}")
    return 0


def _split_answers(
    loaded: Mapping[object, object], question_ids: Sequence[str]
) -> tuple[dict[str, object], dict[str, object]]:
    """(the advisor's answers, the template answers) of one file: the two sets of ids are disjoint;
    `context` and `current` (a review's) are left out."""
    from advisor.model.answers import REVIEW_KEYS

    catalog_ids = set(question_ids)
    advice = {str(k): v for k, v in loaded.items() if k in catalog_ids}
    template = {str(k): v for k, v in loaded.items() if k not in catalog_ids and k not in REVIEW_KEYS}
    return advice, template


def cmd_drill(args: argparse.Namespace) -> int:
    from advisor.scaffold import drill

    options = dict(records=args.records, kills=args.kills, seed=args.seed, sigterm=args.sigterm, aim=args.aim,
                   only=args.only, shrink=not args.no_shrink)
    if args.json:
        report = drill.run_drill(Path(args.dest), **options)
        print_json(report)
    else:
        report = {}
        for event in drill.drill_events(Path(args.dest), **options):
            kind = event.get("event")
            if kind == "kill":
                where = f" in window {event['window']}" if event.get("window") else ""
                print(f"kill #{event.get('n')} ({event.get('signal')}){where} at {event.get('done')} records")
            elif kind == "recovered":
                print(f"  recovered in {event.get('ms')} ms")
            elif kind == "fault":  # the schedule's other faults: the service, resubmissions, an outage ...
                print(f"fault #{event.get('n')} {event.get('kind')} at {event.get('done')} records")
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
        shrunk = report.get("shrunk")
        if shrunk:  # the smallest failing schedule found, as one command to rerun while fixing
            print(f"smallest failing schedule ({shrunk.get('check')}): {shrunk.get('records')} records,"
                  f" {shrunk.get('events')} fault(s); rerun it in {args.dest}: {shrunk.get('command')}")
    return 0 if report.get("ok") else 1


def cmd_inspect(args: argparse.Namespace) -> int:
    from advisor.inspect.report import inspect_dir, render_text

    report = inspect_dir(Path(args.dir), Path(args.data_dir) if args.data_dir else None)
    if args.json:
        print_json(report)
    else:
        print(render_text(report))
    return 0
