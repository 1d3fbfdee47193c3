"""Design review: turn answers into a decision record (Markdown, MADR-style).

The record is what a team files with its design: the context (the answers), the drivers,
every option with its pros and cons, the outcome and why, consequences, the pitfall checklist
and a verification plan (the crash drill). With ``current`` it judges the team's present
strategy. Pure text generation plus one safe file write.
"""

from __future__ import annotations

import datetime as _dt
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from advisor.catalog import Catalog
from advisor.engine import Recommendation, recommend
from advisor.errors import AdvisorError, AnswersError, OutputExistsError

# A current strategy within this many points of the top pick is a reasonable fit.
FIT_MARGIN = 2.0


@dataclass(frozen=True)
class Verdict:
    strategy: str
    fits: bool
    rank: int
    summary: str
    risks: tuple[str, ...]


def judge_current(rec: Recommendation, current: str) -> Verdict:
    """Does the team's current strategy fit these answers, and what does it risk?"""
    ids = [r.strategy.id for r in rec.ranking]
    if current not in ids:
        raise AnswersError(f"--current {current!r}: unknown strategy. Valid: {', '.join(ids)}.")
    ranked = rec.ranked(current)
    rank = ids.index(current) + 1
    gap = rec.top.score - ranked.score
    fits = rank == 1 or gap <= FIT_MARGIN
    name = ranked.strategy.name
    if rank == 1:
        summary = f"{name} is the advisor's top pick: it fits."
    elif fits:
        summary = f"{name} ranks {rank} of {len(ids)}, {gap:g} points behind {rec.top.strategy.name}: a reasonable fit."
    else:
        summary = (
            f"{name} does not fit: it ranks {rank} of {len(ids)}, {gap:g} points behind"
            f" {rec.top.strategy.name}."
        )
    risks = ranked.against + rec.why_not.get(current, ()) if rank > 1 else ranked.against
    pitfalls = tuple(f"pitfall: {p.title} — {p.fix}" for p in rec.pitfalls_for(current))
    return Verdict(current, fits, rank, summary, tuple(dict.fromkeys(risks + pitfalls)))


def _bullets(items: tuple[str, ...] | list[str], prefix: str = "- ") -> list[str]:
    return [f"{prefix}{item}" for item in items] or ["- (none)"]


def _probe_evidence(lines: Sequence[str] | None) -> list[str]:
    """The probe's evidence leads the verification plan: what was already proven on the real job."""
    return ["Evidence from a crash drill of the team's own job:", "", *lines, ""] if lines else []


def decision_record(
    answers: Mapping[str, str],
    catalog: Catalog,
    *,
    current: str | None = None,
    chosen: str | None = None,
    title: str = "the long-running job",
    date: _dt.date | None = None,
    probe: Sequence[str] | None = None,
) -> str:
    """The Markdown decision record. ``chosen`` overrides the top pick (the team's decision).
    ``probe``: Markdown lines from a probe of the team's job (``advisor.probe_report.evidence_lines``)."""
    rec = recommend(answers, catalog)
    if chosen is not None and chosen not in catalog.strategy_ids:
        raise AnswersError(f"--chosen {chosen!r}: unknown strategy. Valid: {', '.join(catalog.strategy_ids)}.")
    pick = rec.ranked(chosen or rec.top.strategy.id)
    s = pick.strategy
    day = (date or _dt.date.today()).isoformat()
    out = [
        f"# Continuity mechanism for {title}: {s.name}",
        "",
        "* Status: proposed",
        f"* Date: {day}",
        "* Deciders: (fill in)",
        "",
        "## Context and problem statement",
        "",
        f"{title[0].upper() + title[1:]} can be killed mid-way (crash, deploy, scale-in, OOM, kill -9)."
        " Which continuity mechanism lets it continue without losing progress and without"
        " repeating side effects? The team's answers:",
        "",
        "| question | answer |",
        "|---|---|",
    ]
    for q in catalog.questions:
        value = rec.answers.get(q.id)
        out.append(f"| {q.asks} | {q.choice(value).label if value else '(unknown)'} |")
    out += ["", "## Decision drivers", ""]
    out += _bullets(rec.top.because or ("no answer favours any strategy yet: the seed's default applies",))
    out += ["", "## Considered options", ""]
    out += [f"{i}. {r.strategy.name} (`{r.strategy.id}`, score {r.score:g})" for i, r in enumerate(rec.ranking, 1)]
    out += ["", "## Decision outcome", "", f'Chosen option: "{s.name}" (`{s.id}`), because:', ""]
    out += _bullets(pick.because or (s.summary,))
    if pick is not rec.top:
        out += [
            "",
            f"The advisor ranked {rec.top.strategy.name} first; choosing {s.name} accepts these gaps:",
            "",
        ]
        out += _bullets(rec.why_not.get(s.id, ()))
    out += ["", "### Recovery point", ""]
    out += [
        f"- Q1 where is it stored? {s.recovery_point.where}",
        f"- Q2 how often is it recorded? {s.recovery_point.how_often}",
        f"- Q3 how are duplicates and omissions avoided? {s.recovery_point.duplicates}",
        "",
        "### Consequences",
        "",
    ]
    out += _bullets(s.pros, "- Good: ")
    out += _bullets(s.cons + s.costs, "- Bad: ")
    if rec.notes:
        out += ["", "### Notes for this combination of answers", ""] + _bullets(rec.notes)
    out += ["", "## Pros and cons of the options", ""]
    for r in rec.ranking:
        out += [f"### {r.strategy.name}", "", r.strategy.summary, ""]
        out += _bullets(r.strategy.pros, "- Good: ") + _bullets(r.strategy.cons, "- Bad: ")
        if r.strategy.id != s.id:
            lost = rec.why_not.get(r.strategy.id) or pick.because[:1] or ("ranked lower",)
            out += _bullets(lost, "- Ranked lower: ")
        out.append("")
    if current:
        v = judge_current(rec, current)
        out += ["## Current strategy", "", f"**{'Fits' if v.fits else 'Does not fit'}.** {v.summary}", ""]
        if v.risks:
            out += ["What it risks with these answers:", ""] + _bullets(v.risks) + [""]
    out += ["## Pitfall checklist", ""]
    out += [f"- [ ] **{p.title}** — {p.fix} _(seed: {p.seed})_" for p in rec.pitfalls_for(s.id)] or ["- (none)"]
    out += [
        "",
        "## Verification plan",
        "",
        *_probe_evidence(probe),
        "Prove the design survives kill -9 before relying on it (seed 002: deliberate random kills):",
        "",
        f"1. `advisor generate {s.id} ./job` and replace the demo in `job.py` with the real work.",
        "2. `python -m <package> drill --records 2000 --kills 10 --seed 1 --json` — SIGKILL at random"
        " moments; accept only `lost = 0` and `duplicate_effects = 0`.",
        "3. `python -m <package> drill --records 2000 --kills 5 --sigterm` — every SIGTERM exits 0 within"
        " the grace period after a final checkpoint.",
        "4. Roll out in shadow mode, then on a slice of traffic with random kills, then everywhere;"
        " watch checkpoint latency, store availability and recovery success (alert below 99.9%"
        " or on two failed checkpoints in a row).",
        "5. Repeat the drill regularly: recovery that is not exercised does not work.",
    ]
    if rec.swings:
        out += ["", "## Open questions", "", "Answering these could change the decision:", ""]
        out += [
            f"- {catalog.question(w.question).asks} — `{w.value}` would pick `{w.would_pick}`"
            for w in rec.swings
        ]
    return "\n".join(out) + "\n"


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
