"""Load and validate the strategy catalog (``strategies/*.yaml``) into frozen dataclasses.

The catalog is data: adding a strategy or a question means adding YAML, never Python.
Every problem is reported as a :class:`CatalogError` naming the file, the key and the
reason, so a broken catalog never ends in a traceback.

Files:
- ``questions.yaml``  the questions the engine understands (ids, choices, help)
- ``scenarios.yaml``  the source article's scenario table (scenario → strategy, with typical answers)
- ``pitfalls.yaml``   pitfalls shared by several strategies (referenced by id)
- ``conflicts.yaml``  answers that contradict each other (condition, message, what to revisit)
- ``decision.yaml``   the decision model's settings (the close-call margin)
- every other ``*.yaml`` one strategy, its file name equal to its ``id``
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from advisor.errors import CatalogError, InputError
from advisor.paths import strategies_dir
from advisor.safe_read import MAX_YAML_BYTES, decode

GRANULARITIES = ("task", "record", "event")
QUESTION_GROUPS = ("recovery_point", "trait")
RESERVED_FILES = ("questions.yaml", "scenarios.yaml", "pitfalls.yaml", "conflicts.yaml", "decision.yaml",
                  "template-settings.yaml")

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


@dataclass(frozen=True)
class Question:
    id: str
    asks: str
    help: str
    group: str  # "recovery_point" (the three recovery-point questions, Q1-Q3) or "trait"
    choices: tuple[Choice, ...]

    def choice(self, value: str) -> Choice:
        for choice in self.choices:
            if choice.id == value:
                return choice
        raise KeyError(value)

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.choices)


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
        """The fix worded for these answers (the general fix when no case holds)."""
        return next((c.fix for c in self.fix_cases if condition_holds(c.when, answers)), self.fix)


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


@dataclass(frozen=True)
class Fit:
    """How one answer moves one strategy's score, and why."""

    question: str
    value: str
    score: float
    why: str


@dataclass(frozen=True)
class Note:
    """Advice added to a recommendation when its conditions hold (mixed cases)."""

    when: Mapping[str, tuple[str, ...]]
    say: str

    def holds(self, answers: Mapping[str, str]) -> bool:
        return all(answers.get(q) in values for q, values in self.when.items())


@dataclass(frozen=True)
class ControlCase:
    """Wording of a control for particular answers (overrides why / how_to_check / fix)."""

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
    ``cases`` reword it for particular answers, the first case that holds wins.
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

    def applies(self, answers: Mapping[str, str]) -> bool:
        return all(
            answers.get(q) is None or answers[q] in values for q, values in self.applies_when.items()
        )

    def worded(self, answers: Mapping[str, str]) -> Control:
        """This control with the first matching case's wording (itself when none matches)."""
        for case in self.cases:
            if case.holds(answers):
                return Control(
                    self.id, self.question, case.why or self.why, case.how_to_check or self.how_to_check,
                    case.fix or self.fix, self.applies_when, self.reference, (), self.covers,
                )  # fmt: skip
        return self


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


@dataclass(frozen=True)
class Catalog:
    questions: tuple[Question, ...]
    strategies: tuple[Strategy, ...]
    scenarios: tuple[Scenario, ...]
    root: Path
    conflicts: tuple[Conflict, ...] = ()
    close_call_margin: float = 2.0  # a lead smaller than this is a close call (decision.yaml)

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


# --- reading -----------------------------------------------------------------------


class _Reader:
    """Typed access to one YAML mapping that reports the file and the dotted key on error."""

    def __init__(self, path: Path, data: object, key: str = "") -> None:
        self.path, self.key = path, key
        if not isinstance(data, dict):
            raise CatalogError(path, key or "(top level)", f"expected a mapping, got {_kind(data)}")
        self.data: dict[str, Any] = data

    def _k(self, key: str) -> str:
        return f"{self.key}.{key}" if self.key else key

    def error(self, key: str, reason: str) -> CatalogError:
        return CatalogError(self.path, self._k(key), reason)

    def text(self, key: str, default: str | None = None) -> str:
        value = self.data.get(key, default)
        if value is None:
            raise self.error(key, "is required (a text)")
        if isinstance(value, bool):
            raise self.error(key, "expected a text, got a boolean (YAML reads yes/no/on/off as booleans: quote it)")
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"expected a non-empty text, got {_kind(value)}")
        return value.strip()

    def number(self, key: str, default: float | None = None) -> float:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"expected a number, got {_kind(value)}")
        return float(value)

    def texts(self, key: str, required: bool = True) -> tuple[str, ...]:
        value = self.data.get(key)
        if value is None and not required:
            return ()
        if not isinstance(value, list) or not value:
            raise self.error(key, f"expected a non-empty list of texts, got {_kind(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise self.error(f"{key}[{i}]", f"expected a text, got {_kind(item)}")
        return tuple(item.strip() for item in value)

    def child(self, key: str) -> _Reader:
        return _Reader(self.path, self.data.get(key), self._k(key))

    def items(self, key: str) -> list[object]:
        value = self.data.get(key)
        if not isinstance(value, list) or not value:
            raise self.error(key, f"expected a non-empty list, got {_kind(value)}")
        return value

    def only(self, *allowed: str) -> None:
        unknown = sorted(set(self.data) - set(allowed))
        if unknown:
            raise self.error(unknown[0], f"unknown key; allowed keys: {', '.join(allowed)}")


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "a text", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _parse_yaml(path: Path, text: str) -> object:
    """Bounded nesting, no aliases (advisor/safe_read.py); a refusal names the file and the line."""
    from advisor.safe_read import parse_yaml  # imports yaml: only on a cache miss (start-up time)

    try:
        return parse_yaml(text, path, "catalog file")
    except InputError as exc:
        where, _, reason = str(exc).removeprefix(f"{path}: ").partition(": ")
        if not where.startswith("line "):
            where, reason = "(file)", str(exc).removeprefix(f"{path}: ")
        raise CatalogError(path, where, reason) from None


def cache_path(root: Path) -> Path:
    """Where the parsed form of the catalog in ``root`` is kept: the user's cache directory
    (``$XDG_CACHE_HOME``, else ``~/.cache``), one file per catalog directory — never inside the
    catalog itself, which may be a read-only install or a team's own folder."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    name = hashlib.blake2b(str(root.resolve()).encode(), digest_size=8).hexdigest()
    return base / "continuity-advisor" / f"catalog-{name}.json"


class _ParsedCache:
    """Parsed YAML of one catalog directory, kept as JSON in the user's cache and keyed by each file's content hash.

    Parsing the catalog's YAML dominates `advisor recommend`'s start-up; JSON loads ~20x faster.
    A stale entry can't be used (the hash changes with the content); a directory that can't be
    written just goes uncached. Validation always runs on the data, cached or not.
    """

    def __init__(self, root: Path) -> None:
        self.path = cache_path(root)
        self.dirty = False
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):  # a damaged cache is only a slower start
            loaded = {}
        self.entries: dict[str, Any] = loaded if isinstance(loaded, dict) else {}

    def read(self, path: Path) -> object:
        try:
            with path.open("rb") as fh:
                raw = fh.read(MAX_YAML_BYTES + 1)
        except OSError as exc:
            raise CatalogError(path, "(file)", f"cannot be read: {exc.strerror or exc}") from None
        if len(raw) > MAX_YAML_BYTES:
            raise CatalogError(path, "(file)", f"too large (over {MAX_YAML_BYTES >> 20} MiB) for a catalog file")
        try:
            text = decode(raw, path, "catalog file")
        except InputError as exc:
            raise CatalogError(path, "(file)", str(exc).removeprefix(f"{path}: ")) from None
        key = hashlib.blake2b(raw, digest_size=16).hexdigest()
        hit = self.entries.get(path.name)
        if isinstance(hit, list) and len(hit) == 2 and hit[0] == key:
            return hit[1]
        data = _parse_yaml(path, text)
        try:
            if json.loads(json.dumps(data)) == data:  # only what JSON keeps exactly (str keys, no dates)
                self.entries[path.name] = [key, data]
                self.dirty = True
        except (TypeError, ValueError):
            pass
        return data

    def save(self) -> None:
        if not self.dirty:
            return
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            tmp.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.entries, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)


_caches: dict[Path, _ParsedCache] = {}


def _read_yaml(path: Path) -> object:
    root = path.parent.resolve()
    cache = _caches.get(root)
    if cache is None:
        cache = _caches[root] = _ParsedCache(root)
    return cache.read(path)


# --- parsing -----------------------------------------------------------------------


def _conditions(r: _Reader, key: str, questions: Mapping[str, Question]) -> dict[str, tuple[str, ...]]:
    """``{question_id: value | [values]}`` checked against the questions."""
    raw = r.data.get(key)
    if raw is None:
        return {}
    cond = _Reader(r.path, raw, r._k(key))
    out: dict[str, tuple[str, ...]] = {}
    for qid, values in cond.data.items():
        if qid not in questions:
            raise cond.error(qid, f"unknown question; known: {', '.join(questions)}")
        values = [values] if isinstance(values, str) else values
        if not isinstance(values, list) or not values:
            raise cond.error(qid, "expected a value or a list of values")
        for v in values:
            if v not in questions[qid].values:
                raise cond.error(qid, f"unknown value {v!r}; valid: {', '.join(questions[qid].values)}")
        out[qid] = tuple(values)
    return out


def _question(path: Path, raw: object, index: int) -> Question:
    r = _Reader(path, raw, f"questions[{index}]")
    r.only("id", "asks", "help", "group", "choices")
    group = r.text("group")
    if group not in QUESTION_GROUPS:
        raise r.error("group", f"must be one of {', '.join(QUESTION_GROUPS)}")
    choices = []
    for i, item in enumerate(r.items("choices")):
        c = _Reader(path, item, f"{r.key}.choices[{i}]")
        c.only("id", "label", "help")
        choices.append(Choice(c.text("id"), c.text("label"), c.text("help")))
    ids = [c.id for c in choices]
    if len(set(ids)) != len(ids):
        raise r.error("choices", "choice ids must be unique")
    return Question(r.text("id"), r.text("asks"), r.text("help"), group, tuple(choices))


def load_questions(path: Path) -> tuple[Question, ...]:
    top = _Reader(path, _read_yaml(path))
    questions = tuple(_question(path, raw, i) for i, raw in enumerate(top.items("questions")))
    ids = [q.id for q in questions]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise CatalogError(path, "questions", f"duplicate question id {dupes[0]!r}")
    return questions


def _when(r: _Reader, questions: Mapping[str, Question]) -> dict[str, tuple[str, ...]]:
    when = _conditions(r, "when", questions)
    if not when:
        raise r.error("when", "a condition needs at least one `question: value`")
    return when


def _optional_url(r: _Reader, key: str) -> str | None:
    if r.data.get(key) is None:
        return None
    url = r.text(key)
    if not url.startswith(("https://", "http://")):
        raise r.error(key, "expected a public URL (https://...) a user can open")
    return url


def _pitfall(r: _Reader, questions: Mapping[str, Question]) -> Pitfall:
    r.only("id", "title", "problem", "fix", "seed", "applies_when", "fix_when")
    cases = []
    for i, raw in enumerate(r.data.get("fix_when") or []):
        c = _Reader(r.path, raw, r._k(f"fix_when[{i}]"))
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


def _avoid_when(r: _Reader, questions: Mapping[str, Question]) -> tuple[tuple[str, ...], tuple[Rule, ...]]:
    """``avoid_when``: texts, or ``{say, when, reference}`` entries whose condition rules the strategy out."""
    texts, rules = [], []
    for i, raw in enumerate(r.items("avoid_when")):
        if isinstance(raw, str) and raw.strip():
            texts.append(raw.strip())
            continue
        a = _Reader(r.path, raw, f"avoid_when[{i}]")
        a.only("say", "when", "reference", "severity")
        rule = Rule(_when(a, questions), a.text("say"), _optional_url(a, "reference"), a.number("severity", 1.0))
        texts.append(rule.say)
        rules.append(rule)
    return tuple(texts), tuple(rules)


def _recipes(r: _Reader, questions: Mapping[str, Question]) -> tuple[RecipeCase, ...]:
    cases = []
    for i, raw in enumerate(r.data.get("recipes") or []):
        c = _Reader(r.path, raw, f"recipes[{i}]")
        c.only("when", "where", "how_often", "duplicates", "steps")
        words = {k: c.text(k) if c.data.get(k) is not None else None for k in ("where", "how_often", "duplicates")}
        steps = c.texts("steps", required=False)
        if not any(words.values()) and not steps:
            raise c.error("when", "a recipe case sets at least one of where, how_often, duplicates, steps")
        cases.append(RecipeCase(_when(c, questions), words["where"], words["how_often"], words["duplicates"], steps))
    return tuple(cases)


def load_conflicts(path: Path, questions: Mapping[str, Question]) -> tuple[Conflict, ...]:
    if not path.exists():
        return ()
    top = _Reader(path, _read_yaml(path))
    out: list[Conflict] = []
    for i, raw in enumerate(top.items("conflicts")):
        c = _Reader(path, raw, f"conflicts[{i}]")
        c.only("id", "when", "message", "revisit", "reference")
        revisit = c.texts("revisit")
        for qid in revisit:
            if qid not in questions:
                raise c.error("revisit", f"unknown question {qid!r}; known: {', '.join(questions)}")
        cid = c.text("id")
        if any(other.id == cid for other in out):
            raise c.error("id", f"duplicate conflict id {cid!r}")
        out.append(Conflict(cid, _when(c, questions), c.text("message"), revisit, _optional_url(c, "reference")))
    return tuple(out)


def load_close_call_margin(path: Path) -> float:
    if not path.exists():
        return 2.0
    top = _Reader(path, _read_yaml(path))
    top.only("close_call_margin")
    margin = top.number("close_call_margin")
    if margin < 0:
        raise top.error("close_call_margin", "must be zero or more")
    return margin


def load_shared_pitfalls(path: Path, questions: Mapping[str, Question]) -> dict[str, Pitfall]:
    if not path.exists():
        return {}
    top = _Reader(path, _read_yaml(path))
    out = {}
    for i, raw in enumerate(top.items("pitfalls")):
        p = _pitfall(_Reader(path, raw, f"pitfalls[{i}]"), questions)
        out[p.id] = p
    return out


STRATEGY_KEYS = (
    "id", "name", "granularity", "summary", "recovery_point", "when_to_use", "avoid_when",
    "pros", "cons", "costs", "pitfalls", "references", "template", "fit", "prior", "notes", "order",
    "controls", "adopt", "recipes",
)  # fmt: skip

CONTROL_KEYS = ("id", "question", "why", "how_to_check", "fix", "applies_when", "reference", "cases", "covers")
_CONTROL_ID = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def load_controls(
    r: _Reader, questions: Mapping[str, Question], pitfall_ids: tuple[str, ...] = ()
) -> tuple[Control, ...]:
    """A strategy's ``controls:`` list (optional; when present, a non-empty list of mappings).

    ``covers`` names pitfalls of the same strategy (``pitfall_ids``) the control guards against.
    """
    if r.data.get("controls") is None:
        return ()
    controls: list[Control] = []
    for i, raw in enumerate(r.items("controls")):
        c = _Reader(r.path, raw, f"controls[{i}]")
        c.only(*CONTROL_KEYS)
        cid = c.text("id")
        if not _CONTROL_ID.match(cid):
            raise c.error("id", f"{cid!r} is not a control id: use lowercase words joined by '-'")
        if any(other.id == cid for other in controls):
            raise c.error("id", f"duplicate control id {cid!r} (control ids are unique per strategy)")
        reference = c.text("reference") if c.data.get("reference") is not None else None
        if reference is not None and not reference.startswith(("https://", "http://")):
            raise c.error("reference", "expected a public URL (https://...) a user can open")
        cases = []
        for j, raw_case in enumerate(c.data.get("cases") or []):
            k = _Reader(r.path, raw_case, f"{c.key}.cases[{j}]")
            k.only("when", "why", "how_to_check", "fix")
            when = _conditions(k, "when", questions)
            if not when:
                raise k.error("when", "a case needs the answers it holds for")
            words = {
                key: k.text(key) if k.data.get(key) is not None else None for key in ("why", "how_to_check", "fix")
            }
            if not any(words.values()):
                raise k.error("why", "a case rewords at least one of why, how_to_check, fix")
            cases.append(ControlCase(when, words["why"], words["how_to_check"], words["fix"]))
        covers = c.texts("covers", required=False)
        for j, pid in enumerate(covers):
            if pid not in pitfall_ids:
                known = ", ".join(pitfall_ids)
                raise c.error(f"covers[{j}]", f"{pid!r} is not a pitfall of this strategy; known: {known}")
        controls.append(
            Control(
                id=cid,
                question=c.text("question"),
                why=c.text("why"),
                how_to_check=c.text("how_to_check"),
                fix=c.text("fix"),
                applies_when=_conditions(c, "applies_when", questions),
                reference=reference,
                cases=tuple(cases),
                covers=covers,
            )
        )
    return tuple(controls)


def load_strategy(
    path: Path, questions: Mapping[str, Question], shared: Mapping[str, Pitfall]
) -> Strategy:
    r = _Reader(path, _read_yaml(path))
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
            pitfalls.append(_pitfall(_Reader(path, raw, f"pitfalls[{i}]"), questions))

    fits = []
    fit = r.child("fit")
    for qid, by_value in fit.data.items():
        if qid not in questions:
            raise fit.error(qid, f"unknown question; known: {', '.join(questions)}")
        values = _Reader(path, by_value, f"fit.{qid}")
        for value, raw in values.data.items():
            if value not in questions[qid].values:
                raise values.error(value, f"unknown value; valid: {', '.join(questions[qid].values)}")
            f = _Reader(path, raw, f"fit.{qid}.{value}")
            f.only("score", "why")
            fits.append(Fit(qid, value, f.number("score"), f.text("why")))

    template = r.child("template")
    template.only("strategy", "options")
    options = template.data.get("options") or {}
    if not isinstance(options, dict):
        raise template.error("options", "expected a mapping of template answers")

    notes = []
    for i, raw in enumerate(r.data.get("notes") or []):
        n = _Reader(path, raw, f"notes[{i}]")
        n.only("when", "say")
        notes.append(Note(_conditions(n, "when", questions), n.text("say")))

    avoid_texts, rules = _avoid_when(r, questions)
    prior = r.data.get("prior") or {"score": 0, "why": "no prior preference"}
    p = _Reader(path, prior, "prior")
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
    top = _Reader(path, _read_yaml(path))
    rows = []
    for i, raw in enumerate(top.items("scenarios")):
        r = _Reader(path, raw, f"scenarios[{i}]")
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
    shared = load_shared_pitfalls(root / "pitfalls.yaml", by_id)
    files = sorted(p for p in root.glob("*.yaml") if p.name not in RESERVED_FILES)
    if not files:
        raise CatalogError(root, "(directory)", "holds no strategy files")
    strategies = sorted((load_strategy(p, by_id, shared) for p in files), key=lambda s: (s.order, s.id))
    scenarios = load_scenarios(root / "scenarios.yaml", by_id, {s.id for s in strategies})
    conflicts = load_conflicts(root / "conflicts.yaml", by_id)
    margin = load_close_call_margin(root / "decision.yaml")
    cache = _caches.pop(root.resolve(), None)  # a valid catalog only: write its parsed files once
    if cache is not None:
        cache.save()
    return Catalog(questions, tuple(strategies), scenarios, root, conflicts, margin)
