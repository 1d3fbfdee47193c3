"""The decision: answers + catalog → a ranked recommendation. Pure: no I/O, no UI.

The catalog holds every rule as data (STYLE.md 14); this module only evaluates them:

1. **Constraints.** A strategy's ``avoid_when`` entries that carry a condition rule it out when
   the condition holds. A ruled-out strategy ranks below every strategy that is not, whatever
   its score, so small bonuses for neutral answers never outvote a decisive answer.
2. **Scores.** Among the strategies still allowed, each one's score is its prior plus, for
   every answered question, the weight the catalog gives that answer (``fit``). A weight marked
   ``needs: GATE`` counts only when one of the strategy's ``gates`` conditions holds (a state
   machine's bonuses only for a flow of steps). The weights carry their reasons: positive ones
   become "because" lines, negative ones "against" lines. Ties go to the simpler strategy (the
   catalog's ``order``).
3. **Conflicts.** ``conflicts.yaml`` names answers that contradict each other; each one that
   holds becomes a warning naming the questions to revisit. An answer the conflict calls
   meaningless (``ignore``) moves no score, rules nothing out and words nothing while it holds.
4. **Close calls.** A lead smaller than the catalog's ``close_call_margin`` is a close call;
   the engine names the unanswered questions (and values) that would settle it, or, when every
   question is answered, the answers that decide it — only answers that raise no new conflict
   and leave a strategy standing.
5. **Recipe.** The winner's recovery point (where / how often / how duplicates and omissions
   are avoided) and its pitfall fixes, worded for the answers given (``recipes`` and
   ``fix_when`` in the YAML), in the team's own words (``stack-words.yaml``).

Same answers → same output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from advisor.model.catalog import Catalog, Conflict, Fit, Question, Strategy, condition_holds
from advisor.model.recommendation import CloseCall, Ranked, Reason, Recipe, Recommendation, Settle, Swing, Warning
from advisor.model.words import say

# --- wording -----------------------------------------------------------------------


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def short_label(question: Question, value: str) -> str:
    """A choice's label without its explanation ("Hours or more — …" → "hours or more")."""
    choice = question.choice(value)
    label = choice.name
    if label.lower().rstrip(",.") in {"yes", "no"}:  # "No — one unit takes longer…" needs its tail
        label = choice.label.strip()
    return label if label[1:2].isupper() else label[0].lower() + label[1:]


def _because(question: Question, value: str, why: str) -> str:
    """``why`` as a sentence, with the answer that caused it in plain words."""
    return _sentence(f"{why.rstrip('.')} (you answered: {short_label(question, value)})")


# --- the model ---------------------------------------------------------------------


class DecisionModel:
    """The catalog's weights and rules indexed for fast, repeated evaluation.

    ``recommend`` builds one per call; tests and the TUI may keep one to rank many answer sets.
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.questions = {q.id: q for q in catalog.questions}
        self.weights = [{(f.question, f.value): f for f in s.fits if f.score} for s in catalog.strategies]
        self.voiding = tuple(c for c in catalog.conflicts if c.ignore)
        # The questions that can move a score or rule a strategy out; the rest (the stack's words:
        # broker, domain) only reword the advice, so no trial answer of theirs is tried.
        deciding = {f.question for s in catalog.strategies for f in s.fits if f.score}
        deciding |= {q for s in catalog.strategies for f in s.fits for c in f.gate for q in c}
        deciding |= {q for s in catalog.strategies for r in s.rules for q in r.when}
        deciding |= {q for c in self.voiding for q in c.when}
        self.deciding = tuple(q for q in catalog.questions if q.id in deciding)

    def scored(self, answers: Mapping[str, str]) -> dict[str, str]:
        """The answers that count: without those a conflict that holds calls meaningless."""
        void = {q for c in self.voiding if condition_holds(c.when, answers) for q in c.ignore}
        return {q: v for q, v in answers.items() if q not in void}

    def score(self, index: int, answers: Mapping[str, str]) -> float:
        """The prior plus every answer's weight that counts (``answers`` as :meth:`scored` gives them)."""
        weights = self.weights[index]
        total = self.catalog.strategies[index].prior
        for item in answers.items():
            fit = weights.get(item)
            if fit is not None and fit.counts(answers):
                total += fit.score
        return total

    def ruled_out(self, strategy: Strategy, answers: Mapping[str, str]) -> tuple[str, ...]:
        return tuple(_sentence(r.say) for r in strategy.rules if condition_holds(r.when, answers))

    def rank(self, answers: Mapping[str, str]) -> list[tuple[bool, float, Strategy]]:
        """(ruled out?, score, strategy), best first: allowed strategies by score, then the
        ruled-out ones by the weight of the rules against them (then by score)."""
        answers = self.scored(answers)
        rows = []
        for i, s in enumerate(self.catalog.strategies):
            fired = [r.severity for r in s.rules if condition_holds(r.when, answers)]
            rows.append((bool(fired), sum(fired), self.score(i, answers), s))
        rows.sort(key=lambda row: (row[0], row[1], -row[2], row[3].order, row[3].id))
        return [(fired, score, s) for fired, _, score, s in rows]

    def pick(self, answers: Mapping[str, str]) -> str:
        return self.rank(answers)[0][2].id

    def sound(self, answers: Mapping[str, str], known: frozenset[str]) -> bool:
        """Answers worth suggesting: they raise no conflict beyond the ``known`` ones and leave a
        strategy standing (never `recovery_point_store=nowhere` when it rules out everything)."""
        if any(c.id not in known for c in self.conflicts(answers)):
            return False
        return not self.rank(answers)[0][0]

    def lead(self, answers: Mapping[str, str]) -> tuple[str, str, float]:
        """(top, runner-up, margin). A ruled-out runner-up behind an allowed top: no contest."""
        rows = self.rank(answers)
        (out1, s1, top), (out2, s2, second) = rows[0], rows[1]
        margin = float("inf") if out2 and not out1 else s1 - s2
        return top.id, second.id, margin

    def conflicts(self, answers: Mapping[str, str]) -> tuple[Conflict, ...]:
        return tuple(c for c in self.catalog.conflicts if condition_holds(c.when, answers))


# --- pieces of the recommendation ----------------------------------------------------


def _counted(strategy: Strategy, question: str, value: str, answers: Mapping[str, str]) -> Fit | None:
    """The strategy's weight for one answer, when it counts with these answers."""
    fit = strategy.fit(question, value)
    return fit if fit is not None and fit.score and fit.counts(answers) else None


def _ranked(model: DecisionModel, strategy: Strategy, index: int, answers: Mapping[str, str]) -> Ranked:
    reasons = []
    for question, value in answers.items():
        fit = _counted(strategy, question, value, answers)
        if fit is not None:
            why = say(fit.why, answers)
            reasons.append(Reason(question, value, fit.score, _because(model.questions[question], value, why)))
    because = [r.text for r in sorted(reasons, key=lambda r: -r.weight) if r.weight > 0]
    against = [r.text for r in sorted(reasons, key=lambda r: r.weight) if r.weight < 0]
    if strategy.prior > 0:
        because.append(_sentence(strategy.prior_why))
    return Ranked(
        strategy,
        model.score(index, answers),
        tuple(because),
        tuple(against),
        model.ruled_out(strategy, answers),
        tuple(reasons),
    )


def _why_not(model: DecisionModel, loser: Ranked, winner: Ranked, answers: Mapping[str, str]) -> tuple[str, ...]:
    """Why ``loser`` ranks below ``winner``: its ruling-out reasons first, then the answers
    where the winner gained most over it, in the loser's or the winner's own words."""
    out = list(loser.ruled_out)
    decided = {q for r in loser.strategy.rules if condition_holds(r.when, answers) for q in r.when}
    gaps = []
    for question, value in answers.items():
        if question in decided:  # the ruling-out sentence already says it
            continue
        lf, wf = _counted(loser.strategy, question, value, answers), _counted(winner.strategy, question, value, answers)
        lw, ww = (lf.score if lf else 0.0), (wf.score if wf else 0.0)
        if ww > lw:
            q = model.questions[question]
            if lf is not None and lw < 0:  # the loser's own reason names its weakness
                text = _because(q, value, say(lf.why, answers))
            elif wf is not None:
                text = _because(q, value, f"{winner.strategy.name} fits better: {say(wf.why, answers)}")
            else:
                continue
            gaps.append((ww - lw, text))
    out += [text for _, text in sorted(gaps, key=lambda g: -g[0])[: max(0, 3 - len(out))]]
    if not out:
        if loser.score == winner.score:
            out.append(f"It ties with {winner.strategy.name} on these answers; the simpler option is preferred.")
        else:
            out.append(f"{winner.strategy.name} starts ahead before any answer (the catalog's prior).")
    return tuple(out)


def _swings(model: DecisionModel, answers: Mapping[str, str], top: str) -> tuple[Swing, ...]:
    known = frozenset(c.id for c in model.conflicts(answers))
    swings = []
    for q in model.deciding:
        if q.id in answers:
            continue
        for value in q.values:
            trial = {**answers, q.id: value}
            pick = model.pick(trial)
            if pick != top and model.sound(trial, known):
                swings.append(Swing(q.id, value, pick))
    return tuple(swings)


def _settle(model: DecisionModel, answers: Mapping[str, str], top: str, threshold: float) -> tuple[Settle, ...]:
    """Answers that would end a close call: a different pick, or the same pick with a lead of at
    least the threshold. Unanswered questions first; when none settles it, the answers given.
    Only sound answers (:meth:`DecisionModel.sound`): no new conflict, a strategy left standing."""
    known = frozenset(c.id for c in model.conflicts(answers))

    def trial(candidates: Iterable[tuple[Question, str]], answered: bool) -> list[Settle]:
        found = []
        for q, value in candidates:
            trial = {**answers, q.id: value}
            pick, _, margin = model.lead(trial)
            if (pick != top or margin >= threshold) and model.sound(trial, known):
                found.append(Settle(q.id, value, pick, margin, answered))
        return found

    open_ = [(q, v) for q in model.deciding if q.id not in answers for v in q.values]
    found = trial(open_, answered=False)
    if not found:
        given = [(q, v) for q in model.deciding if q.id in answers for v in q.values if v != answers[q.id]]
        found = trial(given, answered=True)
    return tuple(found)


def _recipe(strategy: Strategy, answers: Mapping[str, str]) -> Recipe:
    rp = strategy.recovery_point
    fields: dict[str, str] = {}
    steps: list[str] = []
    for case in strategy.recipes:
        if not condition_holds(case.when, answers):
            continue
        for name in ("where", "how_often", "duplicates"):
            text = getattr(case, name)
            if text and name not in fields:
                fields[name] = text
        steps += [step for step in (say(s, answers) for s in case.steps) if step not in steps]
    return Recipe(
        say(fields.get("where", rp.where), answers), say(fields.get("how_often", rp.how_often), answers),
        say(fields.get("duplicates", rp.duplicates), answers), tuple(steps),
    )  # fmt: skip


def recipe_for(strategy: Strategy, answers: Mapping[str, str]) -> Recipe:
    """Any strategy's recovery point worded for these answers (the review and the TUI use it)."""
    return _recipe(strategy, answers)


def recommend(answers: Mapping[str, str], catalog: Catalog) -> Recommendation:
    """Rank every strategy for these (already validated) answers. Same input → same output."""
    given = {q.id: answers[q.id] for q in catalog.questions if q.id in answers}
    model = DecisionModel(catalog)
    answers = model.scored(given)  # what counts: without the answers a conflict voids
    index = {s.id: i for i, s in enumerate(catalog.strategies)}
    order = [s for _, _, s in model.rank(answers)]
    ranking = tuple(_ranked(model, s, index[s.id], answers) for s in order)
    top = ranking[0]
    why_not = {r.strategy.id: _why_not(model, r, top, answers) for r in ranking[1:]}
    notes = tuple(say(n.say, answers) for r in ranking[:2] for n in r.strategy.notes if n.holds(answers))
    scenario = next(  # the typical case: an answer given agrees with it and none contradicts it
        (row for row in catalog.scenarios if row.strategy == top.strategy.id
         and all(answers.get(q) in (None, v) for q, v in row.answers.items())
         and any(answers.get(q) == v for q, v in row.answers.items())),
        None,
    )  # fmt: skip

    warnings = [Warning(c.id, c.message, c.revisit, c.reference, c.ignore) for c in model.conflicts(given)]
    if not top.allowed:  # every strategy is ruled out: the answers contradict each other
        warnings.append(Warning(
            "everything-ruled-out",
            "Every strategy is ruled out by some answer, so these answers contradict each other; "
            f"{top.strategy.name} comes first because the answers against it weigh least. Revisit "
            "the answers its 'ruled out' lines name.",
            tuple(dict.fromkeys(q for r in ranking for q in _rule_questions(r.strategy, answers))),
        ))  # fmt: skip

    _, runner_up, margin = model.lead(answers)
    close = None
    if margin < catalog.close_call_margin:
        settle = _settle(model, given, top.strategy.id, catalog.close_call_margin)
        close = CloseCall(runner_up, margin, catalog.close_call_margin, settle)

    return Recommendation(
        answers=given,
        ignored=tuple(q for q in given if q not in answers),
        ranking=ranking,
        why_not=why_not,
        pitfalls=tuple(p for p in top.strategy.pitfalls if p.applies(answers)),
        swings=_swings(model, given, top.strategy.id),
        scenario=scenario,
        notes=notes,
        unanswered=tuple(q.id for q in catalog.questions if q.id not in given),
        warnings=tuple(warnings),
        close_call=close,
        recipe=_recipe(top.strategy, answers),
    )


def _rule_questions(strategy: Strategy, answers: Mapping[str, str]) -> list[str]:
    return [q for r in strategy.rules if condition_holds(r.when, answers) for q in r.when]


def open_questions(
    answers: Mapping[str, str], catalog: Catalog, *, depth: int = 2, recipe: bool = False
) -> tuple[str, ...]:
    """The unanswered questions whose answer can still change the top pick, in catalog order.

    ``depth=1`` tries each unanswered question alone; ``depth=2`` (the default) also tries it
    after any one other unanswered question is answered, so a question that matters only in
    combination is kept. A question not listed cannot change the pick at that depth: a UI may
    skip it. With ``recipe=True`` a question that changes the current pick's recipe (where / how
    often / duplicates / steps) or its pitfall fixes is kept too: it no longer decides the
    mechanism, but it still shapes how to build it.
    """
    model = DecisionModel(catalog)
    answers = dict(answers)
    unanswered = [q for q in catalog.questions if q.id not in answers]
    deciding = {q.id for q in model.deciding}
    top = catalog.strategy(model.pick(answers))

    def matters(q: Question, base: Mapping[str, str]) -> bool:
        if q.id not in deciding:  # it moves no score and rules nothing out
            return False
        picks = {model.pick({**base, q.id: v}) for v in q.values}
        return len(picks | {model.pick(base)}) > 1

    def shapes_recipe(q: Question) -> bool:
        def worded(a: Mapping[str, str]) -> tuple[object, ...]:
            return (_recipe(top, a), tuple(p.fix_for(a) for p in top.pitfalls if p.applies(a)))

        base = worded(answers)
        return any(worded({**answers, q.id: v}) != base for v in q.values)

    out = []
    for q in unanswered:
        if matters(q, answers) or (recipe and shapes_recipe(q)) or (
            depth >= 2
            and any(
                matters(q, {**answers, other.id: v})
                for other in unanswered
                if other.id != q.id and other.id in deciding
                for v in other.values
            )
        ):
            out.append(q.id)
    return tuple(out)
