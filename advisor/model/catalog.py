"""The strategy catalog as frozen dataclasses: questions, strategies, their pitfalls, controls,
rules and recipes, the scenarios and the conflicts. ``advisor.model.loader`` builds a
:class:`Catalog` from ``strategies/*.yaml``; everything else only reads one.

The catalog is data: adding a strategy or a question means adding YAML, never Python.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from advisor.model.precedent import Precedent
from advisor.model.words import Words, say

GRANULARITIES = ("task", "record", "event")
# evidence: what the team saw and who owns the engine — the review ranks and words its findings
# with them; no strategy's score depends on them.
QUESTION_GROUPS = ("recovery_point", "trait", "evidence")
# How much one control costs to put in place, cheapest first (the review's "this week" order).
EFFORTS = ("setting", "code", "schema")

# A condition over answers: question id → the values for which it holds (AND across questions,
# OR within one question's values). STYLE.md 14: rules are data, the engine only evaluates them.
Condition = Mapping[str, tuple[str, ...]]


def condition_holds(when: Condition, answers: Mapping[str, str]) -> bool:
    """True when every question of ``when`` is answered with one of its values (unanswered: False)."""
    return all(answers.get(q) in values for q, values in when.items())


@dataclass(frozen=True)
class Choice:
    id: str
    label: str
    help: str

    @property
    def name(self) -> str:
        """The label without its explanation ("Work lost — accepted work ..." → "Work lost")."""
        return self.label.split(" — ")[0].strip()


@dataclass(frozen=True)
class Question:
    id: str
    asks: str
    help: str
    group: str  # "recovery_point" (the three recovery-point questions, Q1-Q3), "trait" or "evidence"
    choices: tuple[Choice, ...]
    # Several values at once (what the team saw: `symptoms`). The answers hold them as one text,
    # the values in the choices' order joined by "," (see answer_values); no condition reads it.
    multiple: bool = False

    def choice(self, value: str) -> Choice:
        for choice in self.choices:
            if choice.id == value:
                return choice
        raise KeyError(value)

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.choices)


MULTIPLE_SEPARATOR = ","


def answer_values(answers: Mapping[str, str], question_id: str) -> tuple[str, ...]:
    """The values answered for a question: one, several (a multiple-value question) or none."""
    value = answers.get(question_id)
    return tuple(value.split(MULTIPLE_SEPARATOR)) if value else ()


@dataclass(frozen=True)
class RecoveryPoint:
    """A strategy's own answers to the three recovery-point questions."""

    where: str  # Q1 where is the recovery point stored?
    how_often: str  # Q2 how often is it recorded?
    duplicates: str  # Q3 how are duplicates and omissions avoided after recovery?


@dataclass(frozen=True)
class FixCase:
    """A pitfall's fix worded for particular answers (object storage, SMTP, a ledger, ...)."""

    when: Condition
    fix: str


@dataclass(frozen=True)
class Pitfall:
    id: str
    title: str
    problem: str
    fix: str
    seed: str  # internal provenance only (the source articles); never shown to users
    # question id → values for which the pitfall applies; empty = always.
    applies_when: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    fix_cases: tuple[FixCase, ...] = ()  # the first case that holds rewords the fix

    def applies(self, answers: Mapping[str, str]) -> bool:
        """An unanswered question does not rule a pitfall out: better warned than sorry."""
        return all(
            answers.get(q) is None or answers[q] in values for q, values in self.applies_when.items()
        )

    def fix_for(self, answers: Mapping[str, str]) -> str:
        """The fix worded for these answers (the general fix when no case holds), in the team's words."""
        fix = next((c.fix for c in self.fix_cases if condition_holds(c.when, answers)), self.fix)
        return say(fix, answers)

    def problem_for(self, answers: Mapping[str, str]) -> str:
        """The problem in the team's words (its examples from their domain and stack)."""
        return say(self.problem, answers)


@dataclass(frozen=True)
class Rule:
    """An ``avoid_when`` entry with a condition: when it holds, the strategy is ruled out.

    A ruled-out strategy ranks below every strategy that is not, whatever its score, so small
    bonuses for neutral answers can never outvote a decisive answer.
    """

    when: Condition
    say: str  # the reason, as a sentence a user reads
    reference: str | None = None  # a public URL backing the reason
    # Only matters when every strategy is ruled out (contradicting answers): the one whose fired
    # rules weigh least ranks first. An answer about the environment (no store yet) weighs less
    # than one about the work itself (its shape), which no design can change.
    severity: float = 1.0


@dataclass(frozen=True)
class RecipeCase:
    """The recovery point worded for particular answers: each field set here replaces the
    strategy's general answer (the first case that holds and sets a field wins for that field)."""

    when: Condition
    where: str | None = None
    how_often: str | None = None
    duplicates: str | None = None
    steps: tuple[str, ...] = ()  # extra steps the recipe needs for these answers


@dataclass(frozen=True)
class Conflict:
    """Answers that contradict each other: named, never silently accepted."""

    id: str
    when: Condition
    message: str
    revisit: tuple[str, ...]  # the question ids to look at again
    reference: str | None = None
    # Questions of ``when`` whose answer this conflict makes meaningless: while it holds they
    # move no score (a compensation answer for a job that calls no other service).
    ignore: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fit:
    """How one answer moves one strategy's score, and why."""

    question: str
    value: str
    score: float
    why: str
    # The strategy's gate this weight needs (``needs:``): it counts only when one of these
    # conditions holds (a state machine's bonuses only for a flow of steps). Empty: always.
    gate: tuple[Condition, ...] = ()

    def counts(self, answers: Mapping[str, str]) -> bool:
        return not self.gate or any(condition_holds(c, answers) for c in self.gate)


@dataclass(frozen=True)
class Note:
    """Advice added to a recommendation when its conditions hold (mixed cases)."""

    when: Mapping[str, tuple[str, ...]]
    say: str

    def holds(self, answers: Mapping[str, str]) -> bool:
        return all(answers.get(q) in values for q, values in self.when.items())


@dataclass(frozen=True)
class ControlCase:
    """Wording of a control for particular answers: each field it sets replaces the general one
    (per field, the first case that holds and sets it wins — as recipe cases do)."""

    when: Mapping[str, tuple[str, ...]]
    why: str | None = None
    how_to_check: str | None = None
    fix: str | None = None

    def holds(self, answers: Mapping[str, str]) -> bool:
        return all(answers.get(q) in values for q, values in self.when.items())


@dataclass(frozen=True)
class Control:
    """An essential control of a strategy: what a design review asks the team (STYLE.md 14).

    ``applies_when`` limits it to some answers (an unanswered question does not rule it out);
    ``cases`` reword it for particular answers (per field, the first case that holds and sets it).
    """

    id: str
    question: str  # asked of the team, answered yes / no / unknown
    why: str  # what breaks without it, concretely
    how_to_check: str  # what to look at, which query or drill proves it
    fix: str
    applies_when: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    reference: str | None = None  # a public URL a user can open
    cases: tuple[ControlCase, ...] = ()
    covers: tuple[str, ...] = ()  # ids of the strategy's pitfalls this control guards against
    effort: str = "code"  # setting | code | schema (EFFORTS): the review patches the cheapest first
    # Another control of the strategy whose answer (yes / no) the team may have given for the same
    # gap under other answers: when that one does not apply and this one does, its state is read
    # as this one's (results-and-progress-together: no, with outputs outside the store).
    stands_in_for: str | None = None

    def applies(self, answers: Mapping[str, str]) -> bool:
        return all(
            answers.get(q) is None or answers[q] in values for q, values in self.applies_when.items()
        )

    def worded(self, answers: Mapping[str, str]) -> Control:
        """This control worded for these answers: each of why / how_to_check / fix from the first
        case that holds and sets it (else the general text), every text in the team's words."""
        holding = [case for case in self.cases if case.holds(answers)]

        def pick(name: str) -> str:
            text = next((t for case in holding if (t := getattr(case, name))), getattr(self, name))
            return say(text, answers)

        return replace(
            self, question=say(self.question, answers), why=pick("why"), how_to_check=pick("how_to_check"),
            fix=pick("fix"), cases=(), reference=say(self.reference, answers) if self.reference else None,
        )  # fmt: skip


@dataclass(frozen=True)
class Strategy:
    id: str
    name: str
    granularity: str  # task | record | event
    summary: str
    recovery_point: RecoveryPoint
    when_to_use: tuple[str, ...]
    avoid_when: tuple[str, ...]
    pros: tuple[str, ...]
    cons: tuple[str, ...]
    costs: tuple[str, ...]
    pitfalls: tuple[Pitfall, ...]
    references: tuple[str, ...]
    template: str  # the Copier `strategy` answer that generates it
    template_options: Mapping[str, object]
    fits: tuple[Fit, ...]
    prior: float  # score before any answer (the usual "start with checkpoint" advice)
    prior_why: str
    notes: tuple[Note, ...]
    order: int  # tie-breaker: the simpler strategy first
    controls: tuple[Control, ...] = ()  # the essential controls a design review checks
    rules: tuple[Rule, ...] = ()  # avoid_when entries with a condition: they rule the strategy out
    recipes: tuple[RecipeCase, ...] = ()  # the recovery point worded for particular answers
    adopt: str | None = None  # how an existing job moves onto this strategy (review's migration path)

    def control(self, control_id: str) -> Control:
        for c in self.controls:
            if c.id == control_id:
                return c
        raise KeyError(control_id)

    def fit(self, question: str, value: str) -> Fit | None:
        for f in self.fits:
            if f.question == question and f.value == value:
                return f
        return None


@dataclass(frozen=True)
class Scenario:
    id: str
    scenario: str
    strategy: str
    why: str
    answers: Mapping[str, str]


SYMPTOMS = "symptoms"  # the question evidence rules read by its values (what the team saw)
TRIGGER = "trigger"  # when it happened (a deploy, a crash, a retry): evidence rules read it in `when`
RECOVERY_POINT_FOUND = "recovery_point_found"  # what the recorded progress said against the work done
DUPLICATE_IDS = "duplicate_ids"  # how the two copies of a repeated effect were identified
ENGINE_OWNER = "engine_owner"  # who owns the engine: a rewrite is proposed only for its own code


@dataclass(frozen=True)
class EvidenceRule:
    """Symptom × answers → control weights (``evidence.yaml``): when the team saw one of
    ``symptoms`` (empty: whatever it saw) and ``when`` holds, each control named in ``weights``
    becomes that much likelier to be the cause. The review ranks its findings by the sum."""

    id: str
    symptoms: tuple[str, ...]  # any one of them seen (values of the `symptoms` question)
    when: Condition  # the answers it needs besides (AND; empty: none)
    weights: Mapping[str, float]  # control id → weight
    says: str  # why, in a few words ("a retried attempt re-used the failed one's output")
    together: bool = False  # every one of ``symptoms`` seen (a pattern no single symptom shows)
    # Answers that rule it out. Unlike ``when``, an unanswered question does not: "unless the unit
    # takes seconds" still holds for a team that did not say how long its units take.
    unless: Condition = field(default_factory=dict)
    # Words of the team's own ``context:`` (any one, whole words, any case): a phrase that names a
    # mechanism ("rate limited", "a different message id") the answers have no value for.
    words: tuple[str, ...] = ()

    def holds(self, symptoms: tuple[str, ...], answers: Mapping[str, str], context: str = "") -> bool:
        match = all if self.together else any
        seen = not self.symptoms or match(s in symptoms for s in self.symptoms)
        ruled_out = any(answers.get(q) in values for q, values in self.unless.items())
        said = not self.words or said_in(self.words, context) is not None
        return seen and said and condition_holds(self.when, answers) and not ruled_out


def said_in(words: Sequence[str], text: str) -> str | None:
    """The first of ``words`` (lowercase) that ``text`` says as a whole word or phrase, any case."""
    lowered = text.lower()
    return next((w for w in words if re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", lowered)), None)


@dataclass(frozen=True)
class Implied:
    """What a team's stack says about a question it did not answer (``evidence.yaml``, ``implied``):
    when ``when`` holds, ``answers`` are read as likely by the ranking's rules only, at part of a
    rule's weight, as a context word is; recommend never reads them."""

    when: Condition
    answers: Mapping[str, str]  # question id → the value the stack makes likely
    says: str  # why, in a few words ("a SLURM job restarts from files it wrote")


@dataclass(frozen=True)
class Evidence:
    """The review's ranking rules; ``keywords``: words of the team's context that suggest a
    symptom it did not answer (symptom → words, matched whole and case-insensitively);
    ``precedents``: past incidents whose fixes break what the rules leave close; ``implied``:
    answers the team's stack makes likely where it gave none."""

    rules: tuple[EvidenceRule, ...] = ()
    keywords: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    precedents: tuple[Precedent, ...] = ()
    implied: tuple[Implied, ...] = ()


@dataclass(frozen=True)
class Catalog:
    questions: tuple[Question, ...]
    strategies: tuple[Strategy, ...]
    scenarios: tuple[Scenario, ...]
    root: Path
    conflicts: tuple[Conflict, ...] = ()
    close_call_margin: float = 2.0  # a lead smaller than this is a close call (decision.yaml)
    words: Words = field(default_factory=Words)  # the stacks' own words (stack-words.yaml)
    evidence: Evidence = field(default_factory=Evidence)  # the review's ranking rules (evidence.yaml)

    def question(self, question_id: str) -> Question:
        for q in self.questions:
            if q.id == question_id:
                return q
        raise KeyError(question_id)

    def strategy(self, strategy_id: str) -> Strategy:
        for s in self.strategies:
            if s.id == strategy_id:
                return s
        raise KeyError(strategy_id)

    @property
    def strategy_ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.strategies)

    @property
    def question_ids(self) -> tuple[str, ...]:
        return tuple(q.id for q in self.questions)
