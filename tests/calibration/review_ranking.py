"""The review's ranking, measured on real incidents (tests/calibration/).

Each row goes through the same path as `advisor review --answers FILE`: an answers file with the
row's answers and `current: <its strategy>` — every control unknown, as a team that does not know
which control it lacks would write it — read by `review_input`, then `review`. Measured:

- where the row's real fix (or its `also_first`) lands among the findings: first, among the first
  two (a row whose real fix is null is reported, not scored);
- whether `advisor recommend`'s top pick is the row's `expert_pick` or its `acceptable` one
  (answers alone), and whether the review's decision is (it also knows the current design: a
  category that fits is kept);
- how many lines its decision record has.

Rows from round 21 on carry `support` (how firmly their thread supports the real fix, as their
writer rated it before any measure): the figures are also given for each rating, so a miss on a
row whose thread leaves another control a fair answer reads as one.

    python tests/calibration/review_ranking.py                 # the tuned part, one line per row
    python tests/calibration/review_ranking.py --write         # ... and record its figures
    python tests/calibration/review_ranking.py --heldout --write   # the held-out part: figures only

The held-out part (tests/calibration/heldout/) was not looked at while the evidence rules were
written; its figures are measured once and recorded, never printed row by row (--rows exists for
a later round that gives the part up as tuning data). tests/calibration/review_figures.yaml holds
the recorded figures and docs/calibration.md shows them (tests/test_review_ranking.py keeps both
true).
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
#: Round 1's rows, and the held-out rows of rounds 1-33, given up as tuning data in rounds 2-34.
TUNED = (HERE / "review_tuned.yaml", HERE / "review_tuned_2.yaml", HERE / "review_tuned_3.yaml",
         HERE / "review_tuned_4.yaml", HERE / "review_tuned_5.yaml",
         HERE / "review_tuned_6.yaml", HERE / "review_tuned_7.yaml", HERE / "review_tuned_8.yaml",
         HERE / "review_tuned_9.yaml", HERE / "review_tuned_10.yaml",
         HERE / "review_tuned_11.yaml",
         HERE / "review_tuned_12.yaml",
         HERE / "review_tuned_13.yaml",
         HERE / "review_tuned_14.yaml",
         HERE / "review_tuned_15.yaml",
         HERE / "review_tuned_16.yaml",
         HERE / "review_tuned_17.yaml",
         HERE / "review_tuned_18.yaml",
         HERE / "review_tuned_19.yaml",
         HERE / "review_tuned_20.yaml",
         HERE / "review_tuned_21.yaml",
         HERE / "review_tuned_22.yaml",
         HERE / "review_tuned_23.yaml",
         HERE / "review_tuned_24.yaml",
         HERE / "review_tuned_25.yaml",
         HERE / "review_tuned_26.yaml",
         HERE / "review_tuned_27.yaml",
         HERE / "review_tuned_28.yaml",
         HERE / "review_tuned_29.yaml",
         HERE / "review_tuned_30.yaml",
         HERE / "review_tuned_31.yaml",
         HERE / "review_tuned_32.yaml",
         HERE / "review_tuned_33.yaml",
         HERE / "review_tuned_34.yaml")
#: Round 34's held-out rows: written by someone who never saw the rules.
HELDOUT = (HERE / "heldout" / "incidents.yaml",)
FIGURES = HERE / "review_figures.yaml"
PARTS = {"tuned": TUNED, "heldout": HELDOUT}


@dataclass(frozen=True)
class Result:
    id: str
    real_fix: str | None
    position: int | None  # 1-based among the findings; None: not a finding (or no real fix)
    findings: int
    pick: str
    accepted: bool
    decided: bool  # the review's decision (its target design) is the expert's pick or the acceptable one
    lines: int
    support: str | None = None  # firm | thin | debatable: the row's writer's rating of its thread


#: The ratings, in the order the figures give them.
SUPPORT = ("firm", "thin", "debatable")


def load_rows(paths: Path | tuple[Path, ...]) -> list[dict[str, Any]]:
    """The rows of one calibration file, or of each of several in turn."""
    rows: list[dict[str, Any]] = []
    for path in (paths,) if isinstance(paths, Path) else paths:
        rows += yaml.safe_load(path.read_text(encoding="utf-8"))["incidents"]
    return rows


def leave_out(catalog: Any, row_id: str) -> Any:
    """The catalog without this row among its precedents (strategies/precedents.yaml holds the
    tuned rows): a row is never compared with itself."""
    evidence = catalog.evidence
    kept = tuple(p for p in evidence.precedents if p.id != row_id)
    if len(kept) == len(evidence.precedents):
        return catalog
    return replace(catalog, evidence=replace(evidence, precedents=kept))


def measure_row(row: dict[str, Any], catalog: Any, workdir: Path, *, with_context: bool = False) -> Result:
    from advisor.model.answers import review_input
    from advisor.review.judge import review
    from advisor.review.render import render

    catalog = leave_out(catalog, row["id"])

    data = {**row["answers"], "current": row["review"]["current"]}
    if with_context and row.get("context"):
        data["context"] = " ".join(str(row["context"]).split())
    path = workdir / f"{row['id']}.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    given = review_input(catalog, answers_file=path)
    r = review(given.answers, catalog, current=given.current, context=given.context)
    fix = row["review"]["real_fix"]
    wanted = {fix, *row["review"].get("also_first", [])} if fix else set()
    position = next((f.number for f in r.findings if f.control.id in wanted), None)
    picks = {row["expert_pick"], *row.get("acceptable", [])}
    accepted, decided = r.rec.top.strategy.id in picks, r.target.strategy.id in picks
    lines = len(render(r, catalog, date=dt.date(2026, 1, 2)).splitlines())
    return Result(row["id"], fix, position, len(r.findings), r.rec.top.strategy.id, accepted, decided, lines,
                  row.get("support"))


def measure(rows: list[dict[str, Any]], catalog: Any, *, with_context: bool = False) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        return [measure_row(row, catalog, Path(tmp), with_context=with_context) for row in rows]


def _placed(scored: list[Result]) -> dict[str, int]:
    return {"scored": len(scored), "first": sum(r.position == 1 for r in scored),
            "first_two": sum(r.position is not None and r.position <= 2 for r in scored)}


def figures(results: list[Result]) -> dict[str, Any]:
    scored = [r for r in results if r.real_fix is not None]
    lines = sorted(r.lines for r in results)
    found = {
        "rows": len(results),
        **_placed(scored),
        "picks_accepted": sum(r.accepted for r in results),
        "decisions_accepted": sum(r.decided for r in results),
        "record_lines": {"median": statistics.median(lines), "max": lines[-1], "over_100": sum(n > 100 for n in lines)},
    }
    rated = {s: _placed([r for r in scored if r.support == s]) for s in SUPPORT}
    if any(f["scored"] for f in rated.values()):
        found["by_support"] = rated
    return found


def summary(name: str, f: dict[str, Any]) -> str:
    n = f["scored"]
    lines = f["record_lines"]
    rated = "".join(f"; {s}: {g['first']}/{g['first_two']} of {g['scored']}"
                    for s, g in f.get("by_support", {}).items() if g["scored"])
    return (
        f"{name}: real fix first {f['first']}/{n}, among the first two {f['first_two']}/{n};"
        f" picks accepted {f['picks_accepted']}/{f['rows']}, decisions {f['decisions_accepted']}/{f['rows']}; record lines median {lines['median']:g},"
        f" max {lines['max']}, over 100: {lines['over_100']}{rated}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heldout", action="store_true", help="measure the held-out part (figures only)")
    parser.add_argument("--rows", action="store_true", help="print one line per row (never for the held-out part)")
    parser.add_argument("--write", action="store_true", help=f"record the figures in {FIGURES.name}")
    args = parser.parse_args(argv)
    from advisor.model.loader import load_catalog

    catalog = load_catalog()
    part = "heldout" if args.heldout else "tuned"
    rows = load_rows(PARTS[part])
    results = measure(rows, catalog)
    with_context = figures(measure(rows, catalog, with_context=True))
    if args.rows or not args.heldout:
        for r in results:
            where = "-" if r.position is None else str(r.position)
            print(f"{r.id[:48]:48} {str(r.real_fix):38} at {where:>2} of {r.findings:<2} pick {r.pick}"
                  f"{'' if r.accepted else ' (not accepted)'}  {r.lines} lines")
    found = figures(results)
    print(summary(part, found))
    print(summary(f"{part}, with the context's words", with_context))
    if args.write:
        recorded = yaml.safe_load(FIGURES.read_text(encoding="utf-8")) if FIGURES.exists() else {}
        recorded[part] = {**found, "with_context": {k: with_context[k] for k in ("first", "first_two")},
                          "measured": dt.date.today().isoformat()}
        if part == "heldout":  # round N's held-out part: the tuned part holds the N parts before it
            blind = [r for r in recorded.get("blind_rounds", []) if r["round"] != len(TUNED)]
            blind.append({"round": len(TUNED), "rows": found["rows"], "scored": found["scored"],
                          **{k: found[k] for k in ("first", "first_two", "picks_accepted", "decisions_accepted")},
                          **({"by_support": found["by_support"]} if "by_support" in found else {})})
            recorded["blind_rounds"] = sorted(blind, key=lambda r: r["round"])
        FIGURES.write_text(yaml.safe_dump(recorded, sort_keys=False), encoding="utf-8")
        import calibration_docs  # this directory is on sys.path when run as a script

        calibration_docs.main(["--write"])
        print(f"recorded in {FIGURES.relative_to(HERE.parents[1])} and docs/calibration.md")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    raise SystemExit(main())
