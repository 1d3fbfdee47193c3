"""Which missing or unknown control most likely caused what the team saw: the evidence rules
(``strategies/evidence.yaml``, symptom × answers → control weight) summed per control.

Pure and small: the rules are data (STYLE.md 14), this module only evaluates them and says, in
one line per control, which symptom and which answers put it where it ranks. The team's
``context:`` may add a symptom it did not answer (its words, matched whole); the record says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from advisor.model.catalog import SYMPTOMS, Catalog, Control, EvidenceRule, answer_values


@dataclass(frozen=True)
class Seen:
    """The symptoms the ranking reads: answered, and those the context's words suggest besides."""

    answered: tuple[str, ...] = ()
    inferred: tuple[tuple[str, str], ...] = ()  # (symptom, the context's word) — not answered

    @property
    def symptoms(self) -> tuple[str, ...]:
        return self.answered + tuple(s for s, _ in self.inferred)


@dataclass(frozen=True)
class Likelihood:
    """How well the evidence explains one control's absence: the sum of the rules that raise it."""

    score: float = 0.0
    rules: tuple[tuple[EvidenceRule, float], ...] = ()  # (rule, its weight here), strongest first


def symptoms_seen(answers: Mapping[str, str], catalog: Catalog, context: str | None = None) -> Seen:
    answered = answer_values(answers, SYMPTOMS)
    inferred = []
    text = (context or "").lower()
    for symptom, words in catalog.evidence.keywords.items():
        if symptom in answered:
            continue
        word = next((w for w in words if re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text)), None)
        if word is not None:
            inferred.append((symptom, word))
    return Seen(answered, tuple(inferred))


#: A rule that holds only with a symptom the context's words suggest (not answered) counts this
#: much of its weight: a word is weaker evidence than the team's own answer.
INFERRED_SHARE = 0.5


def likelihood(control: Control, seen: Seen, answers: Mapping[str, str], catalog: Catalog) -> Likelihood:
    fired = []
    for rule in catalog.evidence.rules:
        if control.id not in rule.weights:
            continue
        if rule.holds(seen.answered, answers):
            fired.append((rule, rule.weights[control.id]))
        elif seen.inferred and rule.holds(seen.symptoms, answers):
            fired.append((rule, rule.weights[control.id] * INFERRED_SHARE))
    fired.sort(key=lambda item: -item[1])
    return Likelihood(sum(w for _, w in fired), tuple(fired))


def rank(
    controls: Sequence[Control],
    status: Mapping[str, str],
    seen: Seen,
    answers: Mapping[str, str],
    catalog: Catalog,
) -> list[tuple[Control, Likelihood]]:
    """Missing (``no``) controls first, then unknown ones; within each, likeliest first; ties in
    the order the strategy declares its controls (its most common gaps come first)."""
    scored = [(c, likelihood(c, seen, answers, catalog)) for c in controls]
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


def why_ranked(
    position: int, status: str, found: Likelihood, seen: Seen, answers: Mapping[str, str], catalog: Catalog
) -> str:
    """One line: the symptom and the answers that put this control where it ranks."""
    head = f"Ranked {ordinal(position)}"
    if not found.rules:
        return ""  # missing (its label says so) or unexplained (the record names those together)
    # The two strongest reasons; a weak one (weight 1) or one about the answers alone only when
    # nothing stronger is said: more would be noise.
    shown = [found.rules[0]] + [(r, w) for r, w in found.rules[1:] if w >= 2 and r.symptoms][:1]
    parts = []
    for rule, _ in shown:
        basis = _symptom_words(rule, seen, catalog) + [f"`{q}={answers[q]}`" for q in rule.when]
        parts.append(f"{rule.says} ({', '.join(basis)})")
    lead = "you marked it missing, and " if status == "no" else ""
    return f"{head}: {lead}" + "; ".join(parts) + "."
