"""Pilot tests: questions that can no longer change the pick are skipped (and can still be
answered), and the recommendation's conflict and close-call panels jump to their questions.

No async test plugin is installed, so each test drives the app inside ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import OptionList

from advisor.model.catalog import Catalog
from advisor.model.engine import open_questions, recommend
from advisor.tui.app import make_app
from advisor.tui.screens.question import QuestionScreen
from advisor.tui.screens.recommendation import RecommendationScreen

BATCH = {"recovery_point_store": "database", "acceptable_loss": "one_batch", "duration": "hours",
         "work_shape": "record_batch"}  # fmt: skip
# Seconds-long runs of an unbounded stream contradict each other; the pick is also a close call.
CONFLICT = {"recovery_point_store": "local_disk", "acceptable_loss": "one_batch", "duplicate_cost": "harmless",
            "duration": "seconds", "work_shape": "unbounded_stream"}  # fmt: skip


def shown(app, selector: str) -> str:  # type: ignore[no-untyped-def]
    return str(app.screen.query_one(selector).render())


def current_id(app) -> str:  # type: ignore[no-untyped-def]
    screen = app.screen
    assert isinstance(screen, QuestionScreen)
    return screen.session.questions()[screen.index].id


def key_of(catalog: Catalog, question_id: str, value: str | None) -> str:
    if value is None:
        return "0"
    return str([c.id for c in catalog.question(question_id).choices].index(value) + 1)


async def open_recommendation(pilot) -> None:  # type: ignore[no-untyped-def]
    pilot.app.action_recommend()
    await pilot.pause()
    assert isinstance(pilot.app.screen, RecommendationScreen)


def test_questions_that_cannot_change_the_pick_are_skipped_until_asked_for(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("s")
            asked = []
            while isinstance(app.screen, QuestionScreen):
                qid = current_id(app)
                # every stop is a question whose answer can still change the pick
                assert qid in open_questions(app.session.answers, catalog)
                bar = shown(app, "#steps")
                still = [q for q in open_questions(app.session.answers, catalog)
                         if app.session.question_index(q) > app.screen.index]  # fmt: skip
                assert f"{len(still)} more to ask" in bar if still else "the last one to ask" in bar
                asked.append(qid)
                await pilot.press(key_of(catalog, qid, BATCH.get(qid)))
                await pilot.pause()
            assert isinstance(app.screen, RecommendationScreen)
            assert asked[:3] == [q.id for q in catalog.questions if q.group == "recovery_point"]
            skipped = [q.id for q in catalog.questions if q.id not in asked]
            assert skipped, "these answers decide the pick early: some questions must be skipped"
            assert not set(skipped) & set(open_questions(app.session.answers, catalog))

            await pilot.press("escape")  # back to the last question asked; ← walks back over asked ones only
            assert current_id(app) == asked[-1]
            await pilot.press("left")
            assert current_id(app) == asked[-2]
            assert "skipped (a: ask all)" in shown(app, "#steps") and "·" in shown(app, "#steps")

            await pilot.press("a")  # ask all: → now stops at every question, skipped ones included
            assert "asking all" in shown(app, "#steps")
            seen = [current_id(app)]
            while isinstance(app.screen, QuestionScreen):
                await pilot.press("right")
                await pilot.pause()
                if isinstance(app.screen, QuestionScreen):
                    seen.append(current_id(app))
            start = [q.id for q in app.session.questions()].index(asked[-2])
            assert seen == [q.id for q in app.session.questions()][start:]

    asyncio.run(walk())


def test_a_skipped_question_can_be_answered_and_changes_the_answers(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, BATCH, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            skipped = [q for q in app.session.questions() if q.id not in BATCH and q.id not in app.session.open_questions()]
            assert skipped
            await pilot.press("s", "a")  # start, ask all
            while current_id(app) != skipped[0].id:
                await pilot.press("right")
            await pilot.press("1")
            assert app.session.answers[skipped[0].id] == skipped[0].choices[0].id

    asyncio.run(walk())


def test_conflicting_answers_are_named_and_c_revisits_them(catalog: Catalog, tmp_path: Path) -> None:
    rec = recommend(CONFLICT, catalog)
    assert rec.warnings
    revisit = list(dict.fromkeys(q for w in rec.warnings for q in w.revisit))

    async def walk() -> None:
        app = make_app(catalog, CONFLICT, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_recommendation(pilot)
            panel = shown(app, "#conflicts")
            assert "Conflicting answers" in panel
            for qid in revisit:
                assert qid.replace("_", " ") in panel
            assert "c revisits" in panel
            assert rec.warnings[0].message in shown(app, "#why-text")

            await pilot.press("c")
            assert isinstance(app.screen, QuestionScreen) and app.screen.only == tuple(revisit)
            assert current_id(app) == revisit[0] and "revisiting 1 of 2" in shown(app, "#steps")
            await pilot.press("3")  # duration: hours or more — no longer a seconds-long stream
            assert current_id(app) == revisit[1]
            await pilot.press("escape")  # straight back to the recommendation, recomputed
            assert isinstance(app.screen, RecommendationScreen)
            assert app.session.answers["duration"] == "hours"
            assert not app.screen.query_one("#conflicts").display
            await pilot.press("c")  # nothing to revisit: the key does nothing
            assert isinstance(app.screen, RecommendationScreen)

    asyncio.run(walk())


def test_a_close_call_says_what_settles_it_and_s_jumps_there(catalog: Catalog, tmp_path: Path) -> None:
    rec = recommend(CONFLICT, catalog)
    assert rec.close_call is not None and rec.close_call.settle
    settle = rec.close_call.settle[0]

    async def walk() -> None:
        app = make_app(catalog, CONFLICT, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_recommendation(pilot)
            verdict, panel = shown(app, "#verdict"), shown(app, "#close-call")
            assert "close call" in verdict
            assert "Close call" in panel and catalog.strategy(rec.close_call.runner_up).name in panel
            assert settle.question.replace("_", " ") in panel and "s settles it" in panel
            await pilot.press("s")
            assert isinstance(app.screen, QuestionScreen) and current_id(app) == settle.question
            await pilot.press(key_of(catalog, settle.question, settle.value), "escape")
            await pilot.pause()
            assert isinstance(app.screen, RecommendationScreen)
            assert app.session.answers[settle.question] == settle.value
            top = app.screen.query_one("#ranking", OptionList).get_option_at_index(0).id
            assert top == settle.would_pick == recommend(app.session.answers, catalog).top.strategy.id

    asyncio.run(walk())


@pytest.mark.parametrize("width", [80, 100])
def test_strategy_names_are_never_truncated(width: int, catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, {"work_shape": "unbounded_stream"}, workdir=tmp_path)
        async with app.run_test(size=(width, 24)) as pilot:
            await open_recommendation(pilot)
            ranking = app.screen.query_one("#ranking", OptionList)
            room = ranking.scrollable_content_region.width
            for i, strategy in enumerate(recommend({"work_shape": "unbounded_stream"}, catalog).ranking):
                prompt = str(ranking.get_option_at_index(i).prompt)
                assert strategy.strategy.name in prompt and len(prompt) <= room, (prompt, room)
            assert catalog.strategy("stream-checkpoint").name in shown(app, "#verdict").replace("\n", " ")

    asyncio.run(walk())


def test_the_why_tab_shows_against_lines_rule_outs_and_the_recipe_for_the_answers(catalog: Catalog, tmp_path: Path) -> None:
    rec = recommend(CONFLICT, catalog)

    async def walk() -> None:
        app = make_app(catalog, CONFLICT, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_recommendation(pilot)
            why = " ".join(shown(app, "#why-text").split())
            for line in rec.top.against:
                assert " ".join(line.split()) in why
            assert rec.recipe is not None and " ".join(rec.recipe.where.split()) in why
            ruled = next(r for r in rec.ranking if r.ruled_out)
            ids = [r.strategy.id for r in rec.ranking]
            await pilot.press(*["down"] * ids.index(ruled.strategy.id))
            why = " ".join(shown(app, "#why-text").split())
            assert "Ruled out by your answers" in why and " ".join(ruled.ruled_out[0].split()) in why

    asyncio.run(walk())


def test_when_every_strategy_is_ruled_out_the_headline_says_so(catalog: Catalog, tmp_path: Path) -> None:
    answers = {"recovery_point_store": "nowhere", "acceptable_loss": "nothing", "work_shape": "unbounded_stream"}
    rec = recommend(answers, catalog)
    if rec.top.allowed:
        pytest.skip("these answers no longer rule out every strategy")

    async def walk() -> None:
        app = make_app(catalog, answers, workdir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_recommendation(pilot)
            verdict = " ".join(shown(app, "#verdict").split())
            assert "No strategy fits these answers" in verdict and rec.top.strategy.name in verdict
            assert "Recommended" not in verdict
            assert app.screen.query_one("#conflicts").display

    asyncio.run(walk())


def test_with_no_answers_the_tui_claims_no_typical_case(catalog: Catalog, tmp_path: Path) -> None:
    async def walk() -> None:
        app = make_app(catalog, {}, workdir=tmp_path)
        async with app.run_test(size=(100, 30)) as pilot:
            await open_recommendation(pilot)
            caption = shown(app, "#scenario-caption")
            assert "Your answers match" not in caption and "No row matches" in caption

    asyncio.run(walk())
