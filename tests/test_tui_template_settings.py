"""Pilot test: the generate form is pre-filled with the template settings the answers imply,
each with its reason, and what the user changes there wins."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import yaml
from textual.widgets import Input, Select, Static

from advisor.model.catalog import Catalog
from advisor.tui.app import make_app
from advisor.tui.screens.generate import GenerateScreen

# Several workers: the state store becomes PostgreSQL (psycopg; SQLite until DATABASE_URL is set).
MANY = {"work_shape": "record_batch", "duration": "hours", "recovery_point_store": "database", "workers": "many"}
# A progress file on local disk: the checkpoint's file variant.
LOCAL = {"work_shape": "record_batch", "duration": "hours", "recovery_point_store": "local_disk", "workers": "one"}


async def open_generate(pilot) -> None:  # type: ignore[no-untyped-def]
    pilot.app.action_recommend()
    await pilot.pause()
    await pilot.press("g")
    await pilot.pause()
    assert isinstance(pilot.app.screen, GenerateScreen)


def test_the_form_shows_the_implied_store_with_its_reason(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, MANY, workdir=tmp_path)
        async with app.run_test(size=(100, 40)) as pilot:
            await open_generate(pilot)
            assert app.screen.query_one("#store-state_store", Select).value == "postgresql"  # template default: sqlite
            reason = str(app.screen.query_one("#reason-state_store", Static).render())
            assert "from your answers" in reason and "several workers" in reason
            # Changed by hand: the reason says what the answers suggested; the user's value is generated.
            app.screen.query_one("#store-state_store", Select).value = "sqlite"
            await pilot.pause()
            assert "your answers suggest postgresql" in str(app.screen.query_one("#reason-state_store", Static).render())
            app.screen.query_one("#dest", Input).value = "mine"
            await pilot.press("ctrl+g")
            deadline = time.monotonic() + 90
            while app.session.generated is None:
                assert time.monotonic() < deadline, str(app.screen.query_one("#gen-status", Static).render())
                await pilot.pause(0.1)

    asyncio.run(walk())
    answers = yaml.safe_load((tmp_path / "mine" / ".copier-answers.yml").read_text())
    assert answers["state_store"] == "sqlite"


def test_the_file_variant_is_prefilled_and_generated(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, LOCAL, workdir=tmp_path)
        async with app.run_test(size=(100, 40)) as pilot:
            await open_generate(pilot)
            assert app.screen.query_one("#store-checkpoint_store", Select).value == "file"
            assert "file on local disk" in str(app.screen.query_one("#reason-checkpoint_store", Static).render())
            assert not app.screen.query("#store-state_store")  # the file variant keeps no database
            app.screen.query_one("#dest", Input).value = "filejob"
            await pilot.press("ctrl+g")
            deadline = time.monotonic() + 90
            while app.session.generated is None:
                assert time.monotonic() < deadline, str(app.screen.query_one("#gen-status", Static).render())
                await pilot.pause(0.1)

    asyncio.run(walk())
    answers = yaml.safe_load((tmp_path / "filejob" / ".copier-answers.yml").read_text())
    assert answers["checkpoint_store"] == "file" and "state_store" not in answers


def test_a_plain_api_prefills_the_effect_kind_and_its_policy(catalog: Catalog, tmp_path: Path) -> None:
    from advisor.model.template_questions import template_questions

    if not any(q.id == "effect_kind" for q in template_questions("checkpoint")):
        import pytest

        pytest.skip("templates/copier.yml does not define effect_kind yet")
    plain = {**MANY, "workers": "one", "external_effects": "plain_api", "duplicate_cost": "unacceptable"}

    async def walk() -> None:
        app = make_app(catalog, plain, workdir=tmp_path)
        async with app.run_test(size=(100, 50)) as pilot:
            await open_generate(pilot)
            assert app.screen.query_one("#store-effect_kind", Select).value == "plain"
            assert app.screen.query_one("#store-plain_policy", Select).value == "at-most-once"
            reason = str(app.screen.query_one("#reason-plain_policy", Static).render())
            assert "listed for a person" in reason and "never repeated" in reason

    asyncio.run(walk())
