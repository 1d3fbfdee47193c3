"""Load and validate the strategy catalog (``strategies/*.yaml``) into the dataclasses of
``advisor.model.catalog``.

Every problem is reported as a :class:`CatalogError` naming the file, the key and the
reason, so a broken catalog never ends in a traceback.

Files:
- ``questions.yaml``  the questions the engine understands (ids, choices, help)
- ``scenarios.yaml``  the source article's scenario table (scenario → strategy, with typical answers)
- ``pitfalls.yaml``   pitfalls shared by several strategies (referenced by id)
- ``conflicts.yaml``  answers that contradict each other (condition, message, what to revisit)
- ``decision.yaml``   the decision model's settings (the close-call margin)
- ``template-settings.yaml``  template answers implied by answers (``advisor.model.template_settings``)
- ``evidence.yaml``   the review's ranking rules: symptom × answers → control weights
  (``advisor.model.evidence_loader``)
- ``precedents.yaml``  past incidents the review compares answers with (``advisor.model.precedents_loader``)
- ``stack-words.yaml``  the [[terms]] texts may name, worded per stack (``advisor.model.words_file``)
- every other ``*.yaml`` one strategy, its file name equal to its ``id``
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from advisor.errors import CatalogError
from advisor.model.catalog import (
    GRANULARITIES,
    MULTIPLE_SEPARATOR,
    QUESTION_GROUPS,
    Catalog,
    Choice,
    Condition,
    Fit,
    FixCase,
    Note,
    Pitfall,
    Question,
    RecipeCase,
    RecoveryPoint,
    Rule,
    Scenario,
    Strategy,
)
from advisor.model.condition_reader import read_conditions as _conditions
from advisor.model.condition_reader import read_url as _optional_url
from advisor.model.condition_reader import read_when as _when
from advisor.model.conflicts_file import load_close_call_margin, load_conflicts
from advisor.model.controls_loader import load_controls
from advisor.model.evidence_loader import load_evidence
from advisor.model.parsed_cache import read_yaml, save_cache
from advisor.model.precedents_loader import PRECEDENTS_FILE
from advisor.model.words_file import WORDS_FILE, load_words
from advisor.model.yaml_reader import LOADING_WORDS, Reader
from advisor.paths import strategies_dir

RESERVED_FILES = ("questions.yaml", "scenarios.yaml", "pitfalls.yaml", "conflicts.yaml", "decision.yaml",
                  "template-settings.yaml", "evidence.yaml", PRECEDENTS_FILE, WORDS_FILE)


def _question(path: Path, raw: object, index: int) -> Question:
    r = Reader(path, raw, f"questions[{index}]")
    r.only("id", "asks", "help", "group", "choices", "multiple")
    group = r.text("group")
    if group not in QUESTION_GROUPS:
        raise r.error("group", f"must be one of {', '.join(QUESTION_GROUPS)}")
    multiple = r.data.get("multiple", False)
    if not isinstance(multiple, bool):
        raise r.error("multiple", "expected true or false (several values at once, or one)")
    choices = []
    for i, item in enumerate(r.items("choices")):
        c = Reader(path, item, f"{r.key}.choices[{i}]")
        c.only("id", "label", "help")
        choices.append(Choice(c.text("id"), c.text("label"), c.text("help")))
    ids = [c.id for c in choices]
    if len(set(ids)) != len(ids):
        raise r.error("choices", "choice ids must be unique")
    if multiple and any(MULTIPLE_SEPARATOR in i or i == "unknown" for i in ids):
        raise r.error("choices", f"a multiple-value question's choice ids may not contain {MULTIPLE_SEPARATOR!r} nor be 'unknown'")
    return Question(r.text("id"), r.text("asks"), r.text("help"), group, tuple(choices), multiple)


def load_questions(path: Path) -> tuple[Question, ...]:
    top = Reader(path, read_yaml(path))
    questions = tuple(_question(path, raw, i) for i, raw in enumerate(top.items("questions")))
    ids = [q.id for q in questions]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise CatalogError(path, "questions", f"duplicate question id {dupes[0]!r}")
    return questions


def _pitfall(r: Reader, questions: Mapping[str, Question]) -> Pitfall:
    r.only("id", "title", "problem", "fix", "seed", "applies_when", "fix_when")
    cases = []
    for i, raw in enumerate(r.data.get("fix_when") or []):
        c = Reader(r.path, raw, r.key_of(f"fix_when[{i}]"))
        c.only("when", "fix")
        cases.append(FixCase(_when(c, questions), c.text("fix")))
    return Pitfall(
        id=r.text("id"),
        title=r.text("title"),
        problem=r.text("problem"),
        fix=r.text("fix"),
        seed=str(r.data.get("seed", "")).strip() or "-",
        applies_when=_conditions(r, "applies_when", questions),
        fix_cases=tuple(cases),
    )


def _avoid_when(r: Reader, questions: Mapping[str, Question]) -> tuple[tuple[str, ...], tuple[Rule, ...]]:
    """``avoid_when``: texts, or ``{say, when, reference}`` entries whose condition rules the strategy out."""
    texts, rules = [], []
    for i, raw in enumerate(r.items("avoid_when")):
        if isinstance(raw, str) and raw.strip():
            texts.append(raw.strip())
            continue
        a = Reader(r.path, raw, f"avoid_when[{i}]")
        a.only("say", "when", "reference", "severity")
        rule = Rule(_when(a, questions), a.text("say"), _optional_url(a, "reference"), a.number("severity", 1.0))
        texts.append(rule.say)
        rules.append(rule)
    return tuple(texts), tuple(rules)


def _recipes(r: Reader, questions: Mapping[str, Question]) -> tuple[RecipeCase, ...]:
    cases = []
    for i, raw in enumerate(r.data.get("recipes") or []):
        c = Reader(r.path, raw, f"recipes[{i}]")
        c.only("when", "where", "how_often", "duplicates", "steps")
        words = {k: c.text(k) if c.data.get(k) is not None else None for k in ("where", "how_often", "duplicates")}
        steps = c.texts("steps", required=False)
        if not any(words.values()) and not steps:
            raise c.error("when", "a recipe case sets at least one of where, how_often, duplicates, steps")
        cases.append(RecipeCase(_when(c, questions), words["where"], words["how_often"], words["duplicates"], steps))
    return tuple(cases)


def load_shared_pitfalls(path: Path, questions: Mapping[str, Question]) -> dict[str, Pitfall]:
    if not path.exists():
        return {}
    top = Reader(path, read_yaml(path))
    out = {}
    for i, raw in enumerate(top.items("pitfalls")):
        p = _pitfall(Reader(path, raw, f"pitfalls[{i}]"), questions)
        out[p.id] = p
    return out


STRATEGY_KEYS = (
    "id", "name", "granularity", "summary", "recovery_point", "when_to_use", "avoid_when",
    "pros", "cons", "costs", "pitfalls", "references", "template", "fit", "prior", "notes", "order",
    "controls", "adopt", "recipes", "gates",
)  # fmt: skip


def _gates(r: Reader, questions: Mapping[str, Question]) -> dict[str, tuple[Condition, ...]]:
    """``gates: {name: [{when: ...}, ...]}``: a fit marked ``needs: name`` counts when any holds."""
    if r.data.get("gates") is None:
        return {}
    gates = r.child("gates")
    out: dict[str, tuple[Condition, ...]] = {}
    for name in gates.data:
        items = gates.items(str(name))
        out[str(name)] = tuple(_when(Reader(r.path, item, f"gates.{name}[{i}]"), questions) for i, item in enumerate(items))
    return out


def load_strategy(
    path: Path, questions: Mapping[str, Question], shared: Mapping[str, Pitfall]
) -> Strategy:
    r = Reader(path, read_yaml(path))
    r.only(*STRATEGY_KEYS)
    sid = r.text("id")
    if sid != path.stem:
        raise r.error("id", f"must equal the file name {path.stem!r} (got {sid!r})")
    granularity = r.text("granularity")
    if granularity not in GRANULARITIES:
        raise r.error("granularity", f"must be one of {', '.join(GRANULARITIES)}")
    rp = r.child("recovery_point")
    rp.only("where", "how_often", "duplicates")

    pitfalls = []
    for i, raw in enumerate(r.items("pitfalls")):
        if isinstance(raw, str):  # a reference to pitfalls.yaml
            if raw not in shared:
                raise r.error(f"pitfalls[{i}]", f"unknown shared pitfall {raw!r}; known: {', '.join(shared)}")
            pitfalls.append(shared[raw])
        else:
            pitfalls.append(_pitfall(Reader(path, raw, f"pitfalls[{i}]"), questions))

    gates = _gates(r, questions)
    fits = []
    fit = r.child("fit")
    for qid, by_value in fit.data.items():
        if qid not in questions:
            raise fit.error(qid, f"unknown question; known: {', '.join(questions)}")
        values = Reader(path, by_value, f"fit.{qid}")
        for value, raw in values.data.items():
            if value not in questions[qid].values:
                raise values.error(value, f"unknown value; valid: {', '.join(questions[qid].values)}")
            f = Reader(path, raw, f"fit.{qid}.{value}")
            f.only("score", "why", "needs")
            gate: tuple[Condition, ...] = ()
            if f.data.get("needs") is not None:
                gate = gates.get(f.text("needs"), ())
                if not gate:
                    raise f.error("needs", f"unknown gate; this strategy's `gates:` define: {', '.join(gates) or '(none)'}")
            fits.append(Fit(qid, value, f.number("score"), f.text("why"), gate))

    template = r.child("template")
    template.only("strategy", "options")
    options = template.data.get("options") or {}
    if not isinstance(options, dict):
        raise template.error("options", "expected a mapping of template answers")

    notes = []
    for i, raw in enumerate(r.data.get("notes") or []):
        n = Reader(path, raw, f"notes[{i}]")
        n.only("when", "say")
        notes.append(Note(_conditions(n, "when", questions), n.text("say")))

    avoid_texts, rules = _avoid_when(r, questions)
    prior = r.data.get("prior") or {"score": 0, "why": "no prior preference"}
    p = Reader(path, prior, "prior")
    p.only("score", "why")
    return Strategy(
        id=sid,
        name=r.text("name"),
        granularity=granularity,
        summary=r.text("summary"),
        recovery_point=RecoveryPoint(rp.text("where"), rp.text("how_often"), rp.text("duplicates")),
        when_to_use=r.texts("when_to_use"),
        avoid_when=avoid_texts,
        pros=r.texts("pros"),
        cons=r.texts("cons"),
        costs=r.texts("costs"),
        pitfalls=tuple(pitfalls),
        references=r.texts("references"),
        template=template.text("strategy"),
        template_options=dict(options),
        fits=tuple(fits),
        prior=p.number("score"),
        prior_why=p.text("why"),
        notes=tuple(notes),
        order=int(r.number("order")),
        controls=load_controls(r, questions, tuple(p.id for p in pitfalls)),
        adopt=r.text("adopt") if r.data.get("adopt") is not None else None,
        rules=rules,
        recipes=_recipes(r, questions),
    )


def load_scenarios(path: Path, questions: Mapping[str, Question], strategy_ids: set[str]) -> tuple[Scenario, ...]:
    top = Reader(path, read_yaml(path))
    rows = []
    for i, raw in enumerate(top.items("scenarios")):
        r = Reader(path, raw, f"scenarios[{i}]")
        r.only("id", "scenario", "strategy", "why", "answers")
        strategy = r.text("strategy")
        if strategy not in strategy_ids:
            raise r.error("strategy", f"unknown strategy {strategy!r}; known: {', '.join(sorted(strategy_ids))}")
        answers = {q: v[0] for q, v in _conditions(r, "answers", questions).items()}
        if not answers:
            raise r.error("answers", "a scenario needs its typical answers")
        rows.append(Scenario(r.text("id"), r.text("scenario"), strategy, r.text("why"), answers))
    return tuple(rows)


def load_catalog(root: Path | None = None) -> Catalog:
    """Load every file under ``root`` (default: the bundled ``strategies/``) or raise CatalogError."""
    root = Path(root) if root is not None else strategies_dir()
    if not root.is_dir():
        raise CatalogError(root, "(directory)", "the strategy catalog directory does not exist")
    questions = load_questions(root / "questions.yaml")
    by_id = {q.id: q for q in questions}
    words = load_words(root / WORDS_FILE, by_id)
    loading = LOADING_WORDS.set(words)  # texts naming [[terms]] load as Worded strings
    try:
        shared = load_shared_pitfalls(root / "pitfalls.yaml", by_id)
        files = sorted(p for p in root.glob("*.yaml") if p.name not in RESERVED_FILES)
        if not files:
            raise CatalogError(root, "(directory)", "holds no strategy files")
        strategies = sorted((load_strategy(p, by_id, shared) for p in files), key=lambda s: (s.order, s.id))
        scenarios = load_scenarios(root / "scenarios.yaml", by_id, {s.id for s in strategies})
        conflicts = load_conflicts(root / "conflicts.yaml", by_id)
    finally:
        LOADING_WORDS.reset(loading)
    margin = load_close_call_margin(root / "decision.yaml")
    evidence = load_evidence(root / "evidence.yaml", by_id, strategies)
    save_cache(root)  # a valid catalog only: write its parsed files once
    return Catalog(questions, tuple(strategies), scenarios, root, conflicts, margin, words, evidence)
