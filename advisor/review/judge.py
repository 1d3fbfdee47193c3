"""Design review: turn answers (and the current design) into a decision record (Markdown, MADR).

A review is for a team that already runs something. It leads with **findings** — the essential
controls of the current design (``controls:`` in the strategy's YAML) that are missing, then
those nobody could vouch for — each with why it matters, how to check it and how to fix it,
worded for the team's answers. Then it says whether the current category fits, how to get from
the current design to the decided one (a migration path: ordered steps, what to keep), how to
prove it (a verification plan for this case), and the MADR sections. Nothing is listed twice.

:func:`review` is pure (answers in, a :class:`~advisor.review.result.Review` out); the plans are
built in :mod:`advisor.review.plan`, the Markdown in :mod:`advisor.review.render`
(:func:`render`); :func:`decision_record` does both. ``advisor.safe_write`` writes the file.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence

from advisor.errors import AnswersError
from advisor.model.answers import CurrentDesign
from advisor.model.catalog import ENGINE_OWNER, EFFORTS, Catalog, Control, Strategy, condition_holds
from advisor.model.engine import recommend
from advisor.model.recommendation import Recommendation, behind_words
from advisor.model.template_settings import settings_for
from advisor.review.plan import (
    NOT_OWNED,
    depends_on_unanswered,
    likely,
    target_design,
    unanswered_conditions,
    verification_plan,
)
from advisor.review.ranking import Likelihood, Seen, rank, symptoms_seen, why_ranked
from advisor.review.render import render
from advisor.review.result import Finding, Review, Verdict
from advisor.review.separate import Separator, separators

# A current strategy within this many points of the top pick is a reasonable fit. Further behind,
# it still fits when nothing in the answers counts against it: the points ahead are then the other
# strategy's strengths, not this design's weakness, and a rewrite would not fix what the team saw
# (a missing control would).
FIT_MARGIN = 2.0


# --- judging -----------------------------------------------------------------------


def _as_design(current: str | CurrentDesign | None, catalog: Catalog) -> CurrentDesign | None:
    if current is None or isinstance(current, CurrentDesign):
        return current
    if current not in catalog.strategy_ids:
        raise AnswersError(f"--current {current!r}: unknown strategy. Valid: {', '.join(catalog.strategy_ids)}.")
    return CurrentDesign(current)


def judge_current(rec: Recommendation, current: str) -> Verdict:
    """Does the team's current category fit these answers, and what do these answers make it risk?"""
    ids = [r.strategy.id for r in rec.ranking]
    if current not in ids:
        raise AnswersError(f"--current {current!r}: unknown strategy. Valid: {', '.join(ids)}.")
    ranked = rec.ranked(current)
    rank = ids.index(current) + 1
    gap = rec.top.score - ranked.score
    ruled_out = tuple(ranked.ruled_out)
    unopposed = not any(r.weight < 0 for r in ranked.reasons)
    fits = not ruled_out and (rank == 1 or gap <= FIT_MARGIN or unopposed)
    name, top = ranked.strategy.name, rec.top.strategy.name
    if ruled_out and rank == 1:
        summary = f"{name} does not fit: these answers rule out every strategy, this one included."
    elif ruled_out:
        summary = f"{name} does not fit: these answers rule it out; {top} ranks first."
    elif rank == 1:
        summary = f"{name} is the advisor's top pick for these answers."
    elif fits and gap <= FIT_MARGIN:
        summary = f"{name} ranks {rank} of {len(ids)}, {behind_words(gap, top)}: a reasonable fit."
    elif fits:
        summary = (f"{name} ranks {rank} of {len(ids)}, {behind_words(gap, top)}, but none of these answers"
                   f" counts against it: it fits, and what went wrong is a missing control, not the category.")
    else:
        summary = f"{name} does not fit: it ranks {rank} of {len(ids)}, {behind_words(gap, top)}."
    # Only what the answers hold against it: never the winner's strengths reworded, never its
    # pitfalls in general (the findings cover the controls that guard against them). An answer
    # that rules it out is said once, by the rule.
    decided = {q for rule in ranked.strategy.rules if condition_holds(rule.when, rec.answers) for q in rule.when}
    against = tuple(
        r.text for r in sorted(ranked.reasons, key=lambda r: r.weight) if r.weight < 0 and r.question not in decided
    )
    risks = tuple(dict.fromkeys(ruled_out + against))
    return Verdict(current, fits, rank, summary, risks)


def _condition_words(control: Control, answers: Mapping[str, str], catalog: Catalog) -> tuple[str, ...]:
    """The answers that make a control matter here (and that chose its wording), in the questions' labels."""
    case = next((k for k in control.cases if k.holds(answers)), None)
    questions = dict.fromkeys([*control.applies_when, *(case.when if case else ())])
    return tuple(
        f"{catalog.question(q).choice(answers[q]).label} (`{q}={answers[q]}`)" for q in questions if q in answers
    )


def _statuses(design: CurrentDesign, strategy: Strategy, answers: Mapping[str, str]) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """Each control's state; a control the team did not answer takes the answer given for the
    control it stands in for, when that one does not apply to these answers (``stands_in_for``)."""
    states = {c.id: design.status(c.id) for c in strategy.controls}
    stood_in = []
    for c in strategy.controls:
        other = c.stands_in_for
        if other and states[c.id] == "unknown" and states[other] != "unknown" and c.applies(answers) \
                and not strategy.control(other).applies(answers):
            states[c.id] = states[other]
            stood_in.append((c.id, other))
    return states, tuple(stood_in)


def this_week_order(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """The order to patch them: missing ones, then the likely causes (at least half the best
    evidence), each group cheapest first (a setting, then code, then a schema); the rest after.
    Among the rest, those the evidence points at come before those nothing points at. Within a
    group, a fix that matters only under answers not given yet (its "only if") comes after those
    that matter for sure: the team may find it does not apply."""
    best = max((f.score for f in findings), default=0.0)

    def key(f: Finding) -> tuple[bool, bool, bool, bool, int, int]:
        return (f.status != "no", not likely(f.score, best), f.score <= 0, bool(f.only_if),
                EFFORTS.index(f.control.effort), f.number)

    return tuple(sorted(findings, key=key))


def _listed(
    open_: list[Control], states: Mapping[str, str], seen: Seen, answers: Mapping[str, str], catalog: Catalog, current: str
) -> tuple[list[tuple[Control, Likelihood]], tuple[Control, ...]]:
    """(the findings' controls in order, with their likelihoods; the undecided ones left out)."""
    ranked = rank(open_, states, seen, answers, catalog, current)
    undecided = tuple(
        c for c, found in ranked
        if states[c.id] == "unknown" and depends_on_unanswered(c, answers) and found.by_rules_and_precedents <= 0
    )
    return [(c, found) for c, found in ranked if c not in undecided], undecided


def _findings(
    design: CurrentDesign, answers: Mapping[str, str], catalog: Catalog, seen: Seen, context: str | None = None
) -> tuple[tuple[Finding, ...], tuple[Control, ...], tuple[Control, ...], tuple[Control, ...], tuple[tuple[str, str], ...],
           tuple[Separator, ...]]:
    """(findings, in place, not needed, undecided, stood in, separators): every missing or unknown
    control that applies, ranked by the evidence — missing first, then unknown, likeliest first —
    and, when the first two are a close call, the answers not given yet that would tell them apart.

    An unknown control that matters only for answers not given yet is a finding when the evidence
    points at it (a rule, or the fixes of the past incidents with answers like these), with its
    condition named; else it is listed apart (``undecided``). The context's resemblance alone
    never brings one in."""
    strategy = catalog.strategy(design.strategy)
    states, stood_in = _statuses(design, strategy, answers)
    applying = [c for c in strategy.controls if c.applies(answers)]
    not_needed = tuple(c for c in strategy.controls if not c.applies(answers))
    open_ = [c for c in applying if states[c.id] in ("no", "unknown")]
    listed, undecided = _listed(open_, states, seen, answers, catalog, design.strategy)
    stand = dict(stood_in)
    findings = []
    for i, (c, found) in enumerate(listed, 1):
        here = _condition_words(c, answers, catalog)
        if c.id in stand:
            here += (f"your answer for `{stand[c.id]}`, which these answers replace with this control",)
        findings.append(Finding(
            i, c.worded(answers), states[c.id], here, why_ranked(i, states[c.id], found, seen, answers, catalog),
            found.score, unanswered_conditions(c, answers) if depends_on_unanswered(c, answers) else "",
        ))  # fmt: skip
    in_place = tuple(c for c in applying if states[c.id] == "yes")

    def order(given: Mapping[str, str]) -> list[tuple[Control, Likelihood]]:
        return _listed(open_, states, symptoms_seen(given, catalog, context), given, catalog, design.strategy)[0]

    apart = separators(listed, answers, states, catalog, order)
    return tuple(findings), in_place, not_needed, undecided, stood_in, apart


def review(
    answers: Mapping[str, str],
    catalog: Catalog,
    *,
    current: str | CurrentDesign | None = None,
    chosen: str | None = None,
    context: str | None = None,
) -> Review:
    """Judge the current design against these answers (pure; same input → same review)."""
    rec = recommend(answers, catalog)
    if chosen is not None and chosen not in catalog.strategy_ids:
        raise AnswersError(f"--chosen {chosen!r}: unknown strategy. Valid: {', '.join(catalog.strategy_ids)}.")
    design = _as_design(current, catalog)
    verdict = judge_current(rec, design.strategy) if design else None
    owner = rec.answers.get(ENGINE_OWNER)
    if chosen is not None:
        target = rec.ranked(chosen)
    elif design is not None and verdict is not None and (verdict.fits or owner in NOT_OWNED):
        # A fitting category is kept: fix it, don't replace it. An engine the team does not own is
        # kept too: its target is that product's configuration, never a rewrite.
        target = rec.ranked(design.strategy)
    else:
        target = rec.top
    seen = symptoms_seen(rec.answers, catalog, context)
    findings, in_place, not_needed, undecided, stood_in, apart = (
        _findings(design, rec.answers, catalog, seen, context) if design else ((), (), (), (), (), ())
    )
    settings = settings_for(target.strategy.template, rec.answers, catalog)  # what `generate` is told
    steps, keep, to_build = target_design(
        target.strategy, design, findings, in_place, rec, catalog, verdict, settings, owner
    )
    if design is not None and design.strategy != target.strategy.id:  # only what the new design keeps
        kept = {c.id for c in target.strategy.controls}
        still = tuple(f for f in findings if f.control.id in kept)
        in_place_kept = tuple(c for c in in_place if c.id in kept)
    else:
        still, in_place_kept = findings, in_place
    plan = verification_plan(target.strategy, rec.answers, still, in_place_kept, to_build, settings)
    return Review(
        rec, target, design, context, findings, in_place, not_needed, verdict, steps, keep, plan, to_build,
        undecided, this_week_order(findings), seen, owner, stood_in, apart,
    )  # fmt: skip


def decision_record(
    answers: Mapping[str, str],
    catalog: Catalog,
    *,
    current: str | CurrentDesign | None = None,
    chosen: str | None = None,
    title: str | None = None,
    date: _dt.date | None = None,
    context: str | None = None,
    probe: Sequence[str] | None = None,
) -> str:
    """The Markdown decision record. ``chosen`` overrides the decision (the team's choice);
    ``probe``: Markdown lines from a probe of the team's job (``advisor.probe.report.evidence_lines``)."""
    r = review(answers, catalog, current=current, chosen=chosen, context=context)
    return render(r, catalog, title=title, date=date, probe=probe)
