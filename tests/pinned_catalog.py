"""The bundled catalog with its past incidents pinned: those of the first calibration round only,
or none (the evidence rules alone).

The review's findings read the past incidents (strategies/precedents.yaml), and every calibration
round adds more; a test about the screens or the record's wording, not about the ranking's data,
reads one of these so a new round does not move what it checks. A close call a test walks
through is the rules' own: any past incident can end it.
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


def rules_alone(catalog: Catalog | None = None) -> Catalog:
    """The catalog (the bundled one by default) without its past incidents."""
    catalog = catalog or load_catalog()
    return replace(catalog, evidence=replace(catalog.evidence, precedents=()))
