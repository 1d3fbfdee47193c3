"""Text blocks that explain one ranked strategy: why, trade-offs, pitfalls."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text

from advisor.tui.session import Session


def _section(text: Text, title: str, lines: Iterable[str], bullet: str = "•") -> None:
    items = [line for line in lines if line]
    if not items:
        return
    text.append(f"\n{title}\n", style="bold")
    for line in items:
        text.append(f" {bullet} {line}\n")


def why_text(session: Session, rec: Any, ranked: Any) -> Text:
    """Because/against lines, the strategy's three recovery-point answers, what would swing it."""
    strategy = ranked.strategy
    is_top = strategy.id == rec.top.strategy.id
    text = Text()
    text.append(strategy.name, style="bold")
    text.append(f"  ({strategy.granularity} level, score {ranked.score:.2f})\n", style="dim")
    text.append(strategy.summary.strip() + "\n")
    _section(text, "Because", ranked.because)
    _section(text, "Against it", ranked.against, bullet="−")
    if is_top:
        swings = []
        for swing in rec.swings:
            asks = session.catalog.question(swing.question).asks
            value = session.choice_label(swing.question, swing.value)
            swings.append(f"{asks} “{value}” → {session.catalog.strategy(swing.would_pick).name}")
        _section(text, "An open question that would change the pick", swings, bullet="?")
        if not swings:
            open_ids = [q.id for q in session.questions() if q.id not in rec.answers]
            text.append("\nNo open question would change the pick" if open_ids else "\nEvery question is answered", style="bold")
            text.append(f" ({len(open_ids)} left open).\n" if open_ids else ".\n")
    else:
        _section(text, f"Why {rec.top.strategy.name} ranks higher", rec.why_not.get(strategy.id, ()))
    point = strategy.recovery_point
    _section(
        text,
        "Its recovery point",
        [f"Q1 where: {point.where}", f"Q2 how often: {point.how_often}", f"Q3 duplicates: {point.duplicates}"],
        bullet="·",
    )
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
        text.append(f"   {pitfall.problem.strip()}\n")
        text.append("   fix: ", style="bold green")
        text.append(f"{pitfall.fix.strip()}\n")
    return text
