"""The review's plans: the target design (a migration, only for an engine the team owns; a
build plan without a current design) and the verification plan.

Both are worded for the answers and the findings; neither prints a command the advisor would
refuse (a strategy without a template gets a drill of the job itself). Pure text building.
This week's fixes are the findings themselves (``judge.this_week_order``); nothing here waives one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from advisor.model.catalog import ENGINE_OWNER, SYMPTOMS, TRIGGER, Catalog, Control, Strategy, answer_values
from advisor.model.recommendation import Recommendation
from advisor.model.template_settings import flags as generate_flags

if TYPE_CHECKING:
    from advisor.model.answers import CurrentDesign
    from advisor.model.template_settings import Setting
    from advisor.review.result import Finding, Verdict

# Where the kills that matter land, by answer (the verification plan aims the drill there).
KILL_WINDOWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("external_effects", ("idempotent_api", "queryable_api", "plain_api"),
     "between an external call and the commit that records it"),
    ("outputs", ("outside_store",), "while an output file or object is half written"),
    ("work_shape", ("record_batch",), "in the middle of a batch, after some of its results are written"),
    ("work_shape", ("multi_step_flow",), "between two steps of a flow"),
    ("work_shape", ("entity_changes",), "between an append and the subscriber's commit"),
    ("work_shape", ("unbounded_stream",), "between processing a message and recording its position"),
    ("work_shape", ("single_task",), "in the middle of the task, after its first effect"),
)  # fmt: skip
# A stream engine's own window replaces the stream's general one: its words for the same moment.
ENGINE_WINDOWS = {
    "spark": "in the middle of a micro-batch (kill an executor, then the driver)",
    "flink": "between two checkpoints (kill a TaskManager, then the JobManager)",
}
DRILL_RECORDS, DRILL_KILLS = 2000, 10
# The generated project's alerts (deploy/prometheus/alerts.yml) beyond CheckpointsFailing and
# RecoverySuccessLow, which page on every project: (question, values that make it matter, alert,
# what it catches, the symptoms it would have caught, the circumstances they need, if any). Only a symptom the team saw lets the record say "this
# incident would have fired" it; without one, the alert is named as one to watch. No symptom
# tells of a store outage, so StateStoreUnreachable is only ever one to watch.
ALERTS: tuple[tuple[str, tuple[str, ...], str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("external_effects", ("plain_api",), "CallsInDoubtWaiting", "a plain call left in doubt by a crash",
     ("duplicate_effect", "stuck_unit", "work_lost"), ("crash", "planned_stop")),
    ("unit_vs_notice", ("longer_than_notice",), "UnitStuckPastLease", "a unit that stops making progress",
     ("stuck_unit", "never_finishes"), ("still_running",)),
    ("workers", ("many",), "StateStoreUnreachable", "the shared state store gone", (), ()),
    ("recovery_point_store", ("database",), "StateStoreUnreachable", "the state database gone", (), ()),
)  # fmt: skip
# Template settings that make a one-worker variant (the checkpoint's progress file): it runs one
# worker per data directory and does not retry a failing service, so the drill gets neither
# --workers nor --fail-rate (the generated drill would refuse them). Which settings the answers
# imply is data: strategies/template-settings.yaml (advisor/model/template_settings.py).
SINGLE_WORKER = {("checkpoint_store", "file")}


def likely(score: float, best: float) -> bool:
    """A likely cause: the evidence points at it at least half as strongly as at the likeliest."""
    return score > 0 and score * 2 >= best


def depends_on_unanswered(control: Control, answers: Mapping[str, str]) -> bool:
    return any(q not in answers for q in control.applies_when)


def unanswered_conditions(control: Control, answers: Mapping[str, str]) -> str:
    """"`outputs` is `outside_store`" for the conditions of a control not answered yet."""
    return " and ".join(
        f"`{q}` is " + " or ".join(f"`{v}`" for v in values)
        for q, values in control.applies_when.items()
        if q not in answers
    )


def numbers(findings: Sequence[Finding]) -> str:
    nums = [f.number for f in findings]
    if not nums:
        return ""
    if len(nums) == 1:
        return f"finding {nums[0]}"
    if nums == list(range(nums[0], nums[-1] + 1)):
        return f"findings {nums[0]}–{nums[-1]}"
    return "findings " + ", ".join(map(str, nums))


def ids(controls: Sequence[Control]) -> str:
    return ", ".join(f"`{c.id}`" for c in controls)


NOT_OWNED = ("framework", "product")  # engines the team configures or runs, never rewrites


def target_design(
    target: Strategy,
    design: CurrentDesign | None,
    findings: tuple[Finding, ...],
    in_place: tuple[Control, ...],
    rec: Recommendation,
    catalog: Catalog,
    verdict: Verdict | None,
    settings: Sequence[Setting] = (),
    owner: str | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[Control, ...]]:
    """The second track: (ordered steps, what to keep, controls still to build). This week's
    fixes are never waived for it (they are the first track). No current design: a build plan.

    The category is kept when it fits, or when the team does not own the engine (a framework it
    configures, a product it runs): then the target is that engine's configuration, and the
    controls listed are what the advisor's top pick would add, asked of its settings."""
    answers = rec.answers
    if design is None:
        steps = [f"Build it: {_where(rec, target)}"]
        if target.id in _generated():
            steps.append(
                f"Start from the generated reference (`advisor generate {target.id} ./{_slug()}{generate_flags(settings)}`)"
                " and move the real work into it." + because(settings)
            )
        steps.append("Put each essential control below in place before the first production run.")
        return tuple(steps), (), tuple(c.worded(answers) for c in target.controls if c.applies(answers))

    current = catalog.strategy(design.strategy)
    fits = verdict is not None and verdict.fits
    in_place_text = [f"the controls in place: {ids(in_place)}"] if in_place else []
    if current.id == target.id and (fits or owner not in NOT_OWNED or rec.top.strategy.id == current.id):
        keep = (
            f"the category — {current.name} fits these answers; no rewrite is needed"
            if fits
            else f"the category, by the team's choice — though {current.name} does not fit these answers (see above)"
        )
        return (), (keep, *in_place_text), ()
    if current.id == target.id:  # does not fit, and the engine is not the team's to rewrite
        top = rec.top.strategy
        have = {c.id for c in current.controls}
        asks = tuple(c.worded(answers) for c in top.controls if c.applies(answers) and c.id not in have)
        engine = _engine(answers, catalog)
        steps = [
            f"Keep {engine} (`{ENGINE_OWNER}={owner}`): the target is its configuration, not a rewrite as"
            f" {top.name}. This week's fixes come first; they are settings of it or code of your own tasks.",
        ]
        if asks:
            where = "its settings and your tasks" if owner == "framework" else "its settings (or its maintainers)"
            steps.append(f"Then ask of {where} what {top.name} would add for these answers (below), one at a time.")
        return tuple(steps), (f"{engine} and its category ({current.name})", *in_place_text), asks

    target_controls = [c.worded(answers) for c in target.controls if c.applies(answers)]
    target_ids = {c.id for c in target_controls}
    carry = [f for f in findings if f.control.id in target_ids]
    kept = [c for c in in_place if c.id in target_ids]
    described = {k.id for k in kept} | {f.control.id for f in findings}
    to_build = tuple(c for c in target_controls if c.id not in described)
    owned = (
        f" Only if the team owns the engine (`{ENGINE_OWNER}=own_code`); a framework or a product is configured instead."
        if owner is None
        else ""
    )
    steps = [
        "Weigh it apart from this week's fixes, which ship first whatever is decided"
        + (f"; {numbers(carry)} carry over, {target.name} needs them too." if carry else ".")
        + owned
    ]
    steps.append(f"Add the recovery point: {_where(rec, target)}")
    if target.adopt:
        steps.append(f"Switch over: {target.adopt}")
    steps.append(
        f"Stop the {current.name} workers with SIGTERM at a safe point, start the new ones, and retire the old"
        " path once the verification plan passes."
    )
    keep_text = [f"the controls that carry over: {ids(kept)}"] if kept else []
    keep_text.append("the job's own business logic; only how it records progress and calls out changes")
    return tuple(steps), tuple(keep_text), to_build


def _engine(answers: Mapping[str, str], catalog: Catalog) -> str:
    """The engine the team runs, in its words: the runner when answered, else the owner's kind."""
    runner = answers.get("runner")
    if runner and runner not in ("plain", "other"):
        return catalog.question("runner").choice(runner).label.split(" (")[0]
    return "the framework" if answers.get(ENGINE_OWNER) == "framework" else "the product"


def because(settings: Sequence[Setting]) -> str:
    """The settings' reasons, one clause each (empty without settings)."""
    if not settings:
        return ""
    return " Its settings follow your answers: " + "; ".join(f"`{s.key}={s.value}` — {s.reason}" for s in settings) + "."


def _where(rec: Recommendation, target: Strategy) -> str:
    recipe = rec.recipe if rec.top.strategy.id == target.id else None
    return recipe.where if recipe is not None else target.recovery_point.where


def _generated() -> frozenset[str]:
    """Strategies the template can generate today (never print a command the advisor would refuse)."""
    try:
        from advisor.model.template_questions import generated_strategies
    except Exception:  # pragma: no cover - the template is part of the package
        return frozenset()
    return generated_strategies()


def _slug() -> str:
    return "continuity-job"  # the template's default project name gives package `continuity_job`


def verification_plan(
    target: Strategy,
    answers: Mapping[str, str],
    findings: tuple[Finding, ...],
    in_place: tuple[Control, ...],
    to_build: tuple[Control, ...],
    settings: Sequence[Setting] = (),
) -> tuple[str, ...]:
    steps = []
    claims = (
        f"controls marked in place ({ids(in_place)}) are claims until their checks pass too"
        f" (`advisor explain {target.id}` lists every check)"
        if in_place
        else ""
    )
    if claims:  # this week's fixes say they are closed by their checks; claims need theirs too
        steps.append(claims[0].upper() + claims[1:] + ".")
    windows = list(dict.fromkeys(
        ENGINE_WINDOWS.get(answers.get("runner", ""), text) if qid == "work_shape" and values == ("unbounded_stream",) else text
        for qid, values, text in KILL_WINDOWS if answers.get(qid) in values
    ))  # fmt: skip
    aim = "; ".join(windows) if windows else "at random moments while work is in flight"
    options = generate_flags(settings)
    single_worker = any((s.key, s.value) in SINGLE_WORKER for s in settings)
    flags = f"--records {DRILL_RECORDS} --kills {DRILL_KILLS} --json"
    if answers.get("workers") == "many" and not single_worker:
        flags += " --workers 3"
    if answers.get("external_effects") in ("idempotent_api", "queryable_api", "plain_api") and not single_worker:
        flags += " --fail-rate 0.2"
    if target.id in _generated():
        pkg = _slug().replace("-", "_")
        steps.append(
            "Prove the mechanism on the generated reference first:"
            f" `advisor generate {target.id} ./{_slug()}{options}`, then"
            f" `cd {_slug()} && make setup && .venv/bin/python -m {pkg} drill {flags}` — accept only `lost = 0` and"
            " `duplicate_effects = 0`."
        )
    else:
        steps.append(
            f"No generated reference exists for {target.name} yet: drill a staging copy of the job itself —"
            f" {DRILL_KILLS} kill -9s at random moments, restart after each, then compare input and output."
        )
    steps.append(
        f"Drill the real job the same way, with kills aimed at these moments: {aim} (a sleep or a breakpoint"
        " there makes the window reproducible). After every kill nothing may be missing or applied twice."
    )
    on_reference = " (`drill --sigterm` on the generated reference)" if target.id in _generated() else ""
    if answers.get("unit_vs_notice") == "longer_than_notice":
        steps.append(
            f"Send SIGTERM in the middle of a unit{on_reference}: the unit's progress must be saved within the"
            " notice (Kubernetes' grace period, 30 s by default; the 2-minute spot notice)."
        )
    else:
        steps.append(
            f"Send SIGTERM instead of SIGKILL{on_reference}: every stop records its progress and exits 0 within the"
            " grace period."
        )
    if target.id in _generated():
        steps.append(_alert_step(answers, single_worker))
    # The queries that prove it: spelled out for controls the record does not print a check for,
    # referred to by finding number for the others.
    queries = [(c, q) for c in to_build for q in _SQL.findall(c.how_to_check)[:1]]
    shown = [f for f in findings if _SQL.search(f.control.how_to_check)]
    parts = [f"`{q}` (`{c.id}`)" for c, q in queries]
    if shown:
        parts.append(f"the queries in the checks of {numbers(shown)}")
    if parts:
        steps.append(f"In production, after each incident and each drill, these return no rows: {'; '.join(parts)}.")
    return tuple(steps)


_SQL = re.compile(r"`(SELECT (?:(?!\.\.\.)[^`])+? FROM (?:(?!\.\.\.)[^`])+)`")  # a whole query, no "..." placeholders


def _alert_step(answers: Mapping[str, str], single_worker: bool) -> str:
    """The generated alerts (deploy/prometheus/alerts.yml) these answers make matter, and which of
    them would have paged on what the team saw."""
    seen = set(answer_values(answers, SYMPTOMS))
    when = answers.get(TRIGGER)
    fired: dict[str, str] = {}
    watch: dict[str, str] = {}
    for qid, values, alert, why, catches, during in ALERTS:
        if answers.get(qid) not in values or (single_worker and alert == "StateStoreUnreachable"):
            continue  # the file variant has no store
        caught = seen & set(catches) and (when is None or not during or when in during)
        (fired if caught else watch).setdefault(alert, why)
    watch = {alert: why for alert, why in watch.items() if alert not in fired}

    def listed(named: Mapping[str, str]) -> str:
        return "; ".join(f"`{alert}` ({why})" for alert, why in named.items())

    tail = (f"; this incident would have fired {listed(fired)}" if fired else "") + (
        f"; with these answers watch {listed(watch)} too" if watch else "")
    return ("In production, page on the generated `deploy/prometheus/alerts.yml` (`make deploy-check` tests it):"
            " `CheckpointsFailing` and `RecoverySuccessLow` for every job" + tail + ".")
