"""The decision: answers + catalog → a ranked recommendation. Pure: no I/O, no UI.

Each strategy's score is its prior plus, for every answered question, the weight the catalog
gives that answer (``fit`` in the strategy's YAML). The weights carry their reasons, so every
ranking explains itself: positive weights become the "because" lines, negative ones the
"against" lines, and the gap to the winner becomes "why not". Ties go to the simpler strategy
(the catalog's ``order``), following the seed's advice to start simple.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from advisor.catalog import Catalog, Pitfall, Scenario, Strategy


@dataclass(frozen=True)
class Ranked:
    strategy: Strategy
    score: float
    because: tuple[str, ...]  # the answers that raised the score, strongest first
    against: tuple[str, ...]  # the answers that lowered it, strongest first


@dataclass(frozen=True)
class Swing:
    """An unanswered question whose answer would change the top pick."""

    question: str
    value: str
    would_pick: str


@dataclass(frozen=True)
class Recommendation:
    answers: Mapping[str, str]
    ranking: tuple[Ranked, ...]
    why_not: Mapping[str, tuple[str, ...]]  # strategy id → why it ranked below the top
    pitfalls: tuple[Pitfall, ...]  # the top strategy's pitfalls that apply to these answers
    swings: tuple[Swing, ...]
    scenario: Scenario | None  # the seed's scenario-table row of the top strategy
    notes: tuple[str, ...]  # advice for mixed cases (from the top strategies' notes)
    unanswered: tuple[str, ...]

    @property
    def top(self) -> Ranked:
        return self.ranking[0]

    def ranked(self, strategy_id: str) -> Ranked:
        for r in self.ranking:
            if r.strategy.id == strategy_id:
                return r
        raise KeyError(strategy_id)

    def pitfalls_for(self, strategy_id: str) -> tuple[Pitfall, ...]:
        return tuple(p for p in self.ranked(strategy_id).strategy.pitfalls if p.applies(self.answers))

    def to_json(self) -> dict[str, Any]:
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
                }
                for r in self.ranking
            ],
            "why_not": {k: list(v) for k, v in self.why_not.items()},
            "pitfalls": [
                {"id": p.id, "title": p.title, "problem": p.problem, "fix": p.fix, "seed": p.seed}
                for p in self.pitfalls
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


def _contributions(strategy: Strategy, answers: Mapping[str, str]) -> list[tuple[float, str, str]]:
    """(weight, question, reason) for each answer the strategy's fit table mentions."""
    out = []
    for question, value in answers.items():
        fit = strategy.fit(question, value)
        if fit is not None and fit.score:
            out.append((fit.score, question, f"{question}={value}: {fit.why}"))
    return out


def _score(strategy: Strategy, answers: Mapping[str, str]) -> float:
    return strategy.prior + sum(w for w, _, _ in _contributions(strategy, answers))


def _rank(answers: Mapping[str, str], catalog: Catalog) -> list[Strategy]:
    return sorted(catalog.strategies, key=lambda s: (-_score(s, answers), s.order, s.id))


def _ranked(strategy: Strategy, answers: Mapping[str, str]) -> Ranked:
    parts = _contributions(strategy, answers)
    because = [why for w, _, why in sorted(parts, key=lambda p: -p[0]) if w > 0]
    against = [why for w, _, why in sorted(parts, key=lambda p: p[0]) if w < 0]
    if strategy.prior > 0:
        because.append(strategy.prior_why)
    return Ranked(strategy, _score(strategy, answers), tuple(because), tuple(against))


def _why_not(loser: Strategy, winner: Strategy, answers: Mapping[str, str]) -> tuple[str, ...]:
    """The answers where the winner gained most over the loser, in the loser's or winner's words."""
    gaps = []
    for question, value in answers.items():
        lf, wf = loser.fit(question, value), winner.fit(question, value)
        lw, ww = (lf.score if lf else 0.0), (wf.score if wf else 0.0)
        if ww > lw:
            # Prefer the loser's own reason when it names its weakness; else the winner's strength.
            reason = lf.why if lf is not None and lw < 0 else f"{winner.name}: {wf.why}" if wf else ""
            gaps.append((ww - lw, f"{question}={value}: {reason}"))
    if not gaps:
        return (f"ties with {winner.name} on these answers; the simpler option is preferred",)
    return tuple(text for _, text in sorted(gaps, key=lambda g: -g[0])[:3])


def _swings(answers: Mapping[str, str], catalog: Catalog, top: str) -> tuple[Swing, ...]:
    swings = []
    for q in catalog.questions:
        if q.id in answers:
            continue
        for value in q.values:
            pick = _rank({**answers, q.id: value}, catalog)[0].id
            if pick != top:
                swings.append(Swing(q.id, value, pick))
    return tuple(swings)


def recommend(answers: Mapping[str, str], catalog: Catalog) -> Recommendation:
    """Rank every strategy for these (already validated) answers. Same input → same output."""
    answers = {q.id: answers[q.id] for q in catalog.questions if q.id in answers}
    order = _rank(answers, catalog)
    ranking = tuple(_ranked(s, answers) for s in order)
    top = order[0]
    why_not = {s.id: _why_not(s, top, answers) for s in order[1:]}
    notes = tuple(n.say for s in order[:2] for n in s.notes if n.holds(answers))
    scenario = next((row for row in catalog.scenarios if row.strategy == top.id), None)
    return Recommendation(
        answers=answers,
        ranking=ranking,
        why_not=why_not,
        pitfalls=tuple(p for p in top.pitfalls if p.applies(answers)),
        swings=_swings(answers, catalog, top.id),
        scenario=scenario,
        notes=notes,
        unanswered=tuple(q.id for q in catalog.questions if q.id not in answers),
    )
