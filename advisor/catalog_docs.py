"""Render the strategy catalog as Markdown (``docs/catalog.md``), so the docs never drift.

``python -m advisor.catalog_docs --write docs/catalog.md`` regenerates it;
``--check docs/catalog.md`` exits 1 when it is stale (the test suite does the same).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from advisor.catalog import Catalog, load_catalog

HEADER = "<!-- Generated from strategies/*.yaml by `make docs`; do not edit by hand. -->"


def render(catalog: Catalog) -> str:
    out = [HEADER, "", "# The strategy catalog", ""]
    out += ["| id | strategy | recovery granularity |", "|---|---|---|"]
    out += [f"| `{s.id}` | {s.name} | {s.granularity} |" for s in catalog.strategies]
    out += ["", "## The seed's scenario table", "", "| scenario | strategy | why | typical answers |", "|---|---|---|---|"]
    for row in catalog.scenarios:
        answers = ", ".join(f"`{q}={v}`" for q, v in row.answers.items())
        out.append(f"| {row.scenario} | `{row.strategy}` | {row.why} | {answers} |")
    out += ["", "## Questions", ""]
    for q in catalog.questions:
        out += [f"### `{q.id}` — {q.asks}", "", q.help, ""]
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
        out += ["**Pitfalls**", ""]
        for p in s.pitfalls:
            out.append(f"- **{p.title}** (seed {p.seed}). {p.problem} *Fix:* {p.fix}")
        out += ["", "**How answers move its score**", "", "| answer | weight | why |", "|---|---|---|"]
        out += [f"| `{f.question}={f.value}` | {f.score:+g} | {f.why} |" for f in s.fits]
        if s.prior:
            out.append(f"| (prior) | {s.prior:+g} | {s.prior_why} |")
        out += ["", "**References**", ""] + [f"- {r}" for r in s.references]
        out += ["", f"Generate it: `advisor generate {s.template} ./my-job`", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="FILE")
    group.add_argument("--check", metavar="FILE")
    args = parser.parse_args(argv)
    text = render(load_catalog())
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
        return 0
    current = Path(args.check).read_text(encoding="utf-8") if Path(args.check).exists() else ""
    if current != text:
        print(f"{args.check} is stale: run `make docs`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
