"""How far the answers alone can rank the real fix: a ranking learned from the rounds before each one.

The review's ranking rules (strategies/evidence.yaml) were written by hand, round after round,
and each round's held-out part was measured once with the rules of that time (review_figures.yaml,
``blind_rounds``). This script asks whether the answers carry more than the rules take from them.
For each round N from 2 to the last it counts the rows of the rounds before N only, answer by
answer (the review's own tally, advisor/review/tally.py: naive Bayes over each answer, and each
symptom paired with the trigger, the current design and a few traits), ranks each row of round N's
part (as it stood when it was held out) among the findings the review gives that row by that tally
alone, and counts where the real fix lands. Since 2026-12-06 the review adds the same tally, at a
small weight, to its rules and nearest past incidents; here it is measured alone, against the
rules' figures recorded when each round was held out.

    python tests/calibration/learned_ranking.py           # the figures
    python tests/calibration/learned_ranking.py --write   # ... recorded for docs/calibration.md

It reads only the tuned part's rounds (the held-out part stays unopened) and prints, per round and
over all of them, the tally's "first" and "among the first two" beside the rules' figures
recorded when that round was held out.
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from advisor.review import tally

HERE = Path(__file__).resolve().parent


def pairs(answers: dict[str, Any]) -> list[tuple[str, str]]:
    """A row's answers as (question, value) pairs, one per value of a list."""
    return [(key, value) for key, values in answers.items() for value in (values if isinstance(values, list) else [values])]


def rows_by_round() -> dict[int, list[dict[str, Any]]]:
    """Every scored tuned row, by its round, with the review's findings for it (controls unknown)."""
    import review_ranking
    from advisor.model.answers import review_input
    from advisor.model.loader import load_catalog
    from advisor.review.judge import review

    catalog = load_catalog()
    found: dict[int, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for number, path in enumerate(review_ranking.TUNED, 1):
            for row in review_ranking.load_rows(path):
                fix = row["review"]["real_fix"]
                if not fix:
                    continue
                answers_file = Path(tmp) / "answers.yml"
                answers_file.write_text(yaml.safe_dump({**row["answers"], "current": row["review"]["current"]}))
                given = review_input(review_ranking.leave_out(catalog, row["id"]), answers_file=answers_file)
                r = review(given.answers, catalog, current=given.current)
                found.setdefault(number, []).append({
                    "fix": fix, "wanted": {fix, *row["review"].get("also_first", [])},
                    "findings": [f.control.id for f in r.findings],
                    "tokens": tally.tokens(pairs(row["answers"]), row["review"]["current"]),
                    "incident": (pairs(row["answers"]), row["review"]["current"], fix)})
    return found


def position(model: tally.Counts, row: dict[str, Any]) -> int | None:
    ranked = sorted(row["findings"], key=lambda fix: -model.log_odds(fix, row["tokens"]))
    return next((i for i, fix in enumerate(ranked, 1) if fix in row["wanted"]), None)


def main(argv: list[str]) -> int:
    rounds = rows_by_round()
    recorded = {r["round"]: r for r in yaml.safe_load((HERE / "review_figures.yaml").read_text())["blind_rounds"]}
    totals = Counter()
    print("round  rows  learned first / first two   rules when held out: first / first two")
    for number in sorted(rounds)[1:]:
        model = tally.count(row["incident"] for n, rows in rounds.items() if n < number for row in rows)
        places = [position(model, row) for row in rounds[number]]
        first, two = sum(p == 1 for p in places), sum(p is not None and p <= 2 for p in places)
        rules = recorded.get(number - 1, {})  # round N's rows were round N-1's held-out part
        totals.update(rows=len(places), first=first, two=two, rules_first=rules.get("first", 0),
                      rules_two=rules.get("first_two", 0), rules_rows=rules.get("scored", 0))
        print(f"{number:>5}  {len(places):>4}  {first:>6} / {two:<18} {rules.get('first', '-'):>6} / {rules.get('first_two', '-')}")
    print(f"all    {totals['rows']:>4}  {totals['first']:>6} / {totals['two']:<18} {totals['rules_first']:>6} / "
          f"{totals['rules_two']} (of {totals['rules_rows']})")
    if "--write" in argv:  # docs/calibration.md shows it (calibration_docs.py)
        figures = yaml.safe_load((HERE / "review_figures.yaml").read_text(encoding="utf-8"))
        figures["learned"] = {"rows": totals["rows"], "first": totals["first"], "first_two": totals["two"],
                              "rules_first": totals["rules_first"], "rules_first_two": totals["rules_two"],
                              "last_round": max(rounds), "measured": dt.date.today().isoformat()}
        (HERE / "review_figures.yaml").write_text(yaml.safe_dump(figures, sort_keys=False), encoding="utf-8")
        import calibration_docs

        calibration_docs.main(["--write"])
    return 0


if __name__ == "__main__":
    sys.path[:0] = [str(HERE), str(HERE.parents[1])]
    raise SystemExit(main(sys.argv[1:]))
