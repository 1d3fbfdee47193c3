"""A close call between the two likeliest causes, and the observation that would settle it.

The review ranks the findings by the evidence. When the first leads the second by little, one
more thing the team can look up (when it happened, what the recorded progress said, how the two
copies of a repeated effect were identified) tells it more than either fix would: for each such
question left open, and each of its values, the findings are ranked again as if that value were
given. The values that put the second finding ahead, and those that leave the first clearly ahead,
are what the record asks the team to check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from advisor.model.catalog import DUPLICATE_IDS, ENGINE_OWNER, RECOVERY_POINT_FOUND, TRIGGER, Catalog, Control
from advisor.review.ranking import Likelihood

#: The second finding is a close call when its likelihood is at least this share of the first's:
#: about one "common cause" rule (weight 2, evidence.yaml) short of a "usual cause" (3).
CLOSE = 2 / 3
#: A value settles it for the first finding when it leaves the second below this share of it.
CLEAR = 1 / 2
#: Values named per side: more would be a list to read, not a check to make.
SHOWN = 3
#: How the record names a question to look up (others: by what they ask).
ABOUT = {TRIGGER: "when it happened", RECOVERY_POINT_FOUND: "what the recorded progress said",
         DUPLICATE_IDS: "how the two copies were identified"}


@dataclass(frozen=True)
class Separator:
    """One open question whose answer would tell the first two findings apart."""

    question: str
    for_first: tuple[str, ...]  # values that leave the first finding clearly ahead (CLEAR)
    for_second: tuple[str, ...]  # values that put the second finding ahead


def _observations(catalog: Catalog, answers: Mapping[str, str]) -> list[str]:
    """The evidence questions a team can look up after the fact, not answered yet (single values:
    the symptoms are already the ranking's base; who owns the engine ranks nothing)."""
    return [q.id for q in catalog.questions
            if q.group == "evidence" and not q.multiple and q.id != ENGINE_OWNER and not answers.get(q.id)]


def separators(
    listed: Sequence[tuple[Control, Likelihood]],
    answers: Mapping[str, str],
    status: Mapping[str, str],
    catalog: Catalog,
    order: Callable[[Mapping[str, str]], Sequence[tuple[Control, Likelihood]]],
) -> tuple[Separator, ...]:
    """``listed``: the findings as ranked; ``order``: how they would rank with other answers.
    Nothing when the first two are not a close call (or do not share a status: a control marked
    missing comes first whatever was seen)."""
    if len(listed) < 2:
        return ()
    (first, one), (second, two) = listed[0], listed[1]
    if status[first.id] != status[second.id] or two.score <= 0 or two.score < CLOSE * one.score:
        return ()
    out = []
    for qid in _observations(catalog, answers):
        ahead, behind = [], []
        for value in catalog.question(qid).values:
            again = order({**answers, qid: value})
            scores = {c.id: found.score for c, found in again}
            top = again[0][0].id if again else None
            # Only a value that is evidence for a finding (it raises it) speaks for it; one that
            # merely lowers the other is no reason to look there.
            if top == second.id and scores[second.id] > two.score:
                behind.append(value)
            elif top == first.id and scores[first.id] > one.score and scores.get(second.id, 0.0) < CLEAR * scores[first.id]:
                ahead.append(value)
        if ahead and behind:  # a question either of whose answers leaves the tie is no check
            out.append(Separator(qid, tuple(ahead[:SHOWN]), tuple(behind[:SHOWN])))
    return tuple(out)


def separator_sentence(found: Sequence[Separator], catalog: Catalog) -> str:
    """One sentence for the record: which answers would put finding 1 or finding 2 first."""
    if not found:
        return ""

    def names(qid: str, values: Sequence[str]) -> str:
        question = catalog.question(qid)
        return " or ".join(question.choice(v).name.lower() for v in values)

    parts = [f"{ABOUT.get(s.question) or catalog.question(s.question).asks.rstrip('?')} (`{s.question}`):"
             f" {names(s.question, s.for_second)} points at 2, {names(s.question, s.for_first)} at 1" for s in found]
    return "Findings 1 and 2 are a close call; what would tell them apart: " + "; ".join(parts) + "."
