"""The recommendation's two alert panels: conflicting answers and a close call.

Each panel names the questions to revisit (by id, with the answer given) and the key that
jumps there; the full wording is in the Why tab. Plain functions: tested without the app.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from advisor.model.recommendation import lead_words
from advisor.tui.session import Session


def answer_words(session: Session, question_id: str, value: str | None) -> str:
    """"recovery point store = nowhere": the answers-file id in words, and the answer's short label."""
    name = question_id.replace("_", " ")
    if value is None:
        return name
    from advisor.model.engine import short_label

    try:
        return f"{name} = {short_label(session.catalog.question(question_id), value)}"
    except Exception:  # a value the catalog lacks: show it raw
        return f"{name} = {value}"


def revisit_ids(rec: Any) -> tuple[str, ...]:
    """The questions the conflicts name, each once, in the order the conflicts give them."""
    return tuple(dict.fromkeys(q for w in rec.warnings for q in w.revisit))


def settle_ids(rec: Any, limit: int = 3) -> tuple[str, ...]:
    """The questions whose answer would settle the close call (the first few)."""
    if rec.close_call is None:
        return ()
    return tuple(dict.fromkeys(s.question for s in rec.close_call.settle))[:limit]


def conflicts_panel(session: Session, rec: Any) -> Text | None:
    """``⚠ Conflicting answers (c revisits): duration = seconds; work shape = …``"""
    if not rec.warnings:
        return None
    many = f" ({len(rec.warnings)})" if len(rec.warnings) > 1 else ""
    text = Text()
    text.append(f"⚠ Conflicting answers{many}", style="bold")
    text.append(" (c revisits): ")
    text.append("; ".join(answer_words(session, q, rec.answers.get(q)) for q in revisit_ids(rec)) + ".")
    return text


def settle_words(session: Session, settle: Any) -> str:
    pick = session.catalog.strategy(settle.would_pick).name
    verb = "changing your answer to" if settle.answered else ""
    words = answer_words(session, settle.question, settle.value)
    return f"{verb} {words} → {pick}".strip()


def close_call_panel(session: Session, rec: Any) -> Text | None:
    """``≈ Close call: 1 point ahead of X (s settles it): audit = no → X.``"""
    close = rec.close_call
    if close is None:
        return None
    runner = session.catalog.strategy(close.runner_up).name
    text = Text()
    text.append("≈ Close call", style="bold")
    text.append(f": {lead_words(close.margin, runner)}")
    if close.settle:
        text.append(" (s settles it): " + settle_words(session, close.settle[0]) + ".")
    else:
        text.append(". No single answer settles it: compare both in the Why tab.")
    return text
