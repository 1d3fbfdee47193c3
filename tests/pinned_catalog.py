"""The bundled catalog with the past incidents of the first calibration round only.

The review's findings read the past incidents (strategies/precedents.yaml), and every calibration
round adds more; a test about the screens or the record's wording, not about the ranking's data,
reads this one so a new round does not move what it checks.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

import yaml

from advisor.model.catalog import Catalog
from advisor.model.loader import load_catalog

FIRST_ROUND = Path(__file__).resolve().parent / "calibration" / "review_tuned.yaml"


@cache
def first_round_catalog() -> Catalog:
    bundled = load_catalog()
    ids = {row["id"] for row in yaml.safe_load(FIRST_ROUND.read_text(encoding="utf-8"))["incidents"]}
    kept = tuple(p for p in bundled.evidence.precedents if p.id in ids)
    assert kept, "the first calibration round's incidents are past incidents"
    return replace(bundled, evidence=replace(bundled.evidence, precedents=kept))
