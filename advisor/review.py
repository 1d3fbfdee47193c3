"""Design review: turn answers (and the current design) into a decision record (Markdown, MADR).

A review is for a team that already runs something. It leads with **findings** — the essential
controls of the current design (``controls:`` in the strategy's YAML) that are missing, then
those nobody could vouch for — each with why it matters, how to check it and how to fix it,
worded for the team's answers. Then it says whether the current category fits, how to get from
the current design to the decided one (a migration path: ordered steps, what to keep), how to
prove it (a verification plan for this case), and the MADR sections. Nothing is listed twice.

:func:`review` is pure (answers in, a :class:`Review` out); :func:`decision_record` renders it;
:func:`write_text_safely` is the one file write.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from advisor.answers import CurrentDesign
from advisor.catalog import Catalog, Control, Pitfall, Strategy, condition_holds
from advisor.engine import Ranked, Recommendation, recommend
from advisor.errors import AdvisorError, AnswersError, OutputExistsError

# A current strategy within this many points of the top pick is a reasonable fit.
FIT_MARGIN = 2.0
# Pitfalls the verification plan itself answers (it is the crash drill), never listed apart.
ANSWERED_BY_THE_PLAN = ("untested-recovery",)
# Where the kills that matter land, by answer (the verification plan aims the drill there).
KILL_WINDOWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("external_effects", ("idempotent_api", "queryable_api", "plain_api"),
     "between an external call and the commit that records it"),
    ("outputs", ("outside_store",), "while an output file or object is half written"),
    ("work_shape", ("record_batch",), "in the middle of a batch, after some of its results are written"),
    ("work_shape", ("multi_step_flow",), "between two steps of a flow"),
    ("work_shape", ("entity_changes",), "between an append and the subscriber's commit"),
    ("work_shape", ("unbounded_stream",), "in the middle of a micro-batch (kill an executor, then the driver)"),
    ("work_shape", ("single_task",), "in the middle of the task, after its first effect"),
)  # fmt: skip
DRILL_RECORDS, DRILL_KILLS = 2000, 10
# Template variants an answer selects: (strategy, question, value) → `advisor generate` options.
# These variants run one worker per data directory and do not retry a failing service, so the
# drill gets neither --workers nor --fail-rate (the generated drill would refuse them).
VARIANTS = {("checkpoint", "recovery_point_store", "local_disk"): " --set checkpoint_store=file"}


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
    if rank == 1:
        summary = f"{name} is the advisor's top pick for these answers."
    elif fits:
        summary = f"{name} ranks {rank} of {len(ids)}, {gap:g} points behind {top}: a reasonable fit."
    elif ruled_out:
        summary = f"{name} does not fit: these answers rule it out; {top} ranks first."
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
        c for c in unknown if c.id not in keeps or (migrating and _depends_on_unanswered(c, answers))
    )
    undecided = tuple(c for c in unknown if c not in replaced and _depends_on_unanswered(c, answers))
    unknown = [c for c in unknown if c not in replaced and c not in undecided]
    findings = tuple(
        Finding(i, c.worded(answers), design.status(c.id), _condition_words(c, answers, catalog))
        for i, c in enumerate(missing + unknown, 1)
    )
    in_place = tuple(c for c in applying if design.status(c.id) == "yes")
    return findings, in_place, not_needed, replaced, undecided


def _depends_on_unanswered(control: Control, answers: Mapping[str, str]) -> bool:
    return any(q not in answers for q in control.applies_when)


def _unanswered_conditions(control: Control, answers: Mapping[str, str]) -> str:
    """"`outputs` is `outside_store`" for the conditions of a control not answered yet."""
    return " and ".join(
        f"`{q}` is " + " or ".join(f"`{v}`" for v in values) for q, values in control.applies_when.items() if q not in answers
    )


def _numbers(findings: Sequence[Finding]) -> str:
    nums = [f.number for f in findings]
    if not nums:
        return ""
    if len(nums) == 1:
        return f"finding {nums[0]}"
    if nums == list(range(nums[0], nums[-1] + 1)):
        return f"findings {nums[0]}–{nums[-1]}"
    return "findings " + ", ".join(map(str, nums))


def _ids(controls: Sequence[Control]) -> str:
    return ", ".join(f"`{c.id}`" for c in controls)


# --- migration and verification ----------------------------------------------------------


def _migration(
    target: Strategy,
    design: CurrentDesign | None,
    findings: tuple[Finding, ...],
    in_place: tuple[Control, ...],
    answers: Mapping[str, str],
    rec: Recommendation,
    catalog: Catalog,
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[Control, ...]]:
    """(ordered steps, what to keep, the target's controls still to build)."""
    target_controls = [c.worded(answers) for c in target.controls if c.applies(answers)]
    if design is None:
        steps = [f"Build it: {_where(rec, target)}"]
        if target.id in _generated():
            steps.append(f"Start from the generated reference (`advisor generate {target.id} ./{_slug()}`) and move the real work into it.")
        steps.append("Put each essential control below in place before the first production run.")
        return tuple(steps), (), tuple(target_controls)

    current = catalog.strategy(design.strategy)
    missing = [f for f in findings if f.status == "no"]
    unknown = [f for f in findings if f.status == "unknown"]
    if current.id == target.id:
        steps = []
        if missing:
            steps.append(f"Close {_numbers(missing)} first ({_ids([f.control for f in missing])}): that is where this design loses or repeats work today.")
        if unknown:
            steps.append(f"Run the checks of {_numbers(unknown)}; fix each one that turns out missing, in that order.")
        if not findings:
            steps.append("Nothing to change: repeat the verification plan after every change to the job's recovery code.")
        keep = [
            f"the category — {current.name} fits these answers; no rewrite is needed"
            if rec.ranked(current.id).allowed and _fits(rec, current.id)
            else f"the category, by the team's choice — though {current.name} does not fit these answers (see above)"
        ]
        if in_place:
            keep.append(f"the controls in place: {_ids(in_place)}")
        return tuple(steps), tuple(keep), ()

    target_ids = {c.id for c in target_controls}
    carry = [f for f in missing if f.control.id in target_ids]
    drop = [f for f in findings if f.control.id not in target_ids]
    kept = [c for c in in_place if c.id in target_ids]
    checked = [f for f in unknown if f.control.id in target_ids]
    described = {k.id for k in kept} | {f.control.id for f in findings}
    to_build = tuple(c for c in target_controls if c.id not in described)
    steps = []
    if carry:
        steps.append(f"While {current.name} still runs, close {_numbers(carry)} ({_ids([f.control for f in carry])}): {target.name} needs the same control, so the work carries over.")
    if checked:
        steps.append(f"Run the checks of {_numbers(checked)}: {target.name} needs those controls too; fix each one that turns out missing.")
    if drop:
        steps.append(
            f"{_numbers(drop).capitalize()} ({_ids([f.control for f in drop])}) disappears with {target.name};"
            " patch it in the current design only if the switch is weeks away."
        )
    steps.append(f"Add the recovery point: {_where(rec, target)}")
    if to_build:
        steps.append(f"Build the essential controls of {target.name} (listed below the steps), one at a time, each with its check.")
    if target.adopt:
        steps.append(f"Switch over: {target.adopt}")
    steps.append(f"Stop the {current.name} workers with SIGTERM at a safe point, start the new ones, and retire the old path once the verification plan passes.")
    keep = [f"{c.id}" for c in kept]
    keep_text = [f"the controls that carry over: {_ids(kept)}"] if keep else []
    keep_text.append("the job's own business logic; only how it records progress and calls out changes")
    return tuple(steps), tuple(keep_text), to_build


def _fits(rec: Recommendation, strategy_id: str) -> bool:
    return judge_current(rec, strategy_id).fits


def _where(rec: Recommendation, target: Strategy) -> str:
    recipe = rec.recipe if rec.top.strategy.id == target.id else None
    return recipe.where if recipe is not None else target.recovery_point.where


def _generated() -> frozenset[str]:
    """Strategies the template can generate today (never print a command the advisor would refuse)."""
    try:
        from advisor.scaffold import generated_strategies
    except Exception:  # pragma: no cover - the template is part of the package
        return frozenset()
    return generated_strategies()


def _slug() -> str:
    return "continuity-job"  # the template's default project name gives package `continuity_job`


def _verification(
    target: Strategy,
    answers: Mapping[str, str],
    findings: tuple[Finding, ...],
    in_place: tuple[Control, ...],
    to_build: tuple[Control, ...],
    catalog: Catalog,
) -> tuple[str, ...]:
    steps = []
    claims = (
        f"controls marked in place ({_ids(in_place)}) are claims until their checks pass too"
        f" (`advisor explain {target.id}` lists every check)"
        if in_place
        else ""
    )
    if findings:
        steps.append(
            f"Close {_numbers(findings)}: {'each' if len(findings) > 1 else 'it'} is closed when its check passes,"
            " not when the fix is merged"
            + (f"; {claims}." if claims else ".")
        )
    elif claims:
        steps.append(claims[0].upper() + claims[1:] + ".")
    windows = list(dict.fromkeys(text for qid, values, text in KILL_WINDOWS if answers.get(qid) in values))
    aim = "; ".join(windows) if windows else "at random moments while work is in flight"
    variant = next((v for v in VARIANTS if v[0] == target.id and answers.get(v[1]) == v[2]), None)
    options, single_worker = (VARIANTS[variant], True) if variant else ("", False)
    flags = f"--records {DRILL_RECORDS} --kills {DRILL_KILLS} --json"
    if answers.get("workers") == "many" and not single_worker:
        flags += " --workers 3"
    if answers.get("external_effects") in ("idempotent_api", "queryable_api", "plain_api") and not single_worker:
        flags += " --fail-rate 0.2"
    if target.id in _generated():
        pkg = _slug().replace("-", "_")
        steps.append(
            f"Prove the mechanism on the generated reference first: `advisor generate {target.id} ./{_slug()}{options}`, then"
            f" `cd {_slug()} && PYTHONPATH=src python -m {pkg} drill {flags}` — accept only `lost = 0` and"
            " `duplicate_effects = 0`."
        )
    else:
        steps.append(
            f"No generated reference exists for {target.name} yet: drill a staging copy of the job itself —"
            f" {DRILL_KILLS} kill -9s at random moments, restart after each, then compare input and output."
        )
    steps.append(
        f"Drill the real job the same way, with kills aimed at these moments: {aim} (a sleep or a breakpoint"
        " there makes the window reproducible). After every kill nothing may be missing or applied twice."
    )
    on_reference = " (`drill --sigterm` on the generated reference)" if target.id in _generated() else ""
    if answers.get("unit_vs_notice") == "longer_than_notice":
        steps.append(
            f"Send SIGTERM in the middle of a unit{on_reference}: the unit's progress must be saved within the"
            " notice (Kubernetes' grace period, 30 s by default; the 2-minute spot notice)."
        )
    else:
        steps.append(
            f"Send SIGTERM instead of SIGKILL{on_reference}: every stop records its progress and exits 0 within the"
            " grace period."
        )
    # The queries that prove it: spelled out for controls the record does not print a check for,
    # referred to by finding number for the others.
    queries = [(c, q) for c in to_build for q in _SQL.findall(c.how_to_check)[:1]]
    shown = [f for f in findings if _SQL.search(f.control.how_to_check)]
    parts = [f"`{q}` (`{c.id}`)" for c, q in queries]
    if shown:
        parts.append(f"the queries in the checks of {_numbers(shown)}")
    if parts:
        steps.append(f"In production, after each incident and each drill, these return no rows: {'; '.join(parts)}.")
    return tuple(steps)


_SQL = re.compile(r"`(SELECT (?:(?!\.\.\.)[^`])+? FROM (?:(?!\.\.\.)[^`])+)`")  # a whole query, no "..." placeholders


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
    steps, keep, to_build = _migration(target.strategy, design, findings, in_place, rec.answers, rec, catalog)
    if design is not None and design.strategy != target.strategy.id:  # only what the new design keeps
        kept = {c.id for c in target.strategy.controls}
        still = tuple(f for f in findings if f.control.id in kept)
        in_place_kept = tuple(c for c in in_place if c.id in kept)
    else:
        still, in_place_kept = findings, in_place
    plan = _verification(target.strategy, rec.answers, still, in_place_kept, to_build, catalog)
    return Review(
        rec, target, design, context, findings, in_place, not_needed, verdict, steps, keep, plan, to_build, replaced, undecided
    )


# --- rendering -----------------------------------------------------------------------

_SEED_CITATION = re.compile(r"\s*\((?:seed )?\d{3} §[^)]*\)|\s*\(seed[^)]*\)")
_SEED_WORDS = re.compile(r"\b(the seed's advice|the seed's default|the seed measured|the seed's|the seed)\b", re.I)
_SEED_REPLACEMENTS = {"the seed's advice": "the usual advice", "the seed's default": "the default",
                      "the seed measured": "measured", "the seed's": "the", "the seed": "the source"}  # fmt: skip


def _clean(text: str) -> str:
    """User-facing text never cites the internal source material (a safety net over the catalog's words)."""
    text = _SEED_CITATION.sub("", text)

    def swap(m: re.Match[str]) -> str:
        new = _SEED_REPLACEMENTS[m.group(0).lower()]
        return new[0].upper() + new[1:] if m.group(0)[0].isupper() else new

    return _SEED_WORDS.sub(swap, text)


def _fit_heading(r: Review) -> list[str]:
    v = r.verdict
    assert v is not None
    if not v.fits:
        out = [f"**Does not fit.** {v.summary}"]
        if v.risks:
            out += ["", "What it risks with these answers:"] + [f"- {_clean(x)}" for x in v.risks]
        else:
            out += ["", f"Nothing in these answers counts against it; {r.rec.top.strategy.name} simply fits them better."]
        return out
    if r.missing:
        return [
            f"**Right category, missing controls.** {v.summary} The gap is how it is built — {_numbers(r.missing)}"
            " above — not the category: fix those before considering a rewrite."
        ]
    if r.unknown:
        return [f"**Fits, if the unknown controls hold.** {v.summary} Check {_numbers(r.unknown)} above."]
    return [f"**Fits.** {v.summary} Every essential control that applies is in place."]


def _finding_lines(f: Finding, dropped: bool = False) -> list[str]:
    c = f.control
    label = "Missing" if f.status == "no" else "Unknown"
    here = f" Here: {'; '.join(f.here)}." if f.here else ""
    out = [f"{f.number}. **{label}: {c.question}** (`{c.id}`){here}"]
    fix = c.fix + (f" See {c.reference}" if c.reference else "")
    if f.status == "no" and not dropped:  # what the incident is about: one line each
        return out + [f"   - Why: {c.why}", f"   - Check: {c.how_to_check}", f"   - Fix: {fix}"]
    return out + [f"   - Why: {_end(c.why)} *Check:* {_end(c.how_to_check)} *Fix:* {fix}"]


def _end(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


def _answers_line(r: Review, catalog: Catalog) -> str:
    parts = [f"{catalog.question(q).choice(v).label} (`{q}={v}`)" for q, v in r.rec.answers.items()]
    unanswered = len(catalog.questions) - len(parts)
    tail = f" {unanswered} questions unanswered." if unanswered else ""
    return ("The answers: " + "; ".join(parts) + "." if parts else "No questions answered.") + tail


def _option_line(i: int, ranked: Ranked, r: Review) -> str:
    s = ranked.strategy
    head = f"{i}. **{s.name}** (`{s.id}`, score {ranked.score:g})"
    if ranked.strategy.id == r.target.strategy.id:
        return f"{head} — chosen; see the outcome."
    if ranked.ruled_out:
        why = f"ruled out: {_clean(ranked.ruled_out[0])}"
    else:
        why = f"ranked lower: {_clean((r.rec.why_not.get(s.id) or ('ranked lower',))[0])}"
    return f"{head} — {_joined(why)} Good: {_joined(*s.pros)} Bad: {_joined(*s.cons)}"


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


def render(r: Review, catalog: Catalog, *, title: str = "the long-running job", date: _dt.date | None = None) -> str:
    s = r.target.strategy
    rec = r.rec
    day = (date or _dt.date.today()).isoformat()
    out = [f"# Continuity mechanism for {title}: {s.name}", "", "* Status: proposed", f"* Date: {day}", "* Deciders: (fill in)"]
    if r.current is not None:
        out.append(f"* Current design: {catalog.strategy(r.current.strategy).name} (`{r.current.strategy}`)")

    if r.current is not None and r.verdict is not None:
        current = catalog.strategy(r.current.strategy)
        out += ["", "## Findings", ""]
        unknown = len(r.unknown) + len(r.replaced) + len(r.undecided)
        counts = f"{len(r.missing)} missing, {unknown} unknown, {len(r.in_place)} in place"
        out.append(f"Essential controls of {current.name} for these answers: {counts}.")
        if r.findings:
            out.append("")
            kept = {c.id for c in r.target.strategy.controls}
            for f in r.findings:  # a missing control the migration drops: the short form
                out += _finding_lines(f, dropped=r.current.strategy != r.target.strategy.id and f.control.id not in kept)
        rest = ([f"In place: {_ids(r.in_place)}."] if r.in_place else []) + (
            [f"Unknown, but replaced or rebuilt by the migration below: {_ids(r.replaced)}."] if r.replaced else []
        ) + ([f"Not needed with these answers: {_ids(r.not_needed)}."] if r.not_needed else [])
        if r.undecided:
            rest.append(
                "Unknown, and needed only if: "
                + "; ".join(f"{_unanswered_conditions(c, r.rec.answers)} (`{c.id}`)" for c in r.undecided)
                + " — answer those questions, or check these too (`advisor explain "
                + r.current.strategy + "`)."
            )
        if rest:
            out += ["", " ".join(rest)]
        out += ["", "### Does the category fit?", ""] + _fit_heading(r)

    out += ["", "## Migration path" if r.current is not None else "## Build plan", ""]
    out += [f"{i}. {step}" for i, step in enumerate(r.migration, 1)]
    if r.keep:
        out += ["", "Keep: " + "; ".join(r.keep) + "."]
    if r.to_build:
        out += ["", f"Essential controls of {s.name} to put in place:"]
        out += [
            f"- [ ] **{c.question}** (`{c.id}`) {c.fix}"
            + (f" See {c.reference}" if c.reference else "")
            + (f" *Only if* {_unanswered_conditions(c, rec.answers)}." if _depends_on_unanswered(c, rec.answers) else "")
            for c in r.to_build
        ]

    out += ["", "## Verification plan", ""] + [f"{i}. {step}" for i, step in enumerate(r.verification, 1)]

    out += ["", "## Context and problem statement", ""]
    if r.context:
        out += [r.context, ""]
    else:
        out += [
            f"{title[0].upper() + title[1:]} can be killed mid-way (crash, deploy, scale-in, OOM, kill -9)."
            " Which continuity mechanism lets it continue without losing progress and without repeating"
            " side effects?",
            "",
        ]
    out.append(_answers_line(r, catalog))

    out += ["", "## Decision drivers", ""]
    drivers = [_clean(b) for b in r.target.because[:4]]
    out += [f"- {d}" for d in drivers] or ["- No answer favours any strategy yet; the simplest sound default applies."]
    out += [f"- Conflicting answers: {_clean(w.message)}" for w in rec.warnings]

    out += ["", "## Considered options", ""]
    current_id = r.current.strategy if r.current else None
    ruled = [x for x in rec.ranking if x.ruled_out and x.strategy.id not in (r.target.strategy.id, current_id)]
    ruled = ruled if len(ruled) > 1 else []  # one line each unless several can share one
    listed = [x for x in rec.ranking if x not in ruled]
    out += [_option_line(i, ranked, r) for i, ranked in enumerate(listed, 1)]
    if ruled:
        out += ["", "Ruled out by these answers: " + " ".join(
            f"**{x.strategy.name}** (`{x.strategy.id}`): {_clean(x.ruled_out[0])}" for x in ruled
        )]  # fmt: skip

    out += ["", "## Decision outcome", ""]
    if r.target is rec.top:
        out.append(f'Chosen option: "{s.name}" (`{s.id}`), because it ranks first on the drivers above.')
    elif r.verdict is not None and r.verdict.fits and r.target.strategy.id == r.verdict.strategy:
        out.append(
            f'Chosen option: "{s.name}" (`{s.id}`), the current category: it fits these answers'
            f" ({rec.top.strategy.name} ranks first by {rec.top.score - r.target.score:g} points, not enough to justify a rewrite)."
        )
    else:
        gaps = "; ".join(_clean(g) for g in rec.why_not.get(s.id, ())) or "none named"
        out.append(f'Chosen option: "{s.name}" (`{s.id}`). The advisor ranked {rec.top.strategy.name} first; this choice accepts: {gaps}.')
    close = rec.close_call
    if close is not None and r.target is rec.top:
        settle = "; ".join(f"`{x.question}={x.value}` → {x.would_pick}" for x in close.settle[:3])
        out.append(
            f"Close call: {close.margin:g} points ahead of {close.runner_up}."
            + (f" What would settle it: {settle}." if settle else "")
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
    out += [f"- Good: {_joined(*s.pros)}", f"- Bad: {_joined(*(_clean(c) for c in s.cons + s.costs))}"]
    out += [f"- Note: {_clean(n)}" for n in rec.notes]
    out += [f"- Watch: **{p.title}** — {_clean(rec.fix(p))}" for p in _watch(r)]
    out.append(f"- Every pitfall of {s.name}, with its fix: `advisor explain {s.id}`.")
    return "\n".join(out) + "\n"


def decision_record(
    answers: Mapping[str, str],
    catalog: Catalog,
    *,
    current: str | CurrentDesign | None = None,
    chosen: str | None = None,
    title: str = "the long-running job",
    date: _dt.date | None = None,
    context: str | None = None,
) -> str:
    """The Markdown decision record. ``chosen`` overrides the decision (the team's choice)."""
    return render(review(answers, catalog, current=current, chosen=chosen, context=context), catalog, title=title, date=date)


def write_text_safely(path: Path, text: str, *, force: bool = False) -> None:
    """Write atomically (temp file + rename); never overwrite without ``force``; nothing half-written."""
    path = Path(path)
    if path.is_dir():
        raise AdvisorError(f"{path}: is a directory; give a file name such as {path / 'decision.md'}.")
    if path.exists() and not force:
        raise OutputExistsError(f"{path}: already exists. Use --force to overwrite it, or pick another --out.")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise AdvisorError(f"{path}: the folder {parent} does not exist.")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=parent)
    except OSError as exc:
        raise AdvisorError(f"{path}: cannot write here ({exc.strerror or exc}).") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise AdvisorError(f"{path}: cannot write ({exc.strerror or exc}).") from None
