"""Docs kept true by tests (STYLE.md 12): commands, strategies and questions all documented,
and the catalog reference regenerated whenever the YAML changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.cli import build_parser
from advisor.docgen.catalog_page import render

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _commands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices)


@pytest.mark.parametrize("command", _commands())
def test_every_command_is_in_the_user_guide(command):
    assert f"advisor {command}" in (DOCS / "user-guide.md").read_text()


def test_catalog_reference_is_current(catalog):
    assert (DOCS / "catalog.md").read_text() == render(catalog), "docs/catalog.md is stale: run `make docs`"


def test_every_strategy_and_question_is_documented(catalog):
    guide = (DOCS / "user-guide.md").read_text()
    for sid in catalog.strategy_ids:
        assert f"`{sid}`" in guide, sid
    for qid in catalog.question_ids:
        assert f"`{qid}`" in guide, qid


def test_every_strategy_has_a_section_in_the_generated_strategies_doc(catalog):
    from advisor.model.template_questions import generated_strategies

    text = (DOCS / "strategies-generated.md").read_text()
    for sid in catalog.strategy_ids:
        section = text.split(f"## {sid}\n", 1)
        assert len(section) == 2, f"docs/strategies-generated.md has no section for {sid}"
        body = section[1].split("\n## ", 1)[0]
        if sid in generated_strategies():
            assert "worker" in body.lower(), f"{sid}: say whether several workers are supported"
        else:
            assert "not generated yet" in body.lower(), f"{sid}: say that it is not generated yet"


@pytest.mark.parametrize("value, target, shown", [
    (0.4996, 0.5, "0.4996"),  # would round to the target at 3 digits and read as a false MISSED
    (0.41, 0.5, "0.410"),     # a clear miss keeps 3 digits
])
def test_a_missed_benchmark_target_never_prints_as_the_target(value, target, shown):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from generated import Targets

    targets = Targets()
    assert targets.at_least("ratio", value, target).endswith("MISSED")
    assert targets.missed == [f"ratio: {shown}, target >= {target:g}"]


def test_every_drill_check_is_in_the_generated_project_doc():
    from verdict_checks import check_ids

    guide = (DOCS / "generated-project.md").read_text()
    table = guide[guide.index("| check | fails when |"):]
    for check in check_ids():
        assert f"\n| `{check}` |" in table, f"drill check {check} is not in docs/generated-project.md's check table"
