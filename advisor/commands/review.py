"""``advisor review``: a decision record (Markdown, MADR) for the answers and the current design."""

from __future__ import annotations

import argparse
from pathlib import Path

from advisor.commands.common import catalog_for
from advisor.errors import AdvisorError


def cmd_review(args: argparse.Namespace) -> int:
    from advisor.model.answers import review_input
    from advisor.review.judge import review
    from advisor.review.render import render
    from advisor.safe_write import write_text_safely

    catalog = catalog_for(args)
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
