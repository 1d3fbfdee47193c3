"""``advisor recommend``, ``questions``, ``strategies`` and ``explain``: the catalog and the decision, as text or JSON."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from advisor.commands.common import answers_for, bullet, catalog_for, print_json, wrap
from advisor.errors import EXIT_USAGE, AdvisorError

if TYPE_CHECKING:
    from advisor.model.catalog import Catalog
    from advisor.model.template_settings import Setting


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
    from advisor.model.template_settings import settings_for

    catalog = catalog_for(args)
    rec = recommend(answers_for(args, catalog), catalog)
    failed = EXIT_USAGE if args.strict and rec.warnings else 0
    settings = settings_for(rec.top.strategy.template, rec.answers, catalog)  # what `generate` would be told
    if args.json:
        from advisor.model.catalog import answer_values

        data = rec.to_json()
        data["answers"] = {  # a multiple-value answer as a list, as an answers file writes it
            q: list(answer_values(rec.answers, q)) if catalog.question(q).multiple else v for q, v in rec.answers.items()
        }
        print_json({**data, "template_settings": [s.to_json() for s in settings]})
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
    print(wrap(top.strategy.summary, "  "))
    for line in top.because:
        print(bullet(line, "  ", "+ "))
    for line in top.against:
        print(bullet(f"against: {line}", "  ", "- "))
    for line in top.ruled_out:
        print(bullet(f"ruled out: {line}", "  ", "! "))

    if rec.warnings:
        print("\nConflicting answers (check these first; --strict exits 2):")
        for w in rec.warnings:
            print(bullet(w.message))
            print(f"    revisit: {', '.join(w.revisit)}" + (f"  ({w.reference})" if w.reference else ""))
            if w.ignored:
                print(f"    not scored while this holds: {', '.join(w.ignored)}")
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
            print(bullet(f"{verb} {question} ({catalog.question(question).asks}): {'; '.join(outcomes)}"))
        if len(by_question) > 6:
            print(f"  … and {len(by_question) - 6} more questions (--json lists them all)")

    if rec.recipe is not None:
        print("\nThe recovery point, for your answers:")
        print(bullet(f"Q1 where: {rec.recipe.where}", "  ", ""))
        print(bullet(f"Q2 how often: {rec.recipe.how_often}", "  ", ""))
        print(bullet(f"Q3 duplicates and omissions: {rec.recipe.duplicates}", "  ", ""))
        for step in rec.recipe.steps:
            print(bullet(step))
    if rec.scenario or rec.notes:
        print()
    if rec.scenario:
        print(wrap(f"Typical case: {rec.scenario.scenario} → {rec.scenario.why}", "  "))
    for note in rec.notes:
        print(wrap(f"Note: {note}", "  "))

    print("\nRanking:")
    for i, r in enumerate(rec.ranking, 1):
        flag = "  (ruled out)" if r.ruled_out else ""
        print(f"  {i}. {r.strategy.id:<27} {r.score:>5g}  {r.strategy.name}{flag}")
    print("\nWhy not the others:")
    for sid, reasons in rec.why_not.items():
        print(f"  {sid}:")
        for reason in reasons:
            print(bullet(reason, "    "))
    print("\nPitfalls to check:")
    for p in rec.pitfalls:
        print(bullet(f"{p.title} → {rec.fix(p)}"))
    if rec.swings:
        print("\nUnanswered questions that would change the pick:")
        for sw in rec.swings:
            print(f"  - {_label(catalog, sw.question, sw.value)} → {sw.would_pick}")
    sid = top.strategy.id
    if settings:
        print("\nTemplate settings for your answers (`advisor generate` applies them; an explicit --set wins):")
        for setting in settings:
            print(bullet(f"{setting.key} = {setting.value}: {setting.reason}"))
    if _generatable(top.strategy.template):
        print(f"\nNext: advisor generate {top.strategy.template} ./my-job{_generate_options(args, settings)}"
              f"   (or: advisor explain {sid})")
    else:
        print(f"\nNext: advisor explain {sid}   ({top.strategy.name} is not generated by the template yet)")
    return failed


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
    catalog = catalog_for(args)
    if args.json:
        print_json([
            {"id": q.id, "group": q.group, "multiple": q.multiple, "asks": q.asks, "help": q.help,
             "values": [{"id": c.id, "label": c.label, "help": c.help} for c in q.choices]}
            for q in catalog.questions
        ])  # fmt: skip
        return 0
    print("Write an answers file as YAML, one `question_id: value` per line (leave out what you don't know);")
    print("a question marked 'several values' takes a list: `symptoms: [work_lost, duplicate_effect]`.\n")
    groups = {"recovery_point": "recovery point", "trait": "trait", "evidence": "evidence, for the review"}
    for q in catalog.questions:
        several = "; several values" if q.multiple else ""
        print(f"{q.id}  ({groups.get(q.group, q.group)}{several})")
        print(f"  {q.asks}")
        print(wrap(q.help, "  "))
        for c in q.choices:
            print(f"    {c.id:<23} {c.label}")
            print(wrap(c.help, " " * 28))
        print()
    return 0


def cmd_strategies(args: argparse.Namespace) -> int:
    catalog = catalog_for(args)
    if args.json:
        print_json([
            {"id": s.id, "name": s.name, "granularity": s.granularity, "summary": s.summary, "template": s.template}
            for s in catalog.strategies
        ])  # fmt: skip
        return 0
    for s in catalog.strategies:
        print(f"{s.id:<27} {s.granularity:<7} {s.name}")
    print("\nMore: advisor explain ID")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    catalog = catalog_for(args)
    if args.strategy not in catalog.strategy_ids:
        raise AdvisorError(f"unknown strategy {args.strategy!r}. Valid: {', '.join(catalog.strategy_ids)}.")
    s = catalog.strategy(args.strategy)
    if args.json:
        print_json({
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
    print(wrap(s.summary, ""))
    print("\nRecovery point:")
    print(wrap(f"Q1 where stored: {s.recovery_point.where}", "  "))
    print(wrap(f"Q2 how often: {s.recovery_point.how_often}", "  "))
    print(wrap(f"Q3 duplicates and omissions: {s.recovery_point.duplicates}", "  "))
    for title, items in (("Use it when", s.when_to_use), ("Avoid it when", s.avoid_when),
                         ("Pros", s.pros), ("Cons", s.cons), ("Costs", s.costs)):  # fmt: skip
        print(f"\n{title}:")
        for item in items:
            print(f"  - {item}")
    print("\nPitfalls:")
    for p in s.pitfalls:
        print(f"  - {p.title}")
        print(wrap(f"problem: {p.problem}", "      "))
        print(wrap(f"fix: {p.fix}", "      "))
    if s.controls:
        usage = f"advisor review --current {s.id} --control ID=yes|no|unknown"
        print(f"\nEssential controls (a review asks each: {usage}):")
        for c in s.controls:
            print(f"  - {c.id}: {c.question}")
            print(wrap(f"check: {c.how_to_check}", "      "))
    print("\nReferences:")
    for ref in s.references:
        print(f"  - {ref}")
    if _generatable(s.template):
        print(f"\nGenerate it: advisor generate {s.template} ./my-job")
    else:
        print(f"\n{s.name} is not generated by the template yet.")
    return 0
