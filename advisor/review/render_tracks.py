"""The review's own sections of the decision record: the findings (ranked by the evidence, each
saying why it ranks where it does), whether the category fits, and the two tracks — **this
week** (patch the current design: the likely causes first, the cheapest of them first, each with
its check) and the **target design** (a migration only for an engine the team owns; for a
framework or a product, its configuration). Each thing is said once: a finding says what and
why, this week says the fix and the check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from advisor.model.catalog import SYMPTOMS, Catalog, answer_values
from advisor.review.plan import NOT_OWNED, likely, depends_on_unanswered, ids, numbers, unanswered_conditions
from advisor.review.separate import ABOUT, separator_sentence

if TYPE_CHECKING:
    from advisor.review.result import Finding, Review

EFFORT_WORDS = {"setting": "a setting", "code": "a code change", "schema": "a schema change"}
FULL_WEEK_LINES = 3  # this week spells out this many fixes with their checks (more only if missing)


def _end(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "?", "!")) else text + "."


def _evidence_line(r: Review, catalog: Catalog) -> str:
    """What the ranking read: the symptoms answered and those the context suggests."""
    question = catalog.question(SYMPTOMS) if SYMPTOMS in catalog.question_ids else None
    if question is None or not (catalog.evidence.rules or catalog.evidence.precedents):
        return "Ranked in the order the strategy declares its controls."

    def label(symptom: str) -> str:
        return question.choice(symptom).name.lower()

    parts = []
    during = "".join(f", {about} ({catalog.question(qid).choice(value).name.lower()})"
                     for qid, about in ABOUT.items()  # the observations, in the order they are asked
                     if (value := r.rec.answers.get(qid)) and qid in catalog.question_ids)
    if r.seen.answered:
        parts.append(f"ranked by what you saw ({', '.join(map(label, r.seen.answered))}){during} and your answers")
    elif during:
        parts.append(f"ranked by{during[1:]} and your answers")
    if r.seen.inferred:
        said = ", ".join(f'{label(s)} ("{w}")' for s, w in r.seen.inferred)
        parts.append(f"the context's words suggest {said} as well (not answered: confirm with `{SYMPTOMS}`)")
    if not parts:
        return f"No symptom given (`{SYMPTOMS}`): ranked by your answers alone; say what you saw to rank by it."
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def _finding_lines(f: Finding) -> list[str]:
    c = f.control
    label = "Missing" if f.status == "no" else "Unknown"
    said = [h for h in f.here if h.rsplit("(", 1)[-1].rstrip(")") not in f.ranked]  # the rank line names it
    here = f" Here: {'; '.join(said)}." if said else ""
    only = f" *Only if* {f.only_if}." if f.only_if else ""
    title = f"{f.number}. **{label}: {c.question}** (`{c.id}`){here}{only}"
    if not f.ranked:  # nothing points here (they are named together below the list): one line
        return [f"{title} *Why:* {_end(c.why)}"]
    return [title, f"   - {f.ranked} *Why:* {_end(c.why)}"]


def _unexplained_line(r: Review) -> list[str]:
    """One sentence for the findings no symptom or answer points at (they follow the catalog's
    order, after those past incidents point at)."""
    quiet = [f for f in r.findings if not f.ranked and f.status == "unknown"]
    if not quiet or not (r.seen.symptoms or any(f.ranked for f in r.findings)):
        return []
    # A quiet finding with a score owes it to past incidents alone (a rule that holds says so).
    order = ("by the past incidents (the most like yours, and all of them counted answer by answer), then " if any(f.score > 0 for f in quiet) else "") + \
        "in the order the strategy declares its controls"
    return [f"{numbers(quiet)[0].upper()}{numbers(quiet)[1:]}: nothing you saw points at {'them' if len(quiet) > 1 else 'it'};"
            f" listed {order}."]


def findings_section(r: Review, catalog: Catalog) -> list[str]:
    assert r.current is not None and r.verdict is not None
    current = catalog.strategy(r.current.strategy)
    out = ["## Findings", ""]
    unknown = len(r.unknown) + len(r.undecided)
    counts = f"{len(r.missing)} missing, {unknown} unknown, {len(r.in_place)} in place"
    out.append(f"Essential controls of {current.name} for these answers: {counts}. {_evidence_line(r, catalog)}")
    if r.findings:
        out.append("")
        for f in r.findings:
            out += _finding_lines(f)
    stood = dict((other, c) for c, other in r.stood_in)
    not_needed = [f"`{c.id}`" + (f" (your answer for it is read as `{stood[c.id]}`)" if c.id in stood else "")
                  for c in r.not_needed]  # fmt: skip
    close = separator_sentence(r.separators, catalog)
    rest = ([close] if close else []) + _unexplained_line(r) + ([f"In place: {ids(r.in_place)}."] if r.in_place else []) + (
        [f"Not needed with these answers: {', '.join(not_needed)}."] if not_needed else []
    )
    if r.undecided:
        rest.append(
            "Unknown, and needed only if: "
            + "; ".join(f"{unanswered_conditions(c, r.rec.answers)} (`{c.id}`)" for c in r.undecided)
            + " — answer those questions, or check these too (`advisor explain " + r.current.strategy + "`)."
        )
    if rest:
        out += ["", " ".join(rest)]
    return out + ["", "### Does the category fit?", "", *_fit_heading(r)]


def _fit_heading(r: Review) -> list[str]:
    v = r.verdict
    assert v is not None
    if not v.fits:
        out = [f"**Does not fit.** {v.summary}"]
        if v.risks:
            out += ["", "What it risks with these answers:"] + [f"- {x}" for x in v.risks]
        else:
            out += ["", f"Nothing in these answers counts against it; {r.rec.top.strategy.name} simply fits them better."]
        return out
    if r.missing:
        return [
            f"**Right category, missing controls.** {v.summary} The gap is how it is built — {numbers(r.missing)}"
            " above — not the category: this week's fixes close it, no rewrite needed."
        ]
    if r.unknown:
        return [f"**Fits, if the unknown controls hold.** {v.summary} Check {numbers(r.unknown)} above."]
    return [f"**Fits.** {v.summary} Every essential control that applies is in place."]


def _week_line(i: int, f: Finding) -> str:
    c = f.control
    fix = c.fix + (f" See {c.reference}" if c.reference else "")
    head = f"{i}. **`{c.id}`** (finding {f.number}, {EFFORT_WORDS[c.effort]})"
    if f.status == "no":
        return f"{head}. *Fix:* {_end(fix)} *Done when:* {_end(c.how_to_check)}"
    return f"{head}. *Check:* {_end(c.how_to_check)} *If it fails:* {_end(fix)}"


def this_week_section(r: Review) -> list[str]:
    out = ["## This week", ""]
    if not r.this_week:
        return out + ["Nothing to patch: repeat the verification plan after every change to the job's recovery code."]
    intro = (
        "Patch the current design now, whatever the target design below: the likely causes first, the cheapest"
        " of them first. A fix is done when its check passes, not when it is merged."
    )
    if r.owner == "product":
        intro += " You run a product: a fix that is none of its settings goes to its maintainers, the failed check as evidence."
    # In full: what is missing and the likely causes (at least FULL_WEEK_LINES); the other
    # findings share one line — their checks are a command away.
    best = max((f.score for f in r.this_week), default=0.0)
    # Missing ones always; then the likely causes, cheapest first, as many as FULL_WEEK_LINES
    # allows (more likely causes than that join the one line of the rest: a record stays readable).
    full = [f for f in r.this_week if f.status == "no"]
    full += [f for f in r.this_week if f not in full and likely(f.score, best)][: max(0, FULL_WEEK_LINES - len(full))]
    full += [f for f in r.this_week if f not in full][: max(0, FULL_WEEK_LINES - len(full))]
    lines = [_week_line(i, f) for i, f in enumerate(full, 1)]
    rest = [f for f in r.this_week if f not in full]
    if rest and r.current is not None:
        lines.append(
            f"{len(full) + 1}. Then check {numbers(rest)} ({ids([f.control for f in rest])}) and fix what fails;"
            f" each one's check and fix: `advisor explain {r.current.strategy}`."
        )
    return out + [intro] + lines  # a list may follow its paragraph directly (CommonMark)


def target_section(r: Review, catalog: Catalog) -> list[str]:
    s = r.target.strategy
    rec = r.rec
    out = ["## Target design" if r.current is not None else "## Build plan", ""]
    if r.current is not None and not r.migration:
        out.append(f"No migration: keep {'; '.join(r.keep)}.")
        return out
    steps = list(r.migration) + (["Keep: " + "; ".join(r.keep) + "."] if r.keep else [])
    out += [f"{i}. {step}" for i, step in enumerate(steps, 1)]
    if r.to_build:
        configured = r.current is not None and not r.rewrites and r.owner in NOT_OWNED
        name = rec.top.strategy.name if configured else s.name
        lead = (
            f"What {name} would add, asked of its configuration:"
            if configured
            else f"Essential controls of {name} to build, one at a time, each with its check:"
        )
        decided = [c for c in r.to_build if not depends_on_unanswered(c, rec.answers)]
        maybe = [c for c in r.to_build if depends_on_unanswered(c, rec.answers)]
        out += ["", lead] if decided else [""]
        out += [f"- [ ] **{c.question}** (`{c.id}`) {c.fix}" + (f" See {c.reference}" if c.reference else "")
                for c in decided]  # fmt: skip
        if maybe:
            out.append(
                "Needed too only if: "
                + "; ".join(f"{unanswered_conditions(c, rec.answers)} (`{c.id}`)" for c in maybe)
                + f" — answer those questions, or see `advisor explain {rec.top.strategy.id if configured else s.id}`."
            )
    return out


def answer_words(catalog: Catalog, question_id: str, answers: Mapping[str, str]) -> str:
    """An answer in the question's labels (several for a multiple-value question)."""
    question = catalog.question(question_id)
    values = answer_values(answers, question_id)
    labels = " + ".join(question.choice(v).name if question.multiple else question.choice(v).label
                        for v in values)  # fmt: skip
    return f"{labels} (`{question_id}={','.join(values)}`)"

