"""How many kills a generated project's default drill makes: the ``--kills`` asked for, and, with
SIGKILLs (from 2 kills of the job's own; neither ``--sigterm`` nor ``--aim``), one just before each of
a worker's first writes but the chain's own (the template's drill/moments.py, ``WRITES_CUT``); none
on the stream, where each restart is a JVM start (its ``CUT_FIRST_WRITES``)."""

from __future__ import annotations

import re
from pathlib import Path

MOMENTS = Path(__file__).resolve().parents[1] / "templates" / "project" / "src" / "{{package_name}}" / "drill" / "moments.py"


def writes_cut() -> int:
    """STATE_POINT's writes but the chain's own, read from the template (one source of truth)."""
    first, last = re.search(r"^STATE_POINT = \((\d+), (\d+)\)$", MOMENTS.read_text(), re.M).groups()  # type: ignore[union-attr]
    return int(last) - int(first)


def planned_kills(asked: int, strategy: str) -> int:
    """The kills of a default drill with ``--kills asked`` (idempotent or queryable calls)."""
    return asked + (writes_cut() if asked >= 2 and strategy != "stream-checkpoint" else 0)
