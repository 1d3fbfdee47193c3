"""What the decision engine returns: the ranking with its reasons, close calls, conflicts, the
recipe, and :meth:`Recommendation.to_json` (the shape of ``advisor recommend --json``). Plain data."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from advisor.model.catalog import Pitfall, Scenario, Strategy


@dataclass(frozen=True)
class Reason:
    """One answer's effect on one strategy, as a sentence."""

    question: str
    value: str
    weight: float
    text: str


@dataclass(frozen=True)
class Ranked:
    strategy: Strategy
    score: float
    because: tuple[str, ...]  # the answers that raised the score, strongest first
    against: tuple[str, ...]  # the answers that lowered it, strongest first
    ruled_out: tuple[str, ...] = ()  # why a decisive answer rules it out (empty: allowed)
    reasons: tuple[Reason, ...] = ()  # the answers behind because/against, with their weights

    @property
    def allowed(self) -> bool:
        return not self.ruled_out


@dataclass(frozen=True)
class Swing:
    """An unanswered question whose answer would change the top pick."""

    question: str
    value: str
    would_pick: str


@dataclass(frozen=True)
class Settle:
    """An answer that would settle a close call: it changes the pick or widens the lead."""

    question: str
    value: str
    would_pick: str
    margin: float  # the lead the pick would then have
    answered: bool = False  # True: revisit an answer given (every question was answered)


@dataclass(frozen=True)
class CloseCall:
    runner_up: str
    margin: float
    threshold: float
    settle: tuple[Settle, ...]

    @property
    def tie(self) -> bool:
        return self.margin == 0


def lead_words(margin: float, runner_up: str) -> str:
    """"2 points ahead of X" — or, for a tie, "tied with X" (never "0 points ahead")."""
    if margin == 0:
        return f"tied with {runner_up}"
    return f"{margin:g} point{'' if margin == 1 else 's'} ahead of {runner_up}"


def behind_words(gap: float, leader: str) -> str:
    """"1 point behind X" — or, for a tie, "tied with X" (never "0 points behind")."""
    if gap == 0:
        return f"tied with {leader}"
    return f"{gap:g} point{'' if gap == 1 else 's'} behind {leader}"


@dataclass(frozen=True)
class Warning:
    """A conflict between answers (conflicts.yaml)."""

    id: str
    message: str
    revisit: tuple[str, ...]
    reference: str | None = None
    ignored: tuple[str, ...] = ()  # the answers this conflict makes meaningless: they move no score


@dataclass(frozen=True)
class Recipe:
    """The winner's recovery point, worded for the answers given."""

    where: str
    how_often: str
    duplicates: str
    steps: tuple[str, ...]


@dataclass(frozen=True)
class Recommendation:
    answers: Mapping[str, str]
    ranking: tuple[Ranked, ...]
    why_not: Mapping[str, tuple[str, ...]]  # strategy id → why it ranked below the top
    pitfalls: tuple[Pitfall, ...]  # the top strategy's pitfalls that apply to these answers
    swings: tuple[Swing, ...]
    scenario: Scenario | None  # the typical-case row of the top strategy
    notes: tuple[str, ...]  # advice for mixed cases (from the top strategies' notes)
    unanswered: tuple[str, ...]
    warnings: tuple[Warning, ...] = ()
    close_call: CloseCall | None = None
    recipe: Recipe | None = None
    ignored: tuple[str, ...] = ()  # answers given that a conflict makes meaningless: not scored

    @property
    def top(self) -> Ranked:
        return self.ranking[0]

    @property
    def counted(self) -> dict[str, str]:
        """The answers that count (without the ones a conflict makes meaningless)."""
        return {q: v for q, v in self.answers.items() if q not in self.ignored}

    def ranked(self, strategy_id: str) -> Ranked:
        for r in self.ranking:
            if r.strategy.id == strategy_id:
                return r
        raise KeyError(strategy_id)

    def pitfalls_for(self, strategy_id: str) -> tuple[Pitfall, ...]:
        return tuple(p for p in self.ranked(strategy_id).strategy.pitfalls if p.applies(self.counted))

    def fix(self, pitfall: Pitfall) -> str:
        """The pitfall's fix worded for these answers."""
        return pitfall.fix_for(self.counted)

    def problem(self, pitfall: Pitfall) -> str:
        """The pitfall's problem with examples from the team's own domain and stack."""
        return pitfall.problem_for(self.counted)

    def to_json(self) -> dict[str, Any]:
        close = self.close_call
        recipe = self.recipe
        return {
            "answers": dict(self.answers),
            "top": self.top.strategy.id,
            "ranking": [
                {
                    "strategy": r.strategy.id,
                    "name": r.strategy.name,
                    "granularity": r.strategy.granularity,
                    "score": r.score,
                    "because": list(r.because),
                    "against": list(r.against),
                    "ruled_out": list(r.ruled_out),
                }
                for r in self.ranking
            ],
            "why_not": {k: list(v) for k, v in self.why_not.items()},
            "warnings": [
                {"id": w.id, "message": w.message, "revisit": list(w.revisit), "reference": w.reference,
                 "ignored": list(w.ignored)}
                for w in self.warnings
            ],
            "ignored": list(self.ignored),
            "close_call": None if close is None else {
                "runner_up": close.runner_up,
                "margin": close.margin,
                "threshold": close.threshold,
                "settle": [
                    {"question": s.question, "value": s.value, "would_pick": s.would_pick,
                     "margin": None if math.isinf(s.margin) else s.margin, "answered": s.answered}
                    for s in close.settle
                ],
            },  # fmt: skip
            "recipe": None if recipe is None else {
                "where": recipe.where,
                "how_often": recipe.how_often,
                "duplicates": recipe.duplicates,
                "steps": list(recipe.steps),
            },
            "pitfalls": [
                {"id": p.id, "title": p.title, "problem": self.problem(p), "fix": self.fix(p)} for p in self.pitfalls
            ],
            "swings": [{"question": s.question, "value": s.value, "would_pick": s.would_pick} for s in self.swings],
            "scenario": None if self.scenario is None else {
                "id": self.scenario.id,
                "scenario": self.scenario.scenario,
                "strategy": self.scenario.strategy,
                "why": self.scenario.why,
            },
            "notes": list(self.notes),
            "unanswered": list(self.unanswered),
        }
