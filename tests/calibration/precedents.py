"""Write strategies/precedents.yaml from the tuned calibration rows (never the held-out part).

The review compares a team's answers with these past incidents (advisor/review/ranking.py): the
fixes of the most similar ones break what the evidence rules leave close. Only rows a reviewer gave
a real fix are written, with what the advisor reads (answers, current design, fix) and where the
thread is; summaries stay here.

    python tests/calibration/precedents.py           # exit 1 when the file is out of date
    python tests/calibration/precedents.py --write   # write it
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from review_ranking import TUNED, load_rows  # noqa: E402

TARGET = HERE.parent.parent / "strategies" / "precedents.yaml"

HEADER = """\
# Past incidents the review compares a team's answers with: public issue threads and postmortems
# whose answers, current design (`current`) and real fix (`fix`: the control whose absence a
# senior reviewer found behind the incident) were decided from the thread's own text.
#
# The review ranks the missing and unknown controls by the evidence rules (evidence.yaml) and
# adds to each the share of the most similar past incidents, with the same current design, that
# it fixed: what the rules leave close, the precedents break, and the record names them.
#
# Written by tests/calibration/precedents.py from the tuned calibration rows; the held-out rows,
# which measure the ranking, are never here. Do not edit by hand.
"""


def rows_of(paths: tuple[Path, ...] = TUNED) -> list[dict]:
    out = []
    for row in load_rows(paths):
        fix = row["review"]["real_fix"]
        if fix is None:
            continue
        out.append({"id": row["id"], "source": str(row["source"]), "current": row["review"]["current"],
                    "fix": fix, "answers": row["answers"]})
    return out


def text(rows: list[dict]) -> str:
    # One row a line: a reader scans them, a diff shows the rows that changed.
    lines = [yaml.safe_dump([row], sort_keys=False, default_flow_style=True, width=10_000).strip() for row in rows]
    return HEADER + "precedents:\n" + "".join(f"  - {line[1:-1]}\n" for line in lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {TARGET.name}")
    args = parser.parse_args(argv)
    wanted = text(rows_of())
    if args.write:
        TARGET.write_text(wanted, encoding="utf-8")
        print(f"wrote {TARGET} ({wanted.count(chr(10))} lines)")
        return 0
    if not TARGET.exists() or TARGET.read_text(encoding="utf-8") != wanted:
        print(f"{TARGET} is out of date: python tests/calibration/precedents.py --write")
        return 1
    print(f"{TARGET.name} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
