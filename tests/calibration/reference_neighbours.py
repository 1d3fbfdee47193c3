"""How far do the structured answers alone carry? A reference for the review's ranking.

Each round's held-out part (review_tuned_2.yaml ... in order, then heldout/incidents.yaml) is
ranked by the past incidents alone — the fixes of the seven rows with the most similar answers on
the same design (advisor.review.ranking.similar) — given only the rows of the rounds before it,
as a blind measure would have had them. No evidence rule is read. Compare with the rules'
blind figures in tests/calibration/review_figures.yaml.

    python tests/calibration/reference_neighbours.py
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from review_ranking import HELDOUT, TUNED, load_rows  # noqa: E402


def ranked_by_precedents(row: dict, catalog) -> list[str]:
    from advisor.model.catalog import MULTIPLE_SEPARATOR
    from advisor.review.ranking import similar

    answers = {q: MULTIPLE_SEPARATOR.join(v) if isinstance(v, list) else v for q, v in row["answers"].items()}
    votes: Counter[str] = Counter()
    for weight, precedent in similar(answers, row["review"]["current"], catalog):
        votes[precedent.fix] += weight
    return [fix for fix, _ in votes.most_common()]


def main() -> int:
    from advisor.model.loader import load_catalog

    catalog = load_catalog()
    parts = list(TUNED[1:]) + list(HELDOUT)
    total = [0, 0, 0]
    for k, part in enumerate(parts, 1):
        earlier = {r["id"] for r in load_rows(tuple(TUNED[:k]))}
        known = replace(catalog, evidence=replace(catalog.evidence, precedents=tuple(
            p for p in catalog.evidence.precedents if p.id in earlier)))
        rows = [r for r in load_rows(part) if r["review"]["real_fix"]]
        first = two = 0
        for row in rows:
            wanted = {row["review"]["real_fix"], *row["review"].get("also_first", [])}
            ranked = ranked_by_precedents(row, known)
            first += bool(ranked[:1] and ranked[0] in wanted)
            two += bool(set(ranked[:2]) & wanted)
        print(f"round {k:2} ({part.name}): first {first}/{len(rows)}, among the first two {two}/{len(rows)}")
        total = [total[0] + len(rows), total[1] + first, total[2] + two]
    n, first, two = total
    print(f"all rounds: first {first}/{n} ({first / n:.0%}), among the first two {two}/{n} ({two / n:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
