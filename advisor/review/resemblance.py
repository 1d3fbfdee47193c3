"""How closely the team's own words describe what a control guards against.

The `context:` text is compared, word by word, with each control's own text in the catalog (its
question, why and fix, alone and with each of its cases: the closest wording counts, so a control
with many cases is not diluted by them): TF-IDF over those texts, so a word every control uses
("task", "key") weighs little and one only a few use ("lease", "rename", "offset") weighs
much. No past incident is read: it works for a control no incident has named yet, and what it
says is checkable — the record quotes the shared words.

It is weak evidence, one more reading of the words a reviewer reads (the rules with `words` in
``strategies/evidence.yaml`` are the other), and counts only when a context is given.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from advisor.model.catalog import Catalog

# Words that say nothing about a mechanism; the rest of the weighing is done by IDF.
_STOP = frozenset(
    "a an the of to and or in on is are be it its that this for with by as at from was were not no if then so do"
    " does did their our we they you your has have had any every one each when after before into only than more"
    " what which who where while still over instead very because about again same other".split()
)
_WORD = re.compile(r"[a-z][a-z'-]+")
# A shared word is quoted only when at most about a fifth of the controls use it: "task" or "key"
# match a third of the catalog or more and explain nothing to the reader (they still count).
_QUOTED_IDF = 1.5


def words(text: str) -> list[str]:
    """The words that can name a mechanism, lowercase, in order (stop words and short ones left out)."""
    return [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP]


@dataclass(frozen=True)
class Resemblance:
    score: float  # cosine of the two TF-IDF vectors, 0..1
    shared: tuple[str, ...]  # the shared words that weigh most, most first


NONE = Resemblance(0.0, ())


def _texts(catalog: Catalog) -> tuple[tuple[str, str], ...]:
    """Each control's wordings, over every strategy that declares it: its own text (question, why,
    fix), and that text with each case's why and fix."""
    out = []
    for sid in catalog.strategy_ids:
        for c in catalog.strategy(sid).controls:
            own = " ".join([c.question, c.why, c.fix])
            out += [(c.id, own)] + [(c.id, " ".join([own, case.why or "", case.fix or ""])) for case in c.cases]
    return tuple(out)


def _unit(counts: Mapping[str, int], idf: Mapping[str, float]) -> dict[str, float]:
    vec = {w: (1.0 + math.log(n)) * idf[w] for w, n in counts.items() if w in idf}
    norm = math.sqrt(sum(x * x for x in vec.values())) or 1.0
    return {w: x / norm for w, x in vec.items()}


@lru_cache(maxsize=4)
def _model(texts: tuple[tuple[str, str], ...]) -> tuple[dict[str, float], tuple[tuple[str, dict[str, float]], ...]]:
    """(IDF over the controls — one document each, all its wordings together —, each wording's vector)."""
    by_control: dict[str, Counter[str]] = {}
    for cid, text in texts:
        by_control.setdefault(cid, Counter()).update(words(text))
    df = Counter(w for counts in by_control.values() for w in counts)
    idf = {w: math.log((len(by_control) + 1) / (n + 0.5)) for w, n in df.items()}
    return idf, tuple((cid, _unit(Counter(words(text)), idf)) for cid, text in texts)


def resemblances(context: str, catalog: Catalog) -> dict[str, Resemblance]:
    """Control id → how closely ``context`` describes what that control guards against."""
    if not context.strip():
        return {}
    idf, wordings = _model(_texts(catalog))
    mine = _unit(Counter(words(context)), idf)
    found: dict[str, Resemblance] = {}
    for cid, vec in wordings:
        parts = sorted(((x * vec[w], w) for w, x in mine.items() if w in vec), reverse=True)
        score = sum(p for p, _ in parts)
        if parts and (cid not in found or score > found[cid].score):  # the closest wording counts
            found[cid] = Resemblance(score, tuple(w for _, w in parts if idf[w] >= _QUOTED_IDF)[:3])
    return found
