"""Every past incident counted answer by answer: for each control, how often it was the fix when a
team gave each of these answers (naive Bayes over ``strategies/precedents.yaml``).

The nearest past incidents (ranking.py, ``similar``) weigh whole profiles: seven incidents whose
answers look most like this one. Many teams' answers match no incident closely, and then what
each answer says alone is lost. The tally reads every incident instead: an answer that went with
one fix far more often than with the others ("held by a lost worker" with a stale claim) counts
for that fix, whatever the rest of the profile.

Each answer counts alone, and each symptom once more beside the answers that say what it means
(the trigger, the design, the shape of the work, where progress and outputs live, the effect's
kind): "work lost" after a planned stop and after a replay point at different controls.

The tally never makes a finding of a control by itself; it moves findings the rules or the
nearest incidents brought in. Its weight was set forward-chained (each round's incidents tallied
only from the rounds before it): docs/calibration.md.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from advisor.model.catalog import SYMPTOMS
from advisor.model.precedent import Precedent

#: Smoothing of the counts: an answer never seen with a fix still leaves it possible.
ALPHA = 0.3
#: The log-odds are divided by this before they are shared out: naive Bayes counts answers that go
#: together (a broker and its runner) as if each were new evidence, so its odds are far too sure.
TEMPERATURE = 3.0
#: What each symptom is read beside: the same symptom means another mechanism with each of them.
PAIRED = ("trigger", "current", "work_shape", "broker", "recovery_point_store", "outputs", "external_effects")


def tokens(pairs: Iterable[tuple[str, str]], current: str) -> list[str]:
    """The answers as counted: each (question, value), the design, and each symptom with each paired answer."""
    given = sorted(set(pairs) | {("current", current)})
    symptoms = [v for q, v in given if q == SYMPTOMS]
    paired = [f"{SYMPTOMS}={s}*{q}={v}" for s in symptoms for q, v in given if q in PAIRED]
    return [f"{q}={v}" for q, v in given] + paired


@dataclass(frozen=True)
class Counts:
    """Per fix: how many past incidents it fixed, and how often each answer came with it."""

    fixes: Mapping[str, int]
    seen: Mapping[str, Mapping[str, int]]
    vocabulary: int

    def log_odds(self, fix: str, counted: Sequence[str]) -> float:
        total = sum(self.seen.get(fix, {}).values())
        n = sum(self.fixes.values())
        prior = math.log((self.fixes.get(fix, 0) + ALPHA) / (n + ALPHA * (len(self.fixes) + 1)))
        return prior + sum(self.term(fix, t, total) for t in counted)

    def term(self, fix: str, token: str, total: int) -> float:
        return math.log((self.seen.get(fix, {}).get(token, 0) + ALPHA) / (total + ALPHA * self.vocabulary))


def count(incidents: Iterable[tuple[Iterable[tuple[str, str]], str, str]]) -> Counts:
    """The counts of (answers as pairs, design, fix) incidents."""
    fixes: Counter[str] = Counter()
    seen: dict[str, Counter[str]] = {}
    vocabulary: set[str] = set()
    for pairs, current, fix in incidents:
        counted = tokens(pairs, current)
        fixes[fix] += 1
        seen.setdefault(fix, Counter()).update(counted)
        vocabulary.update(counted)
    return Counts(fixes, seen, len(vocabulary) + 1)


@lru_cache(maxsize=4)
def counts(precedents: tuple[Precedent, ...]) -> Counts:
    return count((p.features, p.current, p.fix) for p in precedents)


@dataclass(frozen=True)
class Share:
    share: float  # 0..1: this control's part of the tally among the candidates
    telling: str = ""  # the answer that favours it most against the others ("trigger=planned_stop")


def shares(pairs: Iterable[tuple[str, str]], current: str, candidates: Sequence[str],
           precedents: tuple[Precedent, ...]) -> dict[str, Share]:
    """Control id → its share of the tally among ``candidates`` (only controls some past incident
    fixed take part: the others have no record to read)."""
    pairs = set(pairs)
    if not pairs:  # nothing answered: the design's own order stands (tally.py reads answers)
        return {}
    known = counts(precedents)
    counted = tokens(pairs, current)
    scored = {c: known.log_odds(c, counted) for c in candidates if known.fixes.get(c)}
    if not scored:
        return {}
    top = max(scored.values())
    weights = {c: math.exp((v - top) / TEMPERATURE) for c, v in scored.items()}
    total = sum(weights.values())
    even = 1.0 / len(weights)  # what every candidate would get if the answers told nothing
    above = {c: max(0.0, w / total - even) / (1.0 - even) for c, w in weights.items()} if len(weights) > 1 else {}
    return {c: Share(a, _telling(known, c, scored, counted)) for c, a in above.items() if a > 0}


def _telling(known: Counts, fix: str, scored: Mapping[str, float], counted: Sequence[str]) -> str:
    """The answer whose record favours ``fix`` most over the other candidates."""
    others = [c for c in scored if c != fix]
    if not others:
        return ""
    totals = {c: sum(known.seen.get(c, {}).values()) for c in scored}

    def lift(token: str) -> float:
        mine = known.term(fix, token, totals[fix])
        return mine - sum(known.term(c, token, totals[c]) for c in others) / len(others)

    best = max(counted, key=lift)
    return best if lift(best) > 0 else ""
