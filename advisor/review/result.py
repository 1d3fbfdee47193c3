"""What a review holds, computed once: the findings, the verdict on the current design, the
two tracks (this week's fixes, the target design) and the proof. ``judge.py`` builds a
:class:`Review`, ``plan.py`` and ``render.py`` read it (the TUI too)."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.model.answers import CurrentDesign
from advisor.model.catalog import Control
from advisor.model.recommendation import Ranked, Recommendation
from advisor.review.ranking import Seen
from advisor.review.separate import Separator


@dataclass(frozen=True)
class Finding:
    """One essential control of the current design that is missing (``no``) or ``unknown``."""

    number: int  # 1-based, as printed: the likeliest cause of what the team saw first
    control: Control  # worded for the answers
    status: str  # "no" | "unknown"
    here: tuple[str, ...]  # the answers that make it matter in this case ("several workers (workers=many)")
    ranked: str = ""  # one line: the symptom and the answers that put it where it ranks
    score: float = 0.0  # how well the evidence explains it (the sum of the evidence rules that hold)
    only_if: str = ""  # "`outputs` is `outside_store`": it matters only for an answer not given yet


@dataclass(frozen=True)
class Verdict:
    strategy: str
    fits: bool
    rank: int
    summary: str
    risks: tuple[str, ...]  # only what these answers make it risk (its "against" lines, rule-outs)


@dataclass(frozen=True)
class Review:
    """Everything a decision record says, computed once (the TUI renders the same object)."""

    rec: Recommendation
    target: Ranked  # the strategy decided on (the top pick, or the team's --chosen)
    current: CurrentDesign | None
    context: str | None
    findings: tuple[Finding, ...]  # missing first, then unknown; likeliest first within each
    in_place: tuple[Control, ...]  # current controls answered yes
    not_needed: tuple[Control, ...]  # current controls these answers make irrelevant
    verdict: Verdict | None
    migration: tuple[str, ...]  # the target design's steps (none when the current category is kept)
    keep: tuple[str, ...]
    verification: tuple[str, ...]
    to_build: tuple[Control, ...]  # the target's controls not yet in place (no current: all that apply)
    undecided: tuple[Control, ...] = ()  # unknown, unexplained, and needed only for answers not given yet
    this_week: tuple[Finding, ...] = ()  # the findings in the order to patch them: likely causes, cheapest first
    seen: Seen = Seen()  # the symptoms the ranking read (answered, and suggested by the context)
    owner: str | None = None  # engine_owner: own_code | framework | product (None: not answered)
    stood_in: tuple[tuple[str, str], ...] = ()  # (control, the control whose answer it took) — see Control
    # when findings 1 and 2 are a close call: the open questions whose answer would tell them apart
    separators: tuple[Separator, ...] = ()

    @property
    def missing(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == "no")

    @property
    def unknown(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == "unknown")

    @property
    def rewrites(self) -> bool:
        """Does the target design replace the current category? (Only ever for code the team owns.)"""
        return self.current is not None and self.current.strategy != self.target.strategy.id
