"""What a review holds, computed once: the findings, the verdict on the current design, the
plans. ``judge.py`` builds a :class:`Review`, ``plan.py`` and ``render.py`` read it (the TUI too)."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.model.answers import CurrentDesign
from advisor.model.catalog import Control
from advisor.model.recommendation import Ranked, Recommendation


@dataclass(frozen=True)
class Finding:
    """One essential control of the current design that is missing (``no``) or ``unknown``."""

    number: int  # 1-based, as printed
    control: Control  # worded for the answers
    status: str  # "no" | "unknown"
    here: tuple[str, ...]  # the answers that make it matter in this case ("several workers (workers=many)")


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
    findings: tuple[Finding, ...]  # missing first, then unknown
    in_place: tuple[Control, ...]  # current controls answered yes
    not_needed: tuple[Control, ...]  # current controls these answers make irrelevant
    verdict: Verdict | None
    migration: tuple[str, ...]  # ordered steps
    keep: tuple[str, ...]
    verification: tuple[str, ...]
    to_build: tuple[Control, ...]  # the target's controls not yet in place (no current: all that apply)
    replaced: tuple[Control, ...] = ()  # unknown controls the migration replaces: not worth checking
    undecided: tuple[Control, ...] = ()  # unknown controls that matter only for some answers not given yet

    @property
    def missing(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == "no")

    @property
    def unknown(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == "unknown")
