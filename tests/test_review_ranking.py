"""Review v3: findings ranked by the evidence (strategies/evidence.yaml, symptom × answers →
control weight), each saying why it ranks where it does; the two tracks (this week apart from
the target design, no fix ever waived for a rewrite, a rewrite only for an engine the team owns);
the new controls; the evidence file's loader; and the calibration figures the docs report."""

from __future__ import annotations

import datetime as dt
import re
import sys
from pathlib import Path

import pytest
import yaml

from advisor.errors import CatalogError
from advisor.model.answers import CurrentDesign
from advisor.model.loader import load_catalog
from advisor.review.judge import decision_record, review

DAY = dt.date(2026, 1, 2)
CALIBRATION = Path(__file__).resolve().parent / "calibration"


def first(catalog, answers, current, **kw):
    return review(answers, catalog, current=CurrentDesign(current), **kw).findings[0].control.id


def section(text: str, heading: str) -> str:
    body = text.split(heading + "\n", 1)[1]
    return re.split(r"\n#{2,3} ", body, maxsplit=1)[0]


# --- the ranking, case by case (every control unknown: only the evidence orders them) -------------

RANKING = [
    # A batch whose retried attempt re-used the failed attempt's staged files: outputs live
    # outside the store, so atomic publication outranks the key controls declared before it.
    ({"work_shape": "record_batch", "outputs": "outside_store", "symptoms": "duplicate_effect"},
     "checkpoint", "partial-output-published-atomically"),
    # A truncated progress file: the local file is the recovery point, corrupt state points at it.
    ({"recovery_point_store": "local_disk", "symptoms": "corrupt_state"}, "checkpoint", "checkpoint-file-checksummed"),
    # An agent whose non-deterministic steps were thrown away with the run.
    ({"work_shape": "multi_step_flow", "nondeterminism": "nondeterministic", "symptoms": "redone_from_zero"},
     "state-machine", "journal-nondeterministic-results"),
    # Hour-long messages redelivered while still running: the claim is shorter than the unit.
    ({"recovery_point_store": "broker_or_orchestrator", "duration": "hours", "workers": "many",
      "symptoms": "duplicate_effect"}, "idempotent-retry", "lease-longer-than-run"),
    # A message handed out again and again that never completes, however short the task looks.
    ({"recovery_point_store": "broker_or_orchestrator", "duration": "seconds",
      "symptoms": "duplicate_effect,never_finishes"}, "idempotent-retry", "lease-longer-than-run"),
    # Early acknowledgement: the broker forgot a task a killed worker never finished.
    ({"recovery_point_store": "broker_or_orchestrator", "symptoms": "work_lost"}, "idempotent-retry", "ack-after-commit"),
    # A watermark advanced before the rows outside the store were written: work lost.
    ({"outputs": "outside_store", "symptoms": "work_lost"}, "checkpoint", "output-durable-before-progress"),
    # A unit longer than the notice, cut by planned restarts that could have waited.
    ({"unit_vs_notice": "longer_than_notice", "kill_control": "can_defer", "symptoms": "never_finishes"},
     "idempotent-retry", "planned-kills-deferred"),
    # Per-key order broken by retries: a status went backwards.
    ({"ordering": "per_key", "symptoms": "corrupt_state"}, "stream-checkpoint", "per-key-ordering"),
    # A unit left pending after its worker died.
    ({"recovery_point_store": "database", "symptoms": "stuck_unit"}, "state-machine", "stale-tasks-reclaimed"),
    # Restarts replay the whole history: snapshots.
    ({"recovery_point_store": "event_log", "symptoms": "slow_recovery"}, "event-sourcing", "snapshots"),
    # A call repeated after a crash to a service that can be asked: look it up first.
    ({"external_effects": "queryable_api", "symptoms": "duplicate_effect"}, "idempotent-retry", "intent-before-call"),
    # The two copies of a repeated job carried different ids: one made per run.
    ({"workers": "many", "symptoms": "duplicate_effect", "duplicate_ids": "new_id"}, "idempotent-retry", "key-from-input"),
    # The same webhook event, accepted twice by a consumer of redelivered input: the effect's key.
    ({"inbound_duplicates": "possible", "symptoms": "duplicate_effect", "recovery_point_found": "right",
      "duplicate_ids": "same_id"}, "idempotent-retry", "unique-key-with-effect"),
    # The answers alone, no symptom: a local progress file is where a cut-off write can bite.
    ({"recovery_point_store": "local_disk"}, "checkpoint", "checkpoint-file-checksummed"),
]  # fmt: skip


@pytest.mark.parametrize("answers,current,expected", RANKING, ids=[r[2] for r in RANKING])
def test_the_evidence_puts_the_likeliest_cause_first(catalog, answers, current, expected):
    assert first(catalog, answers, current) == expected


def test_without_evidence_the_order_is_the_catalogs(catalog):
    r = review({}, catalog, current=CurrentDesign("checkpoint"))
    declared = [c.id for c in catalog.strategy("checkpoint").controls]
    found = [f.control.id for f in r.findings]
    assert found == [c for c in declared if c in found] and all(f.score == 0 for f in r.findings)


def test_missing_controls_stay_first_whatever_the_evidence(catalog):
    answers = {"recovery_point_store": "local_disk", "symptoms": "corrupt_state"}
    current = CurrentDesign("checkpoint", {"sigterm-within-grace": "no"})
    r = review(answers, catalog, current=current)
    assert [f.control.id for f in r.findings[:2]] == ["sigterm-within-grace", "checkpoint-file-checksummed"]


def test_each_finding_says_why_it_ranks_where_it_does(catalog):
    answers = {"work_shape": "record_batch", "outputs": "outside_store", "symptoms": "duplicate_effect"}
    text = decision_record(answers, catalog, current=CurrentDesign("checkpoint"), date=DAY)
    findings = section(text, "## Findings")
    assert "Ranked by what you saw (an effect applied twice)" in findings
    line = findings.split("1. **Unknown:", 1)[1].split("\n2. ", 1)[0]
    assert "Ranked first:" in line and "an effect applied twice" in line and "`outputs=outside_store`" in line
    assert "nothing you saw points at" in findings  # the unexplained ones, named together


def test_a_restart_that_starts_again_is_not_read_as_a_duplicate(catalog):
    """"again" alone says a restart as often as a repeat: only words that name a repeated effect
    suggest one."""
    from advisor.review.ranking import symptoms_seen

    restarted = symptoms_seen({}, catalog, "Preempted every few hours, the training starts again from epoch 0.")
    assert "duplicate_effect" not in restarted.symptoms
    assert "duplicate_effect" in symptoms_seen({}, catalog, "After the deploy the invoices were sent again.").symptoms


def test_the_context_may_add_a_symptom_and_the_record_says_so(catalog, catalog_copy):
    answers = {"recovery_point_store": "local_disk"}
    words = "After the power cut the progress file was corrupted and the job would not start."
    r = review(answers, catalog, current=CurrentDesign("checkpoint"), context=words)
    assert r.seen.inferred == (("corrupt_state", "corrupted"),) and r.seen.answered == ()
    assert r.findings[0].control.id == "checkpoint-file-checksummed"
    text = decision_record(answers, catalog, current=CurrentDesign("checkpoint"), context=words, date=DAY)
    assert 'corrupt or inconsistent state ("corrupted")' in text and "not answered: confirm with `symptoms`" in text
    answered = review({**answers, "symptoms": "corrupt_state"}, catalog, current="checkpoint", context=words)
    assert answered.seen.inferred == ()  # an answered symptom is not inferred again
    # A word is weaker evidence than an answer: each rule it alone makes hold counts half (the
    # rules alone: the past incidents compared differ with the symptom answered or not).
    (catalog_copy / "precedents.yaml").unlink()
    rules_only = load_catalog(catalog_copy)
    scores = {f.control.id: f.score for f in review(answers, rules_only, current="checkpoint", context=words).findings}
    scored = {f.control.id: f.score for f in review({**answers, "symptoms": "corrupt_state"}, rules_only,
                                                    current="checkpoint", context=words).findings}
    assert all(scored[c] / 2 <= scores[c] <= scored[c] for c in scored if scored[c] > 0), (scores, scored)
    assert scores["checkpoint-file-checksummed"] < scored["checkpoint-file-checksummed"], (scores, scored)


def test_the_teams_words_can_name_a_mechanism_no_answer_has_a_value_for(catalog_copy):
    """A rule with `words` holds only when the context says one (whole words, any case), and the
    record quotes the word that made it hold."""
    rule = GOOD_RULE.replace("    when: {outputs: outside_store}\n", "    words: [rate limited, \"429\"]\n")
    (catalog_copy / "precedents.yaml").unlink()  # the rule alone
    (catalog_copy / "evidence.yaml").write_text("rules:\n" + rule)
    catalog = load_catalog(catalog_copy)
    answers = {"symptoms": "duplicate_effect", "outputs": "outside_store", "work_shape": "record_batch"}

    def score(context):
        findings = review(answers, catalog, current=CurrentDesign("checkpoint"), context=context).findings
        return {f.control.id: f.score for f in findings}["partial-output-published-atomically"]

    assert score("The API answered 429 and we kept going.") == score("We got RATE LIMITED all night.") == 2
    assert score(None) == score("error 4290 from the proxy") == score("it was rate-limitedish") == 0
    text = decision_record(answers, catalog, current=CurrentDesign("checkpoint"), context="They sent 429 back.", date=DAY)
    assert 'the context says "429"' in section(text, "## Findings")


def test_a_retry_storm_in_the_teams_words_puts_bounded_retries_first(catalog):
    """The bundled words: the same answers rank the bounded retries first only when the team's
    context says the other side was rate limiting."""
    answers = {"symptoms": "work_lost", "trigger": "retry_after_error", "broker": "redis"}
    said = "When the push service started rate limiting us, the jobs kept hammering it until our IP was banned."
    assert first(catalog, answers, "idempotent-retry", context=said) == "bounded-retries"
    assert first(catalog, answers, "idempotent-retry") != "bounded-retries"


def test_a_claim_held_by_a_dead_worker_is_worded_as_one_that_outlives_it(catalog):
    """The lease ranks for both ways a claim fails, and the finding says the one the team saw: a
    task stuck under a dead worker's claim, or a second run started while the first still ran."""
    def lease(answers):
        r = review(answers, catalog, current=CurrentDesign("idempotent-retry"))
        return next(f.control for f in r.findings if f.control.id == "lease-longer-than-run")

    stuck = lease({"symptoms": "stuck_unit", "trigger": "crash", "recovery_point_found": "held_by_dead", "workers": "many"})
    assert "outlives its worker" in stuck.why and "heartbeat" in stuck.fix and "two runs" not in stuck.why
    twice = lease({"symptoms": "duplicate_effect", "trigger": "still_running", "workers": "many"})
    assert "two runs and two effects" in twice.why and "outlives" not in twice.why


# --- the two tracks ----------------------------------------------------------------------------


def test_this_week_puts_the_cheapest_likely_fix_first(catalog):
    """Two likely causes of a duplicate: the lease (a setting) comes before the unique key (a schema)."""
    answers = {"recovery_point_store": "broker_or_orchestrator", "duration": "hours", "workers": "many",
               "inbound_duplicates": "possible", "symptoms": "duplicate_effect"}  # fmt: skip
    r = review(answers, catalog, current=CurrentDesign("idempotent-retry"))
    week = [f.control.id for f in r.this_week]
    assert week[0] == "lease-longer-than-run" and week.index("lease-longer-than-run") < week.index("unique-key-with-effect")
    text = decision_record(answers, catalog, current=CurrentDesign("idempotent-retry"), date=DAY)
    assert "1. **`lease-longer-than-run`** (finding 1, a setting). *Check:*" in section(text, "## This week")


def test_a_rewrite_never_waives_this_weeks_fix(catalog):
    """The category does not fit; the control that was the incident's fix is still patched first."""
    answers = {"work_shape": "record_batch", "duration": "hours", "recovery_point_store": "broker_or_orchestrator",
               "symptoms": "work_lost", "engine_owner": "own_code"}  # fmt: skip
    current = CurrentDesign("idempotent-retry", {"ack-after-commit": "no"})
    text = decision_record(answers, catalog, current=current, date=DAY)
    assert "**Does not fit.**" in text
    assert "1. **`ack-after-commit`** (finding 1, a setting). *Fix:*" in section(text, "## This week")
    target = section(text, "## Target design")
    assert "Weigh it apart from this week's fixes" in target and "Add the recovery point" in target
    assert "weeks away" not in text and "disappears with" not in text


@pytest.mark.parametrize("owner", ["framework", "product"])
def test_an_engine_the_team_does_not_own_is_configured_not_rewritten(catalog, owner):
    answers = {"work_shape": "multi_step_flow", "external_effects": "queryable_api", "runner": "airflow",
               "engine_owner": owner, "symptoms": "duplicate_effect"}  # fmt: skip
    r = review(answers, catalog, current=CurrentDesign("idempotent-retry"))
    assert r.verdict is not None and not r.verdict.fits and r.rec.top.strategy.id != "idempotent-retry"
    assert r.target.strategy.id == "idempotent-retry" and not r.rewrites
    text = decision_record(answers, catalog, current=CurrentDesign("idempotent-retry"), date=DAY)
    target = section(text, "## Target design")
    assert "Keep Airflow" in target and "its configuration, not a rewrite" in target
    assert "Add the recovery point" not in target and "Switch over" not in target
    assert f"What {r.rec.top.strategy.name} would add, asked of its configuration:" in target
    assert "configured, not rewritten" in section(text, "## Decision outcome")


def test_an_unanswered_owner_gets_the_migration_with_its_condition(catalog):
    answers = {"work_shape": "multi_step_flow", "external_effects": "queryable_api"}
    text = decision_record(answers, catalog, current=CurrentDesign("idempotent-retry"), date=DAY)
    assert "Only if the team owns the engine (`engine_owner=own_code`)" in section(text, "## Target design")


def test_a_fitting_category_has_no_migration(catalog):
    text = decision_record({"work_shape": "record_batch", "duration": "hours"}, catalog,
                           current=CurrentDesign("checkpoint"), date=DAY)  # fmt: skip
    assert section(text, "## Target design").strip().startswith("No migration: keep the category")


# --- the new controls ---------------------------------------------------------------------------


def test_a_declared_gap_is_read_as_the_control_these_answers_need(catalog):
    """`results-and-progress-together: no` with outputs outside the store was printed "Not needed";
    it stands for the position-after-output control now."""
    current = CurrentDesign("checkpoint", {"results-and-progress-together": "no"})
    r = review({"outputs": "outside_store"}, catalog, current=current)
    assert (r.findings[0].control.id, r.findings[0].status) == ("output-durable-before-progress", "no")
    assert r.stood_in == (("output-durable-before-progress", "results-and-progress-together"),)
    text = decision_record({"outputs": "outside_store"}, catalog, current=current, date=DAY)
    assert "`results-and-progress-together` (your answer for it is read as `output-durable-before-progress`)" in text


@pytest.mark.parametrize("sid", ["checkpoint", "idempotent-retry", "stream-checkpoint"])
def test_per_key_ordering_is_advice_not_a_score_line(catalog, sid):
    r = review({"ordering": "per_key"}, catalog, current=CurrentDesign(sid))
    finding = next(f for f in r.findings if f.control.id == "per-key-ordering")
    assert "hold that key" in finding.control.fix


@pytest.mark.parametrize("sid", ["checkpoint", "idempotent-retry", "state-machine"])
def test_planned_kills_are_deferred_when_units_outlast_the_notice(catalog, sid):
    answers = {"kill_control": "can_defer", "unit_vs_notice": "longer_than_notice"}
    control = next(f.control for f in review(answers, catalog, current=CurrentDesign(sid)).findings
                   if f.control.id == "planned-kills-deferred")  # fmt: skip
    assert control.effort == "setting" and "safe-to-evict" in control.fix and "PodDisruptionBudget" in control.fix
    assert "planned-kills-deferred" not in {f.control.id for f in review({"kill_control": "none"}, catalog,
                                                                         current=CurrentDesign(sid)).findings}


# --- the rules file's loader --------------------------------------------------------------------

GOOD_RULE = """\
  - id: test-rule
    symptoms: [duplicate_effect]
    when: {outputs: outside_store}
    raise: {partial-output-published-atomically: 2}
    says: a test rule
"""

BAD_EVIDENCE = [
    # each: what replaces the test rule, the key the error names, a word of its reason
    (GOOD_RULE.replace("[duplicate_effect]", "[double_charge]"), "rules[", "unknown symptom"),
    (GOOD_RULE.replace("partial-output-published-atomically", "retry-harder"), "raise.retry-harder", "not a control"),
    (GOOD_RULE.replace(": 2}", ": high}"), "raise.partial-output-published-atomically", "number"),
    (GOOD_RULE.replace(": 2}", ": 0}"), "raise.partial-output-published-atomically", "changes nothing"),
    (GOOD_RULE.replace("outputs: outside_store", "output: outside_store"), "when.output", "unknown question"),
    (GOOD_RULE.replace("outputs: outside_store", "outputs: elsewhere"), "when.outputs", "unknown value"),
    (GOOD_RULE.replace("outputs: outside_store", "symptoms: work_lost"), "when.symptoms", "several values"),
    (GOOD_RULE.replace("    symptoms: [duplicate_effect]\n", "").replace("    when: {outputs: outside_store}\n", ""),
     "when", "needs `symptoms`, `when` or `words`"),
    (GOOD_RULE.replace("    says:", "    words: rate limited\n    says:"), "words", "list"),
    (GOOD_RULE + GOOD_RULE, "id", "duplicate rule id"),
    (GOOD_RULE.replace("    says: a test rule\n", "    says: a test rule\n    weight: 3\n"), "weight", "unknown key"),
    (GOOD_RULE.replace("    says: a test rule\n", ""), "says", "required"),
    (GOOD_RULE.replace("raise: {partial-output-published-atomically: 2}", "raise: {}"), "raise", "at least one control"),
    (GOOD_RULE.replace("    when:", "    together: [work_lost, stuck_unit]\n    when:"), "together", "not both"),
    (GOOD_RULE.replace("symptoms: [duplicate_effect]", "together: [duplicate_effect]"), "together", "at least two"),
]  # fmt: skip


@pytest.mark.parametrize("rule,key,reason", BAD_EVIDENCE)
def test_a_broken_evidence_rule_names_file_key_and_reason(catalog_copy, rule, key, reason):
    (catalog_copy / "evidence.yaml").write_text("rules:\n" + rule)
    with pytest.raises(CatalogError) as err:
        load_catalog(catalog_copy)
    message = str(err.value)
    assert "evidence.yaml" in message and key in message and reason in message, message


def test_a_together_rule_needs_every_symptom_it_names(catalog_copy):
    """`together`: a pattern (a unit handed out again and again) that neither symptom shows alone."""
    rule = GOOD_RULE.replace("symptoms: [duplicate_effect]", "together: [duplicate_effect, never_finishes]")
    (catalog_copy / "precedents.yaml").unlink()  # the rule alone
    (catalog_copy / "evidence.yaml").write_text("rules:\n" + rule)
    catalog = load_catalog(catalog_copy)
    answers = {"work_shape": "record_batch", "outputs": "outside_store"}
    both = review({**answers, "symptoms": "duplicate_effect,never_finishes"}, catalog,
                  current=CurrentDesign("checkpoint")).findings
    one = review({**answers, "symptoms": "duplicate_effect"}, catalog, current=CurrentDesign("checkpoint")).findings
    score = {f.control.id: f.score for f in both}
    assert score["partial-output-published-atomically"] == 2 and both[0].control.id == "partial-output-published-atomically"
    assert all(f.score == 0 for f in one)


def test_an_unless_rule_is_ruled_out_only_by_an_answer_given(catalog_copy):
    """`unless`: "a message comes back while its task still runs" holds for a team that did not say
    how long its tasks take, and not for one whose tasks take seconds."""
    rule = GOOD_RULE.replace("    when: {outputs: outside_store}\n", "    unless: {duration: seconds}\n")
    (catalog_copy / "precedents.yaml").unlink()  # the rule alone
    (catalog_copy / "evidence.yaml").write_text("rules:\n" + rule)
    catalog = load_catalog(catalog_copy)

    def score(answers):
        findings = review({**answers, "symptoms": "duplicate_effect", "outputs": "outside_store"}, catalog,
                          current=CurrentDesign("checkpoint")).findings
        return {f.control.id: f.score for f in findings}["partial-output-published-atomically"]

    assert score({}) == score({"duration": "hours"}) == 2
    assert score({"duration": "seconds"}) == 0
    (catalog_copy / "evidence.yaml").write_text("rules:\n" + rule.replace("{duration: seconds}", "{duration: days}"))
    with pytest.raises(CatalogError) as err:
        load_catalog(catalog_copy)
    assert "unless" in str(err.value) and "unknown value" in str(err.value)


IMPLIED_RULE = """\
  - id: test-file-cut-off
    symptoms: [corrupt_state]
    when: {recovery_point_store: local_disk}
    raise: {checkpoint-file-checksummed: 4}
    says: a recovery file was cut off mid-write
"""
IMPLIED = """\
implied:
  - when: {runner: slurm}
    answers: {recovery_point_store: local_disk}
    says: a batch-scheduler job restarts from its files
"""


def test_the_stack_implies_an_unanswered_answer_at_half_weight_and_the_record_says_so(catalog_copy):
    """A SLURM job's recovery point is most likely a file it wrote: a rule about files holds for a
    team that did not say where it keeps progress, at half its weight (a likelihood is weaker than
    an answer); an answer given always wins."""
    (catalog_copy / "precedents.yaml").unlink()  # the rule alone
    (catalog_copy / "evidence.yaml").write_text(IMPLIED + "rules:\n" + IMPLIED_RULE)
    catalog = load_catalog(catalog_copy)

    def score(answers):
        r = review({"symptoms": "corrupt_state", **answers}, catalog, current=CurrentDesign("checkpoint"))
        return {f.control.id: f.score for f in r.findings}.get("checkpoint-file-checksummed", 0), r

    assert score({"recovery_point_store": "local_disk"})[0] == 4
    implied, r = score({"runner": "slurm"})
    assert implied == 2 and r.seen.implied == (("recovery_point_store", "local_disk", "runner=slurm"),)
    assert r.findings[0].control.id == "checkpoint-file-checksummed"
    assert score({"runner": "slurm", "recovery_point_store": "database"})[0] == 0  # the team's answer wins
    assert score({"runner": "celery"})[0] == 0  # another stack implies nothing here
    text = decision_record({"symptoms": "corrupt_state", "runner": "slurm"}, catalog,
                           current=CurrentDesign("checkpoint"), date=DAY)
    assert "`recovery_point_store=local_disk`, likely with `runner=slurm`" in text


@pytest.mark.parametrize(("implied", "key", "reason"), [
    (IMPLIED.replace("answers: {recovery_point_store: local_disk}", "answers: {recovery_point_store: tape}"),
     "implied[0].answers", "unknown value"),
    (IMPLIED.replace("answers: {recovery_point_store: local_disk}", "answers: {recovery_point_store: [local_disk, database]}"),
     "implied[0].answers", "one value"),
    (IMPLIED.replace("- when: {runner: slurm}\n    answers", "- answers"), "implied[0].when", "at least one"),
    (IMPLIED.replace("    says: a batch-scheduler job restarts from its files\n", ""), "says", "required"),
])  # fmt: skip
def test_a_broken_implied_entry_names_file_key_and_reason(catalog_copy, implied, key, reason):
    (catalog_copy / "evidence.yaml").write_text(implied + "rules:\n" + IMPLIED_RULE)
    with pytest.raises(CatalogError) as err:
        load_catalog(catalog_copy)
    message = str(err.value)
    assert "evidence.yaml" in message and key in message and reason in message, message


def test_a_good_rule_loads_and_a_catalog_without_the_file_ranks_by_declaration(catalog_copy):
    (catalog_copy / "evidence.yaml").write_text("rules:\n" + GOOD_RULE)
    rules = load_catalog(catalog_copy).evidence.rules
    assert [r.id for r in rules] == ["test-rule"] and rules[0].weights == {"partial-output-published-atomically": 2.0}
    (catalog_copy / "evidence.yaml").unlink()
    (catalog_copy / "precedents.yaml").unlink()
    bare = load_catalog(catalog_copy)
    assert bare.evidence.rules == () and bare.evidence.precedents == () and first(bare, {"recovery_point_store": "local_disk"}, "checkpoint") == (
        "resumes-from-latest"
    )


@pytest.mark.parametrize(
    "name,old,new,key,reason",
    [
        ("evidence.yaml", "  duplicate_effect: [", "  double_charge: [", "keywords.double_charge", "unknown symptom"),
        ("checkpoint.yaml", "applies_when: {recovery_point_store: [local_disk, object_storage]}",
         "applies_when: {symptoms: [corrupt_state]}", "applies_when.symptoms", "several values"),
        ("checkpoint.yaml", "    effort: setting\n", "    effort: cheap\n", "effort", "cheapest first"),
        ("checkpoint.yaml", "stands_in_for: results-and-progress-together", "stands_in_for: results-together",
         "stands_in_for", "not another control"),
        ("questions.yaml", "    multiple: true\n", "    multiple: several\n", "multiple", "true or false"),
    ],
)  # fmt: skip
def test_the_new_keys_are_validated(catalog_copy, name, old, new, key, reason):
    path = catalog_copy / name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(CatalogError) as err:
        load_catalog(catalog_copy)
    assert name in str(err.value) and key in str(err.value) and reason in str(err.value), str(err.value)


def test_every_control_is_named_by_some_rule(catalog):
    """A control no rule names could never rise above the catalog's order, whatever was seen."""
    controls = {c.id for s in catalog.strategies for c in s.controls}
    named = {cid for rule in catalog.evidence.rules for cid in rule.weights}
    assert named == controls, (sorted(controls - named), sorted(named - controls))


# --- calibration: records stay short, the figures in the docs are measured ------------------------

sys.path.insert(0, str(CALIBRATION))


def test_records_stay_under_100_lines_over_the_calibration_rows(catalog):
    from review_ranking import TUNED, load_rows, measure

    results = measure(load_rows(TUNED), catalog)
    assert max(r.lines for r in results) <= 100, [(r.id, r.lines) for r in results if r.lines > 100]


def test_every_blind_round_is_in_the_table_and_the_last_is_the_held_out_part():
    from review_ranking import FIGURES, TUNED

    recorded = yaml.safe_load(FIGURES.read_text(encoding="utf-8"))
    rounds = recorded["blind_rounds"]
    assert [r["round"] for r in rounds] == list(range(1, len(TUNED) + 1))  # one a round, none missing
    last, held = rounds[-1], recorded["heldout"]
    assert all(last[k] == held[k] for k in ("rows", "scored", "first", "first_two", "picks_accepted"))
    assert last.get("by_support") == held.get("by_support")
    doc = (Path(__file__).resolve().parents[1] / "docs" / "calibration.md").read_text(encoding="utf-8")
    n, first = sum(r["scored"] for r in rounds), sum(r["first"] for r in rounds)
    assert f"| all {len(rounds)} |" in doc and f"{first} of {n} ({first / n:.0%})" in doc
    rated = [r for r in rounds if "by_support" in r]
    for r in rated:  # a split of the round's scored rows: never more than it scored
        split = r["by_support"].values()
        assert sum(s["scored"] for s in split) <= r["scored"] and sum(s["first"] for s in split) <= r["first"]
    firm = [sum(r["by_support"]["firm"][k] for r in rated) for k in ("first", "scored")]
    assert not rated or f"{firm[0]} of {firm[1]} first" in doc


def test_the_recorded_tuned_figures_are_what_the_measure_gives(catalog):
    """docs/calibration.md shows tests/calibration/review_figures.yaml; the tuned part must match a
    fresh run (the held-out part is measured once and only its presence is checked here)."""
    from review_ranking import FIGURES, TUNED, figures, load_rows, measure

    recorded = yaml.safe_load(FIGURES.read_text(encoding="utf-8"))
    fresh = figures(measure(load_rows(TUNED), catalog))
    assert {k: recorded["tuned"][k] for k in fresh} == fresh, "stale: run tests/calibration/review_ranking.py --write"
    assert {"first", "first_two", "scored", "picks_accepted", "measured"} <= set(recorded["heldout"])
    doc = (Path(__file__).resolve().parents[1] / "docs" / "calibration.md").read_text(encoding="utf-8")
    for part in ("tuned", "heldout"):
        f = recorded[part]
        assert f"{f['first']} of {f['scored']}" in doc and f"{f['first_two']} of {f['scored']}" in doc, part
