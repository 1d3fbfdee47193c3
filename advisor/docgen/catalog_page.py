"""Render the strategy catalog as Markdown (``docs/catalog.md``), so the docs never drift.

``python -m advisor.docgen.catalog_page --write docs/catalog.md`` regenerates it;
``--check docs/catalog.md`` exits 1 when it is stale (the test suite does the same).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from advisor.model.catalog import Catalog, Condition, Fit, Strategy
from advisor.model.loader import load_catalog
from advisor.model.template_questions import generated_strategies

HEADER = "<!-- Generated from strategies/*.yaml by `make docs`; do not edit by hand. -->"


def when(cond: Condition) -> str:
    """``{q: (a, b)}`` → "`q` is `a` or `b`" joined by "and"."""
    return " and ".join(f"`{q}` is " + " or ".join(f"`{v}`" for v in values) for q, values in cond.items())


def controls_section(s: Strategy) -> list[str]:
    """The essential controls a design review asks about (``advisor review --control ID=...``)."""
    if not s.controls:
        return []
    out = ["", "**Essential controls** (what `advisor review --current` asks a team that runs it)", ""]
    for c in s.controls:
        cond = f" *Applies when* {when(c.applies_when)}." if c.applies_when else ""
        ref = f" See {c.reference}" if c.reference else ""
        cases = f" *Worded for the case when* {'; or '.join(when(k.when) for k in c.cases)}." if c.cases else ""
        stands = f" *Takes the answer given for* `{c.stands_in_for}` *when that one does not apply.*" if c.stands_in_for else ""
        words = f"*Why:* {c.why} *Check:* {c.how_to_check} *Fix ({c.effort}):* {c.fix}"
        out.append(f"- `{c.id}` — **{c.question}**{cond} {words}{ref}{cases}{stands}")
    return out


def evidence_section(catalog: Catalog) -> list[str]:
    """The review's ranking rules (``evidence.yaml``): symptom × answers → control weights."""
    ev = catalog.evidence
    if not ev.rules:
        return []
    out = [
        "", "## How the review ranks its findings", "",
        "Each rule below raises some controls when the team saw one of its symptoms (`symptoms`; all",
        "of them when joined by *and*) and its answers hold (an *unless* is ruled out only by an answer",
        "given; *the context says* holds when the team's `context:` has one of those words or phrases,",
        "whole); a control's likelihood is the sum, and the review lists missing controls",
        "first, then unknown ones, likeliest first (ties: the order the strategy declares them).",
        "", "| rule | when the team saw | and | raises | because |", "|---|---|---|---|---|",
    ]  # fmt: skip
    for r in ev.rules:
        seen = (" and " if r.together else " or ").join(f"`{x}`" for x in r.symptoms) or "(anything)"
        weights = ", ".join(f"`{cid}` {w:+g}" for cid, w in r.weights.items())
        said = "the context says " + " or ".join(f'"{w}"' for w in r.words) if r.words else ""
        answers = " ".join(filter(None, [when(r.when), f"unless {when(r.unless)}" if r.unless else "", said]))
        out.append(f"| `{r.id}` | {seen} | {answers or '—'} | {weights} | {r.says} |")
    if ev.keywords:
        out += ["", "Words of the team's `context:` that suggest a symptom it did not answer (the record says so):", ""]
        out += [f"- `{sym}`: " + ", ".join(f'"{w}"' for w in words) for sym, words in ev.keywords.items()]
    if ev.implied:
        out += ["", "Answers the team's stack makes likely where it gave none (the rules only, at half a rule's",
                "weight, as a context word; the record says \"likely with …\"):", ""]
        out += [f"- when {when(i.when)}: " + ", ".join(f"`{q}={v}`" for q, v in i.answers.items()) + f" ({i.says})"
                for i in ev.implied]
    return out


def _gate(strategy: Strategy, fit: Fit) -> str:
    """" (only when `work_shape` is `multi_step_flow`; or …)" for a weight that needs a gate."""
    return f" (only when {'; or '.join(when(c) for c in fit.gate)})" if fit.gate else ""


def stack_words_section(catalog: Catalog) -> list[str]:
    """The [[terms]] texts may name, their default words, and the stacks that reword them."""
    words = catalog.words
    if not words.defaults:
        return []
    out = ["", "## The team's own words", "",
           "A text below that names a term is worded for the answers (`strategies/stack-words.yaml`):",
           "per term, the first stack whose condition holds and that rewords it; else the default",
           "printed here, true for any stack.", "", "| term | default words |", "|---|---|"]  # fmt: skip
    out += [f"| `[[{term}]]` | {text} |" for term, text in words.defaults.items()]
    out += ["", "| stack | when | terms it rewords |", "|---|---|---|"]
    out += [f"| `{s.id}` | {when(s.when)} | {', '.join(f'`{t}`' for t in s.words)} |" for s in words.stacks]
    return out


def render(catalog: Catalog) -> str:
    out = [HEADER, "", "# The strategy catalog", ""]
    out += ["| id | strategy | recovery granularity |", "|---|---|---|"]
    out += [f"| `{s.id}` | {s.name} | {s.granularity} |" for s in catalog.strategies]
    out += ["", "## Typical cases", "", "| scenario | strategy | why | typical answers |", "|---|---|---|---|"]
    for row in catalog.scenarios:
        answers = ", ".join(f"`{q}={v}`" for q, v in row.answers.items())
        out.append(f"| {row.scenario} | `{row.strategy}` | {row.why} | {answers} |")
    out += [
        "", "## How the decision is made", "",
        "Each strategy's `avoid_when` entries that carry a condition **rule it out** when the condition",
        "holds: a ruled-out strategy ranks below every allowed one, whatever its points. Among the",
        "allowed strategies the score is the prior plus each answer's weight; ties go to the simpler",
        f"strategy. A lead under **{catalog.close_call_margin:g} points** is a close call, flagged with the",
        "unanswered question that would settle it. See [decision-model.md](decision-model.md).",
        "", "## Conflicting answers", "",
        "An answer in the last column is meaningless while the conflict holds: it moves no score.",
        "", "| when | message | revisit | not scored |", "|---|---|---|---|",
    ]  # fmt: skip
    out += [
        f"| {when(c.when)} | {c.message} | {', '.join(f'`{q}`' for q in c.revisit)} |"
        f" {', '.join(f'`{q}`' for q in c.ignore)} |"
        for c in catalog.conflicts
    ]
    out += stack_words_section(catalog)
    out += evidence_section(catalog)
    out += ["", "## Questions", ""]
    for q in catalog.questions:
        several = " *Several values (a list).*" if q.multiple else ""
        out += [f"### `{q.id}` — {q.asks}", "", q.help + several, ""]
        out += [f"- `{c.id}` — {c.label}. {c.help}" for c in q.choices]
        out.append("")
    for s in catalog.strategies:
        out += [f"## `{s.id}` — {s.name}", "", f"*Recovery granularity: {s.granularity}.* {s.summary}", ""]
        rp = s.recovery_point
        out += [
            f"- **Q1 where is the recovery point stored?** {rp.where}",
            f"- **Q2 how often is it recorded?** {rp.how_often}",
            f"- **Q3 how are duplicates and omissions avoided?** {rp.duplicates}",
            "",
        ]
        for title, items in (("Use it when", s.when_to_use), ("Avoid it when", s.avoid_when),
                             ("Pros", s.pros), ("Cons", s.cons), ("Costs", s.costs)):  # fmt: skip
            out += [f"**{title}**", ""] + [f"- {i}" for i in items] + [""]
        if s.rules:
            out += ["**Ruled out when**", ""] + [f"- {when(r.when)}: {r.say}" for r in s.rules] + [""]
        if s.recipes:
            out += ["**The recipe for particular answers** (the first case that holds sets each part)", ""]
            for case in s.recipes:
                parts = [f"*{name}:* {text}" for name, text in
                         (("where", case.where), ("how often", case.how_often), ("duplicates", case.duplicates)) if text]
                parts += [f"*step:* {step}" for step in case.steps]
                out.append(f"- when {when(case.when)} — " + " ".join(parts))  # fmt: skip
            out.append("")
        out += ["**Pitfalls**", ""]
        for p in s.pitfalls:
            out.append(f"- **{p.title}** {p.problem} *Fix:* {p.fix}")
            out += [f"  - when {when(c.when)}: {c.fix}" for c in p.fix_cases]
        out += ["", "**How answers move its score**", "", "| answer | weight | why |", "|---|---|---|"]
        out += [f"| `{f.question}={f.value}` | {f.score:+g}{_gate(s, f)} | {f.why} |" for f in s.fits]
        if s.prior:
            out.append(f"| (prior) | {s.prior:+g} | {s.prior_why} |")
        out += controls_section(s)
        out += ["", "**References**", ""] + [f"- {r}" for r in s.references]
        if s.template in generated_strategies():
            out += ["", f"Generate it: `advisor generate {s.template} ./my-job`", ""]
        else:
            out += ["", "Not generated by the template yet.", ""]
    return "\n".join(out)


def write_or_check(render_docs: Callable[[Catalog], str], argv: list[str] | None, doc: str | None) -> int:
    """``--write FILE`` renders the page; ``--check FILE`` exits 1 when the file is stale."""
    parser = argparse.ArgumentParser(description=doc)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="FILE")
    group.add_argument("--check", metavar="FILE")
    args = parser.parse_args(argv)
    text = render_docs(load_catalog())
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
        return 0
    current = Path(args.check).read_text(encoding="utf-8") if Path(args.check).exists() else ""
    if current != text:
        print(f"{args.check} is stale: run `make docs`", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    return write_or_check(render, argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
