"""Pilot tests: loading an answers file, exporting, and the errors shown instead of tracebacks."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import yaml

from advisor.model.answers import load_answers_file
from advisor.model.catalog import Catalog
from advisor.tui.app import make_app
from advisor.tui.screens.export import ExportScreen
from advisor.tui.screens.recommendation import RecommendationScreen
from advisor.tui.screens.welcome import WelcomeScreen
from textual.widgets import Checkbox, Input


def shown(app, selector: str) -> str:  # type: ignore[no-untyped-def]
    return str(app.screen.query_one(selector).render())


async def load(pilot, path_text: str) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("l")
    pilot.app.screen.query_one("#answers-path", Input).value = path_text
    await pilot.press("enter")
    await pilot.pause()


def test_loading_an_answers_file_shows_its_recommendation(catalog: Catalog, tmp_path: Path) -> None:
    (tmp_path / "job.yml").write_text("work_shape: multi_step_flow\nduration: minutes\n")

    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await load(pilot, "job.yml")  # relative to the working directory
            assert isinstance(app.screen, RecommendationScreen)
            assert app.session.answers == {"work_shape": "multi_step_flow", "duration": "minutes"}
            assert app.screen.rec.top.strategy.id == "state-machine"

    asyncio.run(walk())


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("work_shape: sideways\n", "sideways"),  # an unknown value: the message names it
        ("colour: blue\n", "colour"),  # an unknown question id
        ("work_shape: [unclosed\n", "job.yml"),  # not YAML at all
        (None, "job.yml"),  # no such file
        ("a:\n" + "".join("  " * i + "- \n" for i in range(1, 300)), "nested more than"),  # too deep
        ("a: &a [x, x]\nb: [*a, *a]\n", "aliases"),  # the start of a billion laughs
    ],
)
def test_a_bad_answers_file_is_a_message_and_changes_nothing(
    content: str | None, expected: str, catalog: Catalog, tmp_path: Path
) -> None:
    if content is not None:
        (tmp_path / "job.yml").write_text(content)

    async def walk() -> None:
        app = make_app(catalog, {"audit": "required"}, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await load(pilot, "job.yml")
            assert isinstance(app.screen, WelcomeScreen)
            assert expected in shown(app, "#error")
            assert app.session.answers == {"audit": "required"}

    asyncio.run(walk())


def test_bad_answers_given_to_the_factory_are_shown_not_raised(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, {"work_shape": "sideways"}, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert "sideways" in shown(app, "#error")
            assert app.session.answers == {}

    asyncio.run(walk())


def test_a_broken_catalog_is_shown_on_the_welcome_screen(
    catalog_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import advisor.model.loader
    from advisor.model.loader import load_catalog

    (catalog_copy / "checkpoint.yaml").write_text("name: [broken\n")
    monkeypatch.setattr(advisor.model.loader, "load_catalog", lambda root=None: load_catalog(catalog_copy))

    async def walk() -> None:
        app = make_app(workdir=tmp_path)  # loads the (patched) bundled catalog
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("s")  # nothing to start without a catalog
            assert isinstance(app.screen, WelcomeScreen)
            assert "checkpoint.yaml" in shown(app, "#error")

    with pytest.raises(Exception):
        load_catalog(catalog_copy)  # the premise: this catalog is broken
    asyncio.run(walk())


def test_export_writes_the_decision_record_and_answers(catalog: Catalog, tmp_path: Path) -> None:
    from advisor.review.judge import decision_record

    answers = {"work_shape": "record_batch", "duration": "hours", "recovery_point_store": "database"}

    async def walk() -> None:
        app = make_app(catalog, answers, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            app.action_recommend()
            await pilot.pause()
            await pilot.press("down", "enter", "e")  # choose the runner-up, then export
            assert isinstance(app.screen, ExportScreen)
            chosen = app.session.chosen
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert "Written" in shown(app, "#export-status")
        return chosen

    chosen = asyncio.run(walk())
    record = (tmp_path / "decision-record.md").read_text()
    assert record == decision_record(answers, catalog, chosen=chosen)
    assert load_answers_file(tmp_path / "answers.yml", catalog) == answers
    assert yaml.safe_load((tmp_path / "answers.yml").read_text()) == answers


def test_export_refuses_to_overwrite_until_asked(catalog: Catalog, tmp_path: Path) -> None:
    (tmp_path / "decision-record.md").write_text("ours\n")

    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            app.action_export()
            await pilot.pause()
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert "already exists" in shown(app, "#export-status")
            assert (tmp_path / "decision-record.md").read_text() == "ours\n"
            assert not (tmp_path / "answers.yml").exists()  # nothing half-written
            app.screen.query_one("#force", Checkbox).value = True
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert "Written" in shown(app, "#export-status")

    asyncio.run(walk())
    assert (tmp_path / "decision-record.md").read_text().startswith("# ")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into a read-only folder")
def test_export_to_an_unwritable_folder_is_a_message(catalog: Catalog, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)

    async def walk() -> None:
        app = make_app(catalog, workdir=locked)
        async with app.run_test(size=(80, 24)) as pilot:
            app.action_export()
            await pilot.pause()
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert "cannot write" in shown(app, "#export-status").lower()

    try:
        asyncio.run(walk())
    finally:
        locked.chmod(0o700)


def test_export_onto_a_folder_is_a_message(catalog: Catalog, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()

    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            app.action_export()
            await pilot.pause()
            app.screen.query_one("#record-path", Input).value = "taken"
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert "is a directory" in shown(app, "#export-status")

    asyncio.run(walk())
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]


def test_export_into_a_missing_folder_is_a_message(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            app.action_export()
            await pilot.pause()
            app.screen.query_one("#record-path", Input).value = "no/such/folder/record.md"
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert "does not exist" in shown(app, "#export-status")

    asyncio.run(walk())
    assert list(tmp_path.iterdir()) == []
