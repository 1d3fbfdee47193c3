"""The review as Markdown: findings, the fit, this week's fixes, the target design, the
verification plan, then the MADR sections — each thing once (the review's own sections:
:mod:`advisor.review.render_tracks`).

What a user reads stands on its own: the catalog's text cites only public references (tested),
and quoted answers pass through :func:`~advisor.redact.redact`.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from advisor.model.catalog import Catalog, Pitfall
from advisor.model.recommendation import Ranked, lead_words
from advisor.redact import redact
from advisor.review.plan import NOT_OWNED
from advisor.review.render_tracks import answer_words, findings_section, target_section, this_week_section
from advisor.review.title import heading

if TYPE_CHECKING:
    from advisor.review.result import Review

# Pitfalls the verification plan itself answers (it is the crash drill), never listed apart.
ANSWERED_BY_THE_PLAN = ("untested-recovery",)

def _answers_line(r: Review, catalog: Catalog) -> str:
    parts = [answer_words(catalog, q, r.rec.answers) for q in r.rec.answers]
    unanswered = len(catalog.questions) - len(parts)
    tail = f" {unanswered} questions unanswered." if unanswered else ""
    return ("The answers: " + "; ".join(parts) + "." if parts else "No questions answered.") + tail


def _option_line(i: int, ranked: Ranked, r: Review) -> str:
    s = ranked.strategy
    head = f"{i}. **{s.name}** (`{s.id}`, score {ranked.score:g})"
    if ranked.strategy.id == r.target.strategy.id:
        return f"{head} — chosen; see the outcome."
    return f"{head} — {_why_lower(ranked, r)} Good: {_joined(*s.pros)} Bad: {_joined(*s.cons)}"


def _why_lower(ranked: Ranked, r: Review) -> str:
    if ranked.ruled_out:
        return _joined(f"ruled out: {ranked.ruled_out[0]}")
    if ranked.strategy.id == r.rec.top.strategy.id:  # the pick, not decided: the outcome says why
        return "ranks first for these answers, not chosen: the decision keeps another design (see the outcome)."
    return _joined(f"ranked lower: {(r.rec.why_not.get(ranked.strategy.id) or ('behind the top pick',))[0]}")


def _joined(*items: str) -> str:
    """Sentences joined with '; ', one final full stop."""
    return "; ".join(i.rstrip(". ") for i in items) + "."


def _watch(r: Review) -> list[Pitfall]:
    """The target's pitfalls that these answers call out (their conditions hold, not merely
    unanswered) and that no essential control already covers. The rest: `advisor explain`."""
    target = r.target.strategy
    covered = {p for c in target.controls for p in c.covers}
    answers = r.rec.answers
    return [
        p
        for p in r.rec.pitfalls_for(target.id)
        if p.id not in covered
        and p.id not in ANSWERED_BY_THE_PLAN
        and p.applies_when
        and all(answers.get(q) in values for q, values in p.applies_when.items())
    ]


def render(
    r: Review,
    catalog: Catalog,
    *,
    title: str | None = None,
    date: _dt.date | None = None,
    probe: Sequence[str] | None = None,
) -> str:
    """The Markdown record. ``title``: the team's name for the job (else the context's first
    sentence, else the job as the answers describe it). ``probe``: lines from a crash drill of
    the team's own job (``advisor.probe.report.evidence_lines``); they lead the verification plan."""
    s = r.target.strategy
    rec = r.rec
    day = (date or _dt.date.today()).isoformat()
    named = "job_noun" in catalog.words.defaults  # a catalog without stack words names no job
    job = title or (catalog.words.term("job_noun", rec.counted) if named else "the long-running job")
    out = [heading(s.name, title=title, context=r.context, job=job), ""]
    out += ["* Status: proposed", f"* Date: {day}", "* Deciders: (fill in)"]
    if r.current is not None:
        out.append(f"* Current design: {catalog.strategy(r.current.strategy).name} (`{r.current.strategy}`)")

    if r.current is not None and r.verdict is not None:
        out += ["", *findings_section(r, catalog), "", *this_week_section(r)]
    out += ["", *target_section(r, catalog)]

    out += ["", "## Verification plan", ""]
    if probe:  # what was already proven on the real job comes before what is still to do
        out += ["Evidence from a crash drill of the team's own job:", "", *probe, ""]
    out += [f"{i}. {step}" for i, step in enumerate(r.verification, 1)]

    out += ["", "## Context and problem statement", ""]
    if r.context:
        out += [r.context, ""]
    else:
        out += [
            f"{job[0].upper() + job[1:]} can be killed mid-way (crash, deploy, scale-in, OOM, kill -9)."
            " Which continuity mechanism lets it continue without losing progress and without repeating"
            " side effects?",
            "",
        ]
    out.append(_answers_line(r, catalog))

    out += ["", "## Decision drivers", ""]
    drivers = [(b) for b in r.target.because[:4]]
    out += [f"- {d}" for d in drivers] or ["- No answer favours any strategy yet; the simplest sound default applies."]
    out += [f"- Conflicting answers: {(w.message)}" for w in rec.warnings]

    out += ["", "## Considered options", ""]
    current_id = r.current.strategy if r.current else None
    ruled = [x for x in rec.ranking if x.ruled_out and x.strategy.id not in (r.target.strategy.id, current_id)]
    ruled = ruled if len(ruled) > 1 else []  # one line each unless several can share one
    listed = [x for x in rec.ranking if x not in ruled]
    # In full: the two that lead, the current design and the choice; the rest share one line
    # (their pros and cons are one `advisor explain` away), unless only one would.
    full = {x.strategy.id for x in rec.ranking[:2]} | {current_id, r.target.strategy.id}
    further = [x for x in listed if x.strategy.id not in full]
    further = further if len(further) > 1 else []
    # Each line at its rank: the shared line where its first option ranks (the current design may
    # rank below the options it shares).
    lines = [(i, _option_line(i, ranked, r)) for i, ranked in enumerate(listed, 1) if ranked not in further]
    if further:
        first = listed.index(further[0]) + 1
        lines.append((first, f"{first}. Further down: " + " ".join(
            f"**{x.strategy.name}** (`{x.strategy.id}`, score {x.score:g}) — {_why_lower(x, r)}" for x in further)))
    out += [line for _, line in sorted(lines, key=lambda item: item[0])]
    if ruled:
        out += ["", "Ruled out by these answers: " + " ".join(
            f"**{x.strategy.name}** (`{x.strategy.id}`): {(x.ruled_out[0])}" for x in ruled
        )]  # fmt: skip

    out += ["", "## Decision outcome", ""]
    if r.target is rec.top:
        out.append(f'Chosen option: "{s.name}" (`{s.id}`), because it ranks first on the drivers above.')
    elif r.verdict is not None and r.verdict.fits and r.target.strategy.id == r.verdict.strategy:
        gap = rec.top.score - r.target.score
        ahead = (f"{rec.top.strategy.name} ties with it and comes first only as the simpler option" if gap == 0
                 else f"{rec.top.strategy.name} ranks first, {lead_words(gap, 'it')}")
        out.append(
            f'Chosen option: "{s.name}" (`{s.id}`), the current category: it fits these answers'
            f" ({ahead}, not enough to justify a rewrite)."
        )
    elif r.current is not None and not r.rewrites and r.owner in NOT_OWNED:
        out.append(
            f'Chosen option: "{s.name}" (`{s.id}`), the engine the team runs (`engine_owner={r.owner}`): configured,'
            f" not rewritten, though {rec.top.strategy.name} ranks first for these answers (see the target design)."
        )
    else:
        gaps = "; ".join((g) for g in rec.why_not.get(s.id, ())) or "none named"
        out.append(
            f'Chosen option: "{s.name}" (`{s.id}`). The advisor ranked {rec.top.strategy.name} first;'
            f" this choice accepts: {gaps}."
        )
    close = rec.close_call
    if close is not None and r.target is rec.top:
        settle = "; ".join(f"`{x.question}={x.value}` → {x.would_pick}" for x in close.settle[:3])
        runner = catalog.strategy(close.runner_up).name
        if close.tie:
            lead = f"A tie: {s.name} and {runner} score the same; {s.name} comes first only as the simpler option."
        else:
            lead = f"Close call: {lead_words(close.margin, runner)}."
        out.append(
            lead + (f" What would settle it: {settle}." if settle
                    else f" No single answer settles it: weigh the two (`advisor explain {close.runner_up}`).")
        )
    elif rec.swings and r.target is rec.top:
        swings = "; ".join(f"`{w.question}={w.value}` → {w.would_pick}" for w in rec.swings[:3])
        out.append(f"Unanswered questions that would change it: {swings}.")
    recipe = rec.recipe if r.target is rec.top else None
    rp = s.recovery_point
    out += [
        "",
        f"- Where the recovery point lives: {recipe.where if recipe else rp.where}",
        f"- How often it is recorded: {recipe.how_often if recipe else rp.how_often}",
        f"- How duplicates and omissions are avoided: {recipe.duplicates if recipe else rp.duplicates}",
    ]

    out += ["", "### Consequences", ""]
    out += [f"- Good: {_joined(*s.pros)}",
            f"- Bad: {_joined(*s.cons, *s.costs)} Its pitfalls, each with its fix: `advisor explain {s.id}`."]
    out += [f"- Note: {(n)}" for n in rec.notes]
    out += [f"- Watch: **{p.title}** — {(rec.fix(p))}" for p in _watch(r)]
    return redact("\n".join(out) + "\n")  # the team's context may quote a URL with its password
