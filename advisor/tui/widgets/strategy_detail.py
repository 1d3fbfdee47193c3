"""Text blocks that explain one ranked strategy: why, trade-offs, pitfalls."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text

from advisor.tui.session import Session
from advisor.model.recommendation import lead_words
from advisor.tui.widgets.alerts import answer_words


def _section(text: Text, title: str, lines: Iterable[str], bullet: str = "•") -> None:
    items = [line for line in lines if line]
    if not items:
        return
    text.append(f"\n{title}\n", style="bold")
    for line in items:
        text.append(f" {bullet} {line}\n")


def _conflicts(session: Session, rec: Any) -> list[str]:
    out = []
    for w in rec.warnings:
        revisit = "; ".join(answer_words(session, q, rec.answers.get(q)) for q in w.revisit)
        ignored = f" Not scored: {', '.join(w.ignored)}." if w.ignored else ""
        out.append(f"{w.message} Revisit: {revisit}.{ignored}" + (f" See {w.reference}" if w.reference else ""))
    return out


def _close_call(session: Session, rec: Any) -> list[str]:
    close = rec.close_call
    if close is None:
        return []
    runner = session.catalog.strategy(close.runner_up).name
    lead = lead_words(close.margin, runner)
    lines = [f"{lead[0].upper()}{lead[1:]}; a lead under {close.threshold:g} is a close call."]
    by_question: dict[str, list[Any]] = {}
    for settle in close.settle:
        by_question.setdefault(settle.question, []).append(settle)
    for qid, settles in by_question.items():
        question = session.catalog.question(qid)
        by_pick: dict[str, list[str]] = {}
        for settle in settles:
            by_pick.setdefault(settle.would_pick, []).append(settle.value)
        picks = []
        for pick, values in by_pick.items():
            given = [v for v in question.values if v != rec.answers.get(qid)]
            words = "any other answer" if settles[0].answered and values == given else (
                "any answer" if values == list(question.values) else " or ".join(choice_words(question, v) for v in values)
            )  # fmt: skip
            picks.append(f"{words} → {session.catalog.strategy(pick).name}")
        verb = " (revisit your answer)" if settles[0].answered else ""
        lines.append(f"{qid.replace('_', ' ')}{verb}: {'; '.join(picks)}")
    return lines


def choice_words(question: Any, value: str) -> str:
    """A choice's label up to its explanation ("No — it calls no other service" → "no")."""
    try:
        label = str(question.choice(value).name)
    except Exception:  # a value the catalog lacks: show it raw
        return value
    if len(label) > 30:  # a long label: the value's own id reads shorter ("idempotent api")
        return value.replace("_", " ")
    return label if label[1:2].isupper() else label[:1].lower() + label[1:]


def why_text(session: Session, rec: Any, ranked: Any) -> Text:
    """Conflicts and close call (top pick), because/against, rule-outs, the recipe for these answers."""
    from advisor.model.engine import recipe_for

    strategy = ranked.strategy
    is_top = strategy.id == rec.top.strategy.id
    text = Text()
    text.append(strategy.name, style="bold")
    text.append(f"  ({strategy.granularity} level, score {ranked.score:.2f})\n", style="dim")
    text.append(strategy.summary.strip() + "\n")
    if is_top:
        _section(text, "Conflicting answers (c revisits them)", _conflicts(session, rec), bullet="⚠")
        _section(text, "Close call (s settles it): what would settle it", _close_call(session, rec), bullet="≈")
    _section(text, "Ruled out by your answers", ranked.ruled_out, bullet="✕")
    _section(text, "Because", ranked.because)
    _section(text, "Against it", ranked.against, bullet="−")
    if is_top:
        swings = []
        for swing in rec.swings:
            asks = session.catalog.question(swing.question).asks
            value = session.choice_label(swing.question, swing.value)
            swings.append(f"{asks} “{value}” → {session.catalog.strategy(swing.would_pick).name}")
        if rec.close_call is None:
            _section(text, "An open question that would change the pick", swings[:6], bullet="?")
        if not swings:
            open_ids = [q.id for q in session.questions() if q.id not in rec.answers]
            text.append("\nNo open question would change the pick" if open_ids else "\nEvery question is answered", style="bold")
            text.append(f" ({len(open_ids)} left open).\n" if open_ids else ".\n")
    else:
        _section(text, f"Why {rec.top.strategy.name} ranks higher", rec.why_not.get(strategy.id, ()))
    recipe = rec.recipe if is_top and rec.recipe is not None else recipe_for(strategy, rec.answers)
    _section(
        text,
        "Its recovery point, for your answers",
        [f"Q1 where: {recipe.where}", f"Q2 how often: {recipe.how_often}", f"Q3 duplicates: {recipe.duplicates}"],
        bullet="·",
    )
    _section(text, "Steps", recipe.steps, bullet="→")
    _section(text, "Notes", rec.notes, bullet="i")
    return text


def tradeoffs_text(ranked: Any) -> Text:
    s = ranked.strategy
    text = Text()
    text.append(f"{s.name}: trade-offs\n", style="bold")
    _section(text, "Use it when", s.when_to_use)
    _section(text, "Avoid it when", s.avoid_when)
    _section(text, "Pros", s.pros, bullet="+")
    _section(text, "Cons", s.cons, bullet="−")
    _section(text, "Costs", s.costs, bullet="$")
    return text


def pitfalls_text(rec: Any, ranked: Any) -> Text:
    pitfalls = rec.pitfalls_for(ranked.strategy.id)
    text = Text()
    text.append(f"{ranked.strategy.name}: pitfall checklist\n", style="bold")
    if not pitfalls:
        text.append("\nNo catalogued pitfall applies to these answers.\n")
    for pitfall in pitfalls:
        text.append(f"\n☐ {pitfall.title}\n", style="bold")
        text.append(f"   {rec.problem(pitfall).strip()}\n")
        text.append("   fix: ", style="bold green")
        text.append(f"{rec.fix(pitfall).strip()}\n")
    return text
