"""Which missing or unknown control most likely caused what the team saw: the evidence rules
(``strategies/evidence.yaml``, symptom × answers → control weight) summed per control, plus the
fixes of the past incidents most like this one (``strategies/precedents.yaml``).

Pure and small: the rules and the precedents are data (STYLE.md 14), this module only evaluates
them and says, in one line per control, which symptom, which answers and which past incidents put
it where it ranks. The team's ``context:`` may add a symptom it did not answer, and a rule with
``words`` holds only when the context says one of them (words and phrases matched whole); the record
quotes the word either way; the context is also compared with what each control guards against
(resemblance.py), and the record quotes the shared words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from advisor.model.catalog import (MULTIPLE_SEPARATOR, SYMPTOMS, TRIGGER, Catalog, Control, EvidenceRule, answer_values,
                                   condition_holds, said_in)
from advisor.model.precedent import Precedent
from advisor.review.resemblance import NONE, Resemblance, resemblances
from advisor.review.tally import Share, shares


@dataclass(frozen=True)
class Seen:
    """The symptoms the ranking reads: answered, and those the context's words suggest besides."""

    answered: tuple[str, ...] = ()
    inferred: tuple[tuple[str, str], ...] = ()  # (symptom, the context's word) — not answered
    # (question, value, the answer it comes from) for questions not answered: what the team's
    # stack makes likely (evidence.yaml, `implied`)
    implied: tuple[tuple[str, str, str], ...] = ()
    context: str = ""  # the team's own words, which rules with `words` read
    # control id → how closely those words describe what the control guards against
    resembles: Mapping[str, Resemblance] = field(default_factory=dict)

    @property
    def symptoms(self) -> tuple[str, ...]:
        return self.answered + tuple(s for s, _ in self.inferred)

    def with_implied(self, answers: Mapping[str, str]) -> Mapping[str, str]:
        return {**answers, **{q: v for q, v, _ in self.implied}} if self.implied else answers


@dataclass(frozen=True)
class Likelihood:
    """How well the evidence explains one control's absence: the sum of the rules that raise it,
    its share of the most similar past incidents' fixes (times PRECEDENT_WEIGHT), its share of
    every past incident counted answer by answer (times TALLY_WEIGHT) and, with a context, how
    closely the team's words describe it (times RESEMBLANCE_WEIGHT)."""

    score: float = 0.0
    rules: tuple[tuple[EvidenceRule, float], ...] = ()  # (rule, its weight here), strongest first
    precedents: tuple[Precedent, ...] = ()  # the similar past incidents this control fixed, likeliest first
    of: int = 0  # how many similar past incidents were read
    share: float = 0.0  # their part of those incidents, by similarity
    words: Resemblance = NONE  # how closely the team's context describes what it guards against
    tally: Share = Share(0.0)  # its part of every past incident, counted answer by answer (tally.py)

    @property
    def by_rules_and_precedents(self) -> float:
        """The rules and the past incidents most like these answers, without the context's
        resemblance or the tally: a description, or a fix's record over all incidents, never
        makes a finding by itself of a control the answers leave open."""
        return self.score - RESEMBLANCE_WEIGHT * self.words.score - TALLY_WEIGHT * self.tally.share


def symptoms_seen(answers: Mapping[str, str], catalog: Catalog, context: str | None = None) -> Seen:
    answered = answer_values(answers, SYMPTOMS)
    inferred = []
    for symptom, words in catalog.evidence.keywords.items():
        if symptom in answered:
            continue
        word = said_in(words, context or "")
        if word is not None:
            inferred.append((symptom, word))
    implied: dict[str, tuple[str, str]] = {}
    for rule in catalog.evidence.implied:
        if condition_holds(rule.when, answers):
            basis = ", ".join(f"{q}={answers[q]}" for q in rule.when)
            for q, v in rule.answers.items():
                if not answers.get(q) and q not in implied:  # an answer always wins; the first rule too
                    implied[q] = (v, basis)
    return Seen(answered, tuple(inferred), tuple((q, v, b) for q, (v, b) in implied.items()), context or "",
                resemblances(context or "", catalog))


#: A rule that holds only with a symptom the context's words suggest (not answered), or with an
#: answer the team's stack makes likely (not given), counts this much of its weight: a word or a
#: likelihood is weaker evidence than the team's own answer.
INFERRED_SHARE = 0.5


#: The past incidents read: the NEIGHBOURS most similar ones run on the same design. Similar means
#: sharing answers, each weighed as FEATURE_WEIGHT says (what was seen and when it happened tell
#: the most), over all the answers either gave. A control that fixed all of them gains
#: PRECEDENT_WEIGHT, "the usual cause" of evidence.yaml; one that fixed some, its share. Set once,
#: before a held-out part measured them (docs/calibration.md), and not tuned since.
NEIGHBOURS = 7
PRECEDENT_WEIGHT = 3.0
FEATURE_WEIGHT = {SYMPTOMS: 3.0, TRIGGER: 2.0}

#: A control gains this much times its share of every past incident on any design, counted answer
#: by answer (tally.py): all of it is worth "a common cause" of evidence.yaml, less than the nearest
#: incidents, which match a whole profile. Set forward-chained on rounds 10-33 (each round tallied
#: only from the rounds before it), where 2 to 4 give about the same figures (docs/calibration.md).
TALLY_WEIGHT = 3.0

#: With a context, a control gains this much times how closely the team's words describe what it
#: guards against (a cosine, 0..1; advisor/review/resemblance.py): a close description (0.3) is
#: worth about a consistent rule (weight 1-2). Chosen on the tuned calibration rows, where 4 to 8
#: give the same figures; a word is weaker evidence than an answer, so it stays below a rule's "usual cause".
RESEMBLANCE_WEIGHT = 6.0
#: A resemblance or a tally worth less than this many points is not named on the finding's line (noise).
SHOWN_FROM = 1.0


def features(answers: Mapping[str, str]) -> frozenset[tuple[str, str]]:
    """The answers as (question, value) pairs, one per value of a multiple-value question."""
    return frozenset((q, v) for q, value in answers.items() if value for v in str(value).split(MULTIPLE_SEPARATOR))


def _weight(pairs: frozenset[tuple[str, str]]) -> float:
    return sum(FEATURE_WEIGHT.get(q, 1.0) for q, _ in pairs)


def similar(answers: Mapping[str, str], current: str, catalog: Catalog) -> list[tuple[float, Precedent]]:
    """The past incidents on the same design most like these answers, likeliest first."""
    mine = features(answers)
    scored = [(_weight(mine & p.features) / (1.0 + _weight(mine | p.features)), p)
              for p in catalog.evidence.precedents if p.current == current]
    scored.sort(key=lambda item: -item[0])  # stable: equals keep the file's order
    return [item for item in scored[:NEIGHBOURS] if item[0] > 0]


def likelihood(
    control: Control, seen: Seen, answers: Mapping[str, str], catalog: Catalog,
    near: Sequence[tuple[float, Precedent]] = (), tallied: Mapping[str, Share] | None = None,
) -> Likelihood:
    fired = []
    for rule in catalog.evidence.rules:
        if control.id not in rule.weights:
            continue
        if rule.holds(seen.answered, answers, seen.context):
            fired.append((rule, rule.weights[control.id]))
        elif (seen.inferred or seen.implied) and rule.holds(seen.symptoms, seen.with_implied(answers), seen.context):
            fired.append((rule, rule.weights[control.id] * INFERRED_SHARE))
    fired.sort(key=lambda item: -item[1])
    total = sum(w for w, _ in near)
    fixed = [(w, p) for w, p in near if p.fix == control.id]
    share = sum(w for w, _ in fixed) / total if total else 0.0
    words = seen.resembles.get(control.id, NONE)
    tally = (tallied or {}).get(control.id, Share(0.0))
    score = sum(w for _, w in fired) + PRECEDENT_WEIGHT * share + TALLY_WEIGHT * tally.share + RESEMBLANCE_WEIGHT * words.score
    return Likelihood(score, tuple(fired), tuple(p for _, p in fixed), len(near), share, words, tally)


def rank(
    controls: Sequence[Control],
    status: Mapping[str, str],
    seen: Seen,
    answers: Mapping[str, str],
    catalog: Catalog,
    current: str | None = None,
) -> list[tuple[Control, Likelihood]]:
    """Missing (``no``) controls first, then unknown ones; within each, likeliest first; ties in
    the order the strategy declares its controls (its most common gaps come first). ``current``:
    the design the team runs, whose past incidents are compared (None: the rules alone)."""
    near = similar(answers, current, catalog) if current else []
    tallied = shares(features(answers), current, [c.id for c in controls], catalog.evidence.precedents) if current else {}
    scored = [(c, likelihood(c, seen, answers, catalog, near, tallied)) for c in controls]
    order = {c.id: i for i, c in enumerate(controls)}
    return sorted(scored, key=lambda item: (status.get(item[0].id) != "no", -item[1].score, order[item[0].id]))


# --- wording ---------------------------------------------------------------------------

ORDINALS = ("first", "second", "third")


def ordinal(n: int) -> str:
    return ORDINALS[n - 1] if n <= len(ORDINALS) else f"{n}th"


def _symptom_words(rule: EvidenceRule, seen: Seen, catalog: Catalog) -> list[str]:
    """The symptoms behind one rule, as the team would say them (inferred ones with their word)."""
    question = catalog.question(SYMPTOMS)
    words = []
    for symptom in rule.symptoms:
        label = question.choice(symptom).name.lower()
        if symptom in seen.answered:
            words.append(label)
        else:
            word = dict(seen.inferred).get(symptom)
            if word is not None:
                words.append(f'{label} (the context says "{word}")')
    return words


def _answer_words(token: str) -> str:
    """A tally's answer as the record says it: "`symptoms=work_lost` with `trigger=planned_stop`"."""
    return " with ".join(f"`{part}`" for part in token.split("*"))


def why_ranked(
    position: int, status: str, found: Likelihood, seen: Seen, answers: Mapping[str, str], catalog: Catalog
) -> str:
    """One line: the symptom and the answers that put this control where it ranks."""
    head = f"Ranked {ordinal(position)}"
    rules = found.rules
    if position > len(ORDINALS):  # below the top three, a weak reason from the answers alone is noise
        rules = tuple((r, w) for r, w in rules if r.symptoms or w >= 3)
    said = found.words.shared if RESEMBLANCE_WEIGHT * found.words.score >= SHOWN_FROM else ()
    telling = found.tally.telling if TALLY_WEIGHT * found.tally.share >= SHOWN_FROM else ""
    if not rules and ((not found.precedents and not said and not telling) or position > len(ORDINALS)):
        # Missing (its label says so) or unexplained (the record names those together); past
        # incidents or the context's words alone explain only a finding near the top (a line each
        # for the rest is noise).
        return ""
    # The two strongest reasons; a weak one (weight 1) or one about the answers alone only when
    # nothing stronger is said: more would be noise.
    shown = rules[:1] + tuple((r, w) for r, w in rules[1:] if w >= 2 and r.symptoms)[:1]
    parts = []
    implied = {q: (v, because) for q, v, because in seen.implied}
    for rule, _ in shown:
        basis = _symptom_words(rule, seen, catalog) + [
            f"`{q}={answers[q]}`" if answers.get(q) else f"`{q}={implied[q][0]}`, likely with `{implied[q][1]}`"
            for q in rule.when]
        if rule.words:
            basis.append(f'the context says "{said_in(rule.words, seen.context)}"')
        parts.append(f"{rule.says} ({', '.join(basis)})")
    if said:
        parts.append("your context describes what it guards against (" + ", ".join(f'"{w}"' for w in said) + ")")
    if found.precedents:
        parts.append(f"the fix in {len(found.precedents)} of the {found.of} past incidents most like"
                     f" these answers ({found.precedents[0].link})")
    if telling:
        parts.append(f"all past incidents, answer by answer, favour it (most: {_answer_words(telling)})")
    lead = "you marked it missing, and " if status == "no" else ""
    return f"{head}: {lead}" + "; ".join(parts) + "."
