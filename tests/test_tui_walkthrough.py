"""Pilot tests: the walkthrough from the welcome screen to a recommendation.

No async test plugin is installed, so each test drives the app inside ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from advisor.model.catalog import Catalog
from advisor.model.engine import recommend
from advisor.tui.app import make_app
from advisor.tui.screens.question import QuestionScreen
from advisor.tui.screens.recommendation import RecommendationScreen
from advisor.tui.screens.welcome import WelcomeScreen
from advisor.tui.session import Session
from textual.widgets import OptionList


def key_for(answers: dict[str, str], screen: QuestionScreen) -> str:
    """The number key that gives ``answers``' value to the question on screen (``0``: I don't know)."""
    question = screen.session.questions()[screen.index]
    ids = [c.id for c in question.choices]
    return str(ids.index(answers[question.id]) + 1) if question.id in answers else "0"


async def answer_all(pilot, answers: dict[str, str]) -> list[str]:  # type: ignore[no-untyped-def]
    """Answer each question the walkthrough asks; return the ids it asked, in order."""
    asked = []
    while isinstance(pilot.app.screen, QuestionScreen):
        screen = pilot.app.screen
        asked.append(screen.session.questions()[screen.index].id)
        await pilot.press(key_for(answers, screen))
        await pilot.pause()
    return asked


def ranking_ids(app) -> list[str]:  # type: ignore[no-untyped-def]
    ranking = app.screen.query_one("#ranking", OptionList)
    return [ranking.get_option_at_index(i).id for i in range(ranking.option_count)]


@pytest.mark.parametrize(
    "row",
    ["short-task", "long-batch", "streaming", "multi-step", "audit", "finance"],  # each row of the seed's table
)
def test_number_keys_walk_to_the_scenario_rows_strategy(row: str, catalog: Catalog, tmp_path: Path) -> None:
    scenario = next(s for s in catalog.scenarios if s.id == row)

    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            assert isinstance(app.screen, WelcomeScreen)
            await pilot.press("s")
            assert isinstance(app.screen, QuestionScreen)
            asked = await answer_all(pilot, dict(scenario.answers))
            assert isinstance(app.screen, RecommendationScreen)
            skipped = [q.id for q in catalog.questions if q.id not in asked]
            assert app.session.answers == {q: v for q, v in scenario.answers.items() if q not in skipped}
            # a question is skipped only when its answer could no longer change the pick
            full = recommend(scenario.answers, catalog).top.strategy.id
            assert recommend(app.session.answers, catalog).top.strategy.id == full
            expected = recommend(app.session.answers, catalog)
            assert ranking_ids(app) == [r.strategy.id for r in expected.ranking]
            assert ranking_ids(app)[0] == scenario.strategy
            caption = str(app.screen.query_one("#scenario-caption").render())
            assert scenario.scenario in caption

    asyncio.run(walk())


def test_arrows_enter_back_and_forward_keep_answers(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("s", "down", "down", "enter")  # Q1: the third choice
            q1 = app.session.questions()[0]
            assert app.session.answers == {q1.id: q1.choices[2].id}
            screen = app.screen
            assert isinstance(screen, QuestionScreen) and screen.index == 1
            await pilot.press("right", "right")  # skip two questions without answering
            assert screen.index == 3 and len(app.session.answers) == 1
            steps = str(screen.query_one("#steps").render())
            assert steps.startswith("● ○ ○ │ ◉") and f"question 4 of {len(app.session.questions())}" in steps
            await pilot.press("left", "left", "left")  # back to Q1: its answer is highlighted
            assert screen.index == 0
            assert screen.query_one("#choices", OptionList).highlighted == 2
            await pilot.press("0")  # I don't know: the answer is dropped
            assert app.session.answers == {}
            await pilot.press("escape", "escape")  # back past the first question
            assert isinstance(app.screen, WelcomeScreen)

    asyncio.run(walk())


def test_picking_another_strategy_overrides_the_top_pick(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, {"work_shape": "record_batch", "duration": "hours"}, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("ctrl+p")
            await pilot.press(*"Show the recommendation", "enter")
            await pilot.pause()
            assert isinstance(app.screen, RecommendationScreen)
            ids = ranking_ids(app)
            await pilot.press("down", "enter")
            assert app.session.chosen == ids[1]
            verdict = str(app.screen.query_one("#verdict").render())
            assert "You chose" in verdict
            why = str(app.screen.query_one("#why-text").render())
            assert catalog.strategy(ids[1]).name in why
            await pilot.press("up", "enter")  # the top row again: no override
            assert app.session.chosen is None

    asyncio.run(walk())


def test_revise_from_a_loaded_recommendation_opens_the_first_question(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, {"audit": "required"}, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            app.action_recommend()
            await pilot.pause()
            await pilot.press("r")
            assert isinstance(app.screen, QuestionScreen) and app.screen.index == 0
            assert app.session.answers == {"audit": "required"}  # revising keeps the answers

    asyncio.run(walk())


def test_help_and_quit_work_from_any_screen(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("s", "question_mark")
            assert type(app.screen).__name__ == "HelpScreen"
            await pilot.press("escape")
            assert isinstance(app.screen, QuestionScreen)
            await pilot.press("ctrl+q")
            await pilot.pause()
        assert app.return_code == 0

    asyncio.run(walk())


def test_every_palette_entry_names_an_action_of_the_app() -> None:
    from advisor.tui.app import AdvisorApp
    from advisor.tui.commands import ACTIONS

    assert {action for _, action, _ in ACTIONS} >= {"start", "load", "recommend", "generate", "drill", "export", "help"}
    for _, action, _ in ACTIONS:
        assert callable(getattr(AdvisorApp, f"action_{action}", None)), action


def test_the_palette_opens_the_export_screen(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("ctrl+p", *"Export the decision", "enter")
            await pilot.pause()
            assert type(app.screen).__name__ == "ExportScreen"

    asyncio.run(walk())


def test_q_quits_from_the_recommendation(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            app.action_recommend()
            await pilot.pause()
            assert isinstance(app.screen, RecommendationScreen)
            await pilot.press("q")
            await pilot.pause()
            assert not app.is_running

    asyncio.run(walk())


def test_help_at_80x24_scrolls_visibly(catalog: Catalog, tmp_path: Path) -> None:
    """The help is longer than 24 rows: it shows a scrollbar and ↓ moves it at once."""
    from textual.containers import VerticalScroll

    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("question_mark")
            await pilot.pause()
            help_view = app.screen.query_one("#help", VerticalScroll)
            assert help_view.max_scroll_y > 0 and help_view.show_vertical_scrollbar
            await pilot.press("down", "down", "down")
            await pilot.pause()
            assert help_view.scroll_y > 0

    asyncio.run(walk())
