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
from advisor.model.catalog import Catalog, Control, Strategy, condition_holds
from advisor.model.engine import recommend
from advisor.model.recommendation import Recommendation
from advisor.model.template_settings import settings_for
from advisor.review.plan import depends_on_unanswered, migration_path, verification_plan
from advisor.review.render import render
from advisor.review.result import Finding, Review, Verdict

# A current strategy within this many points of the top pick is a reasonable fit.
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
    fits = not ruled_out and (rank == 1 or gap <= FIT_MARGIN)
    name, top = ranked.strategy.name, rec.top.strategy.name
    if ruled_out and rank == 1:
        summary = f"{name} does not fit: these answers rule out every strategy, this one included."
    elif ruled_out:
        summary = f"{name} does not fit: these answers rule it out; {top} ranks first."
    elif rank == 1:
        summary = f"{name} is the advisor's top pick for these answers."
    elif fits:
        summary = f"{name} ranks {rank} of {len(ids)}, {gap:g} points behind {top}: a reasonable fit."
    else:
        summary = f"{name} does not fit: it ranks {rank} of {len(ids)}, {gap:g} points behind {top}."
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


def _findings(
    design: CurrentDesign, target: Strategy, answers: Mapping[str, str], catalog: Catalog
) -> tuple[tuple[Finding, ...], tuple[Control, ...], tuple[Control, ...], tuple[Control, ...], tuple[Control, ...]]:
    """(findings, in place, not needed, replaced, undecided) — missing first, then unknown.

    When the decision replaces the current strategy, an unknown control the new one does not have
    is not worth checking: it is listed apart (``replaced``), without why / check / fix."""
    strategy = catalog.strategy(design.strategy)
    applying = [c for c in strategy.controls if c.applies(answers)]
    not_needed = tuple(c for c in strategy.controls if not c.applies(answers))
    keeps = {c.id for c in target.controls} if target.id != strategy.id else {c.id for c in applying}
    missing = [c for c in applying if design.status(c.id) == "no"]
    unknown = [c for c in applying if design.status(c.id) == "unknown"]
    migrating = target.id != strategy.id
    # Migrating: an unknown control that matters only for answers not given yet is rebuilt with
    # the new design (it is on its checklist), so it is named with the replaced ones.
    replaced = tuple(
        c for c in unknown if c.id not in keeps or (migrating and depends_on_unanswered(c, answers))
    )
    undecided = tuple(c for c in unknown if c not in replaced and depends_on_unanswered(c, answers))
    unknown = [c for c in unknown if c not in replaced and c not in undecided]
    findings = tuple(
        Finding(i, c.worded(answers), design.status(c.id), _condition_words(c, answers, catalog))
        for i, c in enumerate(missing + unknown, 1)
    )
    in_place = tuple(c for c in applying if design.status(c.id) == "yes")
    return findings, in_place, not_needed, replaced, undecided


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
    if chosen is not None:
        target = rec.ranked(chosen)
    elif design is not None and verdict is not None and verdict.fits:
        target = rec.ranked(design.strategy)  # a fitting category is kept: fix it, don't replace it
    else:
        target = rec.top
    findings, in_place, not_needed, replaced, undecided = (
        _findings(design, target.strategy, rec.answers, catalog) if design else ((), (), (), (), ())
    )
    current_fits = verdict is not None and verdict.fits
    settings = settings_for(target.strategy.template, rec.answers, catalog)  # what `generate` is told
    steps, keep, to_build = migration_path(
        target.strategy, design, findings, in_place, rec.answers, rec, catalog, current_fits, settings
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
        replaced, undecided,
    )


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
