"""``advisor probe``: crash-drill a team's own job, print its events and verdict, keep the report."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from advisor.commands.common import print_json


def cmd_probe(args: argparse.Namespace) -> int:
    from contextlib import closing

    from advisor.probe.report import event_line, summary
    from advisor.probe.runner import ProbeOptions, probe_events, stop_on_sigterm
    from advisor.redact import redact_all
    from advisor.safe_write import check_new_file, write_text_safely

    options = ProbeOptions(
        run=args.run, verify=args.verify, progress=args.progress, reset=args.reset, cwd=Path(args.cwd),
        kills=args.kills, sigterm=args.sigterm, grace_s=args.grace, min_s=args.min_s, max_s=args.max_s,
        seed=args.seed, timeout_s=args.timeout, baseline=args.baseline, sample_s=args.sample_s,
        power_loss=args.power_loss, data=args.data,
    )
    options.check()
    out = Path(args.out) if args.out else None
    if out is not None:
        check_new_file(out, force=args.force, example="probe.json")  # before the probe runs, not after minutes of it
    report: dict[str, object] = {}
    with stop_on_sigterm(), closing(probe_events(options)) as events:
        for event in map(redact_all, events):  # the job's command or errors may carry a password
            if args.events:
                print(json.dumps(event, ensure_ascii=False), flush=True)
            elif not args.json and (line := event_line(event)) is not None:
                print(line, flush=True)
            if event.get("event") == "report":
                report = {k: v for k, v in event.items() if k != "event"}
    if out is not None:
        write_text_safely(out, json.dumps(report, indent=2, ensure_ascii=False) + "\n", force=args.force)
    if args.json and not args.events:
        print_json(report)
    elif not args.events:
        print(summary(report))
        if out is not None:
            print(f"wrote {out}\nnext: advisor review --probe {shlex.quote(str(out))} --out decision.md"
                  "   (add --answers FILE: your answers, see advisor questions)")
    return 0 if report.get("ok") else 1
