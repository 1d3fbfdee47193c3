"""Decision records (review v3): findings first (ranked by the evidence), then the fit, this
week's fixes apart from the target design, a verification plan for this case, and the MADR
sections — short, specific, and never citing internal documents. The ranking itself and the two
tracks in depth: tests/test_review_ranking.py."""

from __future__ import annotations

import datetime as dt
import os
import re
import stat

import pytest

from advisor.errors import AnswersError, OutputExistsError
from advisor.model.answers import CurrentDesign
from advisor.model.engine import recommend
from advisor.model.loader import load_catalog
from advisor.review.judge import decision_record, judge_current, review
from advisor.safe_write import write_text_safely

DAY = dt.date(2026, 1, 2)
BATCH = {"duration": "hours", "work_shape": "record_batch", "workers": "many", "external_effects": "idempotent_api",
         "recovery_point_store": "database"}  # fmt: skip
WEBHOOK = {"duration": "seconds", "work_shape": "single_task", "duplicate_cost": "unacceptable",
           "inbound_duplicates": "possible", "external_effects": "idempotent_api", "acceptable_loss": "whole_task"}  # fmt: skip
LEDGER = {"work_shape": "entity_changes", "audit": "required", "duplicate_cost": "unacceptable",
          "recovery_point_store": "event_log", "external_effects": "idempotent_api", "acceptable_loss": "nothing"}  # fmt: skip
AGENT = {"duration": "hours", "work_shape": "multi_step_flow", "nondeterminism": "nondeterministic",
         "recovery_point_store": "database", "external_effects": "queryable_api"}  # fmt: skip
STREAM = {"work_shape": "unbounded_stream", "recovery_point_store": "stream_engine", "duration": "hours",
          "workers": "many"}  # fmt: skip

WITH_CURRENT = ["## Findings", "### Does the category fit?", "## This week", "## Target design", "## Verification plan",
                "## Context and problem statement", "## Decision drivers", "## Considered options",
                "## Decision outcome", "### Consequences"]  # fmt: skip
WITHOUT_CURRENT = ["## Build plan", "## Verification plan", "## Context and problem statement", "## Decision drivers",
                   "## Considered options", "## Decision outcome", "### Consequences"]  # fmt: skip


def record(catalog, answers=BATCH, **kw):
    return decision_record(answers, catalog, date=DAY, **kw)


def section(text: str, heading: str) -> str:
    body = text.split(heading + "\n", 1)[1]
    return re.split(r"\n#{2,3} ", body, maxsplit=1)[0]


# --- structure -------------------------------------------------------------------------


def test_sections_in_order_with_a_current_design(catalog):
    text = record(catalog, current=CurrentDesign("checkpoint"))
    positions = [text.index(s) for s in WITH_CURRENT]
    assert positions == sorted(positions)


def test_sections_in_order_without_one(catalog):
    text = record(catalog)
    positions = [text.index(s) for s in WITHOUT_CURRENT]
    assert positions == sorted(positions)
    assert "## Findings" not in text
    # the decided strategy's essential controls become a checklist of the build plan
    plan = section(text, "## Build plan")
    assert "- [ ] **" in plan and "`optimistic-progress-update`" in plan  # workers=many


def test_title_and_outcome(catalog):
    text = record(catalog)
    # no context, no --title: the job as the answers describe it (a record batch), never one title for all
    assert text.splitlines()[0] == "# Continuity mechanism for the batch job: Checkpoint + state table"
    assert 'Chosen option: "Checkpoint + state table" (`checkpoint`)' in text
    for s in catalog.strategies:
        assert f"**{s.name}** (`{s.id}`" in section(text, "## Considered options")


def test_context_is_the_teams_own_words(catalog):
    words = "Redeployed mid-run on 3 May: two workers both processed batch 41 and 212 customers got two invoices."
    text = record(catalog, context=words)
    assert section(text, "## Context and problem statement").lstrip().startswith(words)
    assert "can be killed mid-way" not in text  # no boilerplate when the team said it
    assert "Hours or more (`duration=hours`)" in text


def test_chosen_overrides_and_states_the_gap(catalog):
    text = record(catalog, chosen="event-sourcing")
    assert 'Chosen option: "Event sourcing" (`event-sourcing`). The advisor ranked Checkpoint + state table first' in text


# --- findings ----------------------------------------------------------------------------


def test_fitting_category_with_a_missing_control_leads_with_that_control(catalog):
    """The incident class the issue names: the category fits, an ingredient is missing."""
    current = CurrentDesign("checkpoint", {"optimistic-progress-update": "no", "results-and-progress-together": "yes"})
    text = record(catalog, current=current)
    findings = section(text, "## Findings")
    first = next(line for line in findings.splitlines() if line.startswith("1. "))
    assert first.startswith("1. **Missing:") and "`optimistic-progress-update`" in first
    verdict = section(text, "### Does the category fit?")
    assert "**Right category, missing controls.**" in verdict and "finding 1" in verdict
    assert "**Fits.**" not in text  # never "Fits" above the real gap
    assert text.index("optimistic-progress-update") < text.index("### Does the category fit?")


def test_missing_controls_come_before_unknown_ones(catalog):
    current = CurrentDesign("idempotent-retry", {"sigterm-within-grace": "no", "key-from-input": "no",
                                                 "unique-key-with-effect": "yes"})  # fmt: skip
    r = review(WEBHOOK, catalog, current=current)
    statuses = [f.status for f in r.findings]
    assert statuses == sorted(statuses, key=lambda s: s != "no") and statuses[:2] == ["no", "no"]
    assert [f.number for f in r.findings] == list(range(1, len(r.findings) + 1))
    assert [f.control.id for f in r.missing] == ["key-from-input", "sigterm-within-grace"]  # catalog order
    assert "unique-key-with-effect" in {c.id for c in r.in_place}


def test_every_finding_says_why_and_this_week_says_how_to_check_and_fix(catalog):
    """A finding says what and why; this week says the check and the fix — each once. Findings
    nothing points at share one line of this week, which names where their checks are."""
    text = record(catalog, current=CurrentDesign("checkpoint"))
    blocks = re.split(r"\n(?=\d+\. )", section(text, "## Findings"))[1:]
    assert blocks
    for block in blocks:
        assert "*Why:*" in block and "Check:" not in block and "Fix:" not in block, block
    week = re.split(r"\n(?=\d+\. )", section(text, "## This week"))[1:]
    assert len(week) >= 3
    for line in week:
        assert ("*Check:*" in line and "*If it fails:*" in line) or "`advisor explain checkpoint`" in line, line
    ids = re.findall(r"^\d+\. \*\*.*?\(`([a-z-]+)`\)", section(text, "## Findings"), re.M)
    assert len(ids) == len(blocks)
    assert all(f"`{i}`" in section(text, "## This week") for i in ids)  # every finding is patched or checked


def test_findings_are_worded_for_the_answers(catalog):
    """Cases reword a control for the answers, and the finding names the answers that make it matter."""
    current = CurrentDesign("idempotent-retry", {"key-from-input": "no"})
    finding = review(WEBHOOK, catalog, current=current).findings[0]
    assert finding.control.id == "key-from-input"
    assert "can arrive twice" in finding.control.why  # the inbound_duplicates=possible case
    assert any("inbound_duplicates=possible" in h for h in finding.here)
    plain = review({**WEBHOOK, "external_effects": "plain_api"}, catalog, current=CurrentDesign("idempotent-retry"))
    check = next(f for f in plain.findings if f.control.id == "intent-before-call")
    assert "can't be asked" in check.control.fix  # no "ask the service by key" for SMTP


def test_unknown_controls_that_hang_on_unanswered_questions_are_named_not_expanded(catalog):
    """`outputs` unanswered: the atomic-publication control is named in one line with its condition,
    unless the team said it is missing — then it is a full finding."""
    r = review(BATCH, catalog, current=CurrentDesign("checkpoint"))
    assert "partial-output-published-atomically" in {c.id for c in r.undecided}
    assert "partial-output-published-atomically" not in {f.control.id for f in r.findings}
    text = record(catalog, current=CurrentDesign("checkpoint"))
    assert "`outputs` is `outside_store` (`partial-output-published-atomically`)" in section(text, "## Findings")
    said = review(BATCH, catalog, current=CurrentDesign("checkpoint", {"partial-output-published-atomically": "no"}))
    assert said.findings[0].control.id == "partial-output-published-atomically"


def test_controls_that_do_not_apply_are_not_findings(catalog):
    r = review({**BATCH, "workers": "one"}, catalog, current=CurrentDesign("checkpoint", {"optimistic-progress-update": "no"}))
    assert "optimistic-progress-update" not in {f.control.id for f in r.findings}
    assert "optimistic-progress-update" in {c.id for c in r.not_needed}


def test_a_fitting_design_with_every_control_in_place_fits(catalog):
    strategy = catalog.strategy("checkpoint")
    answers = {**BATCH, "outputs": "in_progress_store", "unit_vs_notice": "fits_notice"}
    current = CurrentDesign("checkpoint", {c.id: "yes" for c in strategy.controls})
    text = record(catalog, answers, current=current)
    assert "**Fits.**" in text and "0 missing, 0 unknown" in text


# --- the fit and what it risks ---------------------------------------------------------------


@pytest.mark.parametrize(
    "current,fits",
    [
        ("checkpoint", True),  # the top pick
        ("idempotent-retry", False),  # hours of rerun per kill
        ("stream-checkpoint", False),  # a finite batch is no stream
    ],
)
def test_current_strategy_verdict(catalog, current, fits):
    verdict = judge_current(recommend(BATCH, catalog), current)
    assert verdict.fits is fits
    text = record(catalog, current=current)
    if not fits:
        assert "**Does not fit.**" in text


def test_a_category_far_behind_fits_while_no_answer_counts_against_it(catalog):
    """Points ahead are the top pick's strengths; only an answer against the current design makes
    it a misfit (a rewrite would not fix what the team saw, a missing control would)."""
    quiet = {"duration": "hours", "recovery_point_store": "database"}
    rec = recommend(quiet, catalog)
    ranked = rec.ranked("state-machine")
    assert rec.top.score - ranked.score > 2 and not any(r.weight < 0 for r in ranked.reasons)
    verdict = judge_current(rec, "state-machine")
    assert verdict.fits and "none of these answers counts against it" in verdict.summary
    assert review(quiet, catalog, current="state-machine").target.strategy.id == "state-machine"
    # One answer against it (a record batch is no flow of steps), and the same gap is a misfit.
    against = {**quiet, "work_shape": "record_batch"}
    verdict = judge_current(recommend(against, catalog), "state-machine")
    assert not verdict.fits and "does not fit" in verdict.summary
    assert review(against, catalog, current="state-machine").target.strategy.id == "checkpoint"


def test_risks_are_only_what_the_answers_hold_against_it(catalog):
    """Never the winner's strengths reworded, never every pitfall of the current strategy."""
    rec = recommend(BATCH, catalog)
    verdict = judge_current(rec, "idempotent-retry")
    ranked = rec.ranked("idempotent-retry")
    assert verdict.risks and set(verdict.risks) <= set(ranked.against) | set(ranked.ruled_out)
    assert any("hours" in r.lower() for r in verdict.risks)
    risks = section(record(catalog, current="idempotent-retry"), "### Does the category fit?")
    assert "pitfall" not in risks.lower()


# --- migration path ---------------------------------------------------------------------------


def test_target_design_differs_by_current_strategy(catalog):
    paths = {
        sid: section(record(catalog, current=CurrentDesign(sid)), "## Target design")
        for sid in ("checkpoint", "idempotent-retry", "state-machine", "event-sourcing")
    }
    assert len(set(paths.values())) == len(paths)
    assert "no rewrite is needed" in paths["checkpoint"]  # the fitting category is kept
    assert "Add the recovery point" in paths["idempotent-retry"] and "Switch over:" in paths["idempotent-retry"]


def test_choosing_a_current_category_that_does_not_fit_says_so(catalog):
    text = record(catalog, current=CurrentDesign("idempotent-retry"), chosen="idempotent-retry")
    assert "**Does not fit.**" in text and "no rewrite is needed" not in text
    assert "by the team's choice" in section(text, "## Target design")


def test_migration_keeps_the_controls_that_carry_over(catalog):
    """state-machine → checkpoint: a reclaim of stale tasks and SIGTERM handling carry over; the
    missing guard the new design would not need is still this week's fix (never waived)."""
    current = CurrentDesign("state-machine", {"stale-tasks-reclaimed": "yes", "sigterm-within-grace": "yes",
                                              "guarded-transitions": "no"})  # fmt: skip
    r = review(BATCH, catalog, current=current)
    assert r.target.strategy.id == "checkpoint"
    keep = " ".join(r.keep)
    assert "`stale-tasks-reclaimed`" in keep and "`sigterm-within-grace`" in keep
    assert "stale-tasks-reclaimed" not in {c.id for c in r.to_build}
    assert r.findings[0].control.id == "guarded-transitions" and r.this_week[0].control.id == "guarded-transitions"
    text = record(catalog, current=current)
    assert "weeks away" not in text and "disappears with" not in text
    assert "Weigh it apart from this week's fixes" in section(text, "## Target design")


# --- verification plan -------------------------------------------------------------------------


def test_verification_plan_is_specific_to_the_case(catalog):
    plan = section(record(catalog, current=CurrentDesign("checkpoint")), "## Verification plan")
    assert "advisor generate checkpoint ./continuity-job" in plan
    assert "python -m continuity_job drill --records 2000 --kills 10" in plan
    assert "--workers 3" in plan  # workers=many
    assert "between an external call and the commit" in plan  # external effects: the kill window
    assert "lost = 0" in plan and "duplicate_effects = 0" in plan
    single = section(record(catalog, {"work_shape": "single_task", "duration": "seconds"}), "## Verification plan")
    assert "--workers" not in single and "in the middle of the task" in single


def test_the_queries_that_prove_it_are_spelled_out_for_new_controls(catalog):
    """Migrating from reruns to a checkpoint: the new controls' proof queries are in the plan;
    checks already printed as findings are referred to by number."""
    plan = section(record(catalog, current=CurrentDesign("idempotent-retry")), "## Verification plan")
    assert "`SELECT call_key, COUNT(*) FROM external_calls GROUP BY call_key HAVING COUNT(*) > 1` (`intent-before-call`)" in plan
    assert "SELECT ... FOR UPDATE" not in plan  # a how-to, not a proof
    fitting = section(record(catalog, current=CurrentDesign("checkpoint", {"intent-before-call": "no"})), "## Verification plan")
    assert "the queries in the checks of findings" in fitting and "SELECT call_key" not in fitting


def test_a_job_without_a_database_drills_the_file_variant(catalog):
    """local_disk selects the checkpoint file variant: one worker, no --workers / --fail-rate."""
    answers = {**BATCH, "recovery_point_store": "local_disk"}
    plan = section(record(catalog, answers), "## Verification plan")
    assert "`advisor generate checkpoint ./continuity-job --set checkpoint_store=file`" in plan
    assert "--workers" not in plan and "--fail-rate" not in plan


def test_no_command_the_advisor_would_refuse(catalog):
    """Every printed `advisor generate X` names a strategy the template generates (stream-checkpoint too)."""
    from advisor.model.template_questions import generated_strategies

    text = record(catalog, STREAM, current=CurrentDesign("stream-checkpoint"))
    assert "stream-checkpoint" in generated_strategies()
    assert "advisor generate stream-checkpoint" in text
    for command in re.findall(r"`advisor generate (\S+) ", text + record(catalog)):
        assert command in generated_strategies()


def test_long_units_get_a_sigterm_drill_inside_the_unit(catalog):
    plan = section(record(catalog, {**BATCH, "unit_vs_notice": "longer_than_notice"}), "## Verification plan")
    assert "in the middle of a unit" in plan and "notice" in plan


# --- length, wording, sources ------------------------------------------------------------------

TYPICAL = [
    pytest.param(BATCH, CurrentDesign("checkpoint", {"optimistic-progress-update": "no"}), id="batch-fits-missing-lock"),
    pytest.param(BATCH, CurrentDesign("idempotent-retry"), id="batch-on-reruns"),
    pytest.param(WEBHOOK, CurrentDesign("idempotent-retry", {"key-from-input": "no"}), id="webhook-key-per-attempt"),
    pytest.param(LEDGER, CurrentDesign("event-sourcing"), id="ledger-without-command-keys"),
    pytest.param(AGENT, CurrentDesign("idempotent-retry"), id="agent-restarting-from-scratch"),
    pytest.param(STREAM, CurrentDesign("checkpoint"), id="stream-hand-made-offsets"),
    pytest.param(BATCH, None, id="no-current-design"),
]


@pytest.mark.parametrize("answers,current", TYPICAL)
def test_typical_records_stay_under_100_lines(catalog, answers, current):
    text = record(catalog, answers, current=current)
    assert len(text.splitlines()) <= 100, len(text.splitlines())


@pytest.mark.parametrize("answers,current", TYPICAL)
def test_records_never_cite_internal_documents(catalog, answers, current):
    text = record(catalog, answers, current=current, context="Nightly sync killed by the deploy.")
    assert not re.search(r"\bseeds?\b|§|shared/", text, re.I), re.search(r".{40}(\bseeds?\b|§|shared/).{40}", text, re.I)


@pytest.mark.parametrize("answers,current", TYPICAL)
def test_no_list_is_repeated(catalog, answers, current):
    lines = [ln.strip() for ln in record(catalog, answers, current=current).splitlines() if len(ln.strip()) > 30]
    assert len(lines) == len(set(lines))


def test_pitfall_fixes_are_worded_for_the_strategy(catalog):
    """No `processed_offset` advice for an event-sourced ledger."""
    text = record(catalog, LEDGER, current=CurrentDesign("event-sourcing-idempotent"))
    assert "processed_offset" not in text


def test_unknown_current_strategy_is_rejected(catalog):
    with pytest.raises(AnswersError, match="checkpoint"):
        review(BATCH, catalog, current="saga")


def test_write_text_safely(tmp_path):
    path = tmp_path / "d.md"
    write_text_safely(path, "one")
    with pytest.raises(OutputExistsError):
        write_text_safely(path, "two")
    assert path.read_text() == "one"
    write_text_safely(path, "two", force=True)
    assert path.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["d.md"]  # no temp file left behind


def test_records_over_the_answer_space(catalog):
    """A fixed random sample of answers × current designs × control states: every record leads
    right, cites nothing internal, prints no refused command and stays short."""
    import random

    from advisor.model.template_questions import generated_strategies
    from advisor.review.render import render

    rng = random.Random(8)
    lengths = []
    for _ in range(300):
        answers = {q.id: rng.choice(q.values) for q in catalog.questions if rng.random() < 0.45}
        sid = rng.choice(catalog.strategy_ids)
        states = {c.id: rng.choice(["yes", "no", "unknown"]) for c in catalog.strategy(sid).controls if rng.random() < 0.5}
        r = review(answers, catalog, current=CurrentDesign(sid, states))
        text = render(r, catalog, date=DAY)
        lengths.append(len(text.splitlines()))
        assert not re.search(r"\bseeds?\b|§|shared/", text, re.I), answers
        for command in re.findall(r"`advisor generate (\S+) ", text):
            assert command in generated_strategies()
        if r.missing:
            assert r.findings[0].status == "no" and "**Fits.**" not in text, answers
        lines = [ln.strip() for ln in text.splitlines() if len(ln.strip()) > 30]
        assert len(lines) == len(set(lines)), answers
    lengths.sort()
    assert lengths[len(lengths) * 9 // 10] <= 100 and lengths[-1] <= 110, lengths[-10:]


@pytest.mark.parametrize(
    "umask, mode",
    [
        (0o022, 0o644),  # the usual umask: a record to share and commit, readable by the team
        (0o077, 0o600),  # a private umask is honoured, not widened
    ],
)
def test_written_files_get_the_umask_mode_not_mkstemps_0600(tmp_path, umask, mode):
    from advisor.cli import main

    old = os.umask(umask)
    try:
        write_text_safely(tmp_path / "d.md", "one")
        write_text_safely(tmp_path / "d.md", "two", force=True)  # an overwrite too
        assert main(["review", "--set", "duration=hours", "--out", str(tmp_path / "decision.md")]) == 0
    finally:
        os.umask(old)
    for name in ("d.md", "decision.md"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name


# --- a framework's job: the top pick is not decided, and this week's order ---------------------

INVOICES = {"symptoms": "duplicate_effect", "trigger": "planned_stop", "runner": "celery", "broker": "redis",
            "external_effects": "plain_api", "work_shape": "record_batch", "duration": "minutes",
            "engine_owner": "framework"}  # fmt: skip


def test_the_top_pick_kept_out_by_the_decision_says_it_ranks_first(catalog):
    """Celery is configured, not rewritten: the checkpoint ranks first but is not chosen, and the
    considered options say so (never "ranked lower" for the top pick)."""
    r = review(INVOICES, catalog, current="idempotent-retry")
    assert r.rec.top.strategy.id == "checkpoint" and r.target.strategy.id == "idempotent-retry"
    options = section(record(catalog, INVOICES, current="idempotent-retry"), "## Considered options")
    top = next(line for line in options.splitlines() if "(`checkpoint`" in line)
    assert "ranks first for these answers, not chosen" in top and "ranked lower" not in top


def test_this_week_puts_a_fix_that_needs_unanswered_answers_after_the_sure_ones(catalog):
    """Deferring planned kills matters only if kills can wait and a unit outlasts the notice
    (unanswered): a likely cause, but after the likely ones that matter whatever those answers."""
    r = review(INVOICES, catalog, current="idempotent-retry")
    week = list(r.this_week)
    deferred = next(f for f in week if f.control.id == "planned-kills-deferred")
    assert deferred.only_if and deferred.control.effort == "setting"
    sure_likely = [f for f in week if not f.only_if and f.score * 2 >= max(x.score for x in week)]
    assert sure_likely and all(week.index(f) < week.index(deferred) for f in sure_likely)


@pytest.mark.parametrize("answers", [
    INVOICES,
    {"symptoms": "duplicate_effect", "trigger": "retry_after_error", "runner": "airflow", "outputs": "outside_store",
     "work_shape": "record_batch", "duration": "minutes", "engine_owner": "framework"},
])  # fmt: skip
def test_this_week_never_puts_a_fix_nothing_points_at_before_one_the_evidence_points_at(catalog_copy, answers):
    # The rules alone: with the past incidents' shares nearly every fix may be pointed at, and the
    # order of the pointed and the quiet ones is what is checked.
    (catalog_copy / "precedents.yaml").unlink()
    week = review(answers, load_catalog(catalog_copy), current="idempotent-retry").this_week
    pointed = [i for i, f in enumerate(week) if f.score > 0]
    quiet = [i for i, f in enumerate(week) if f.score <= 0]
    assert pointed and quiet and max(pointed) < min(quiet), [(f.control.id, f.score) for f in week]


def test_a_plain_calls_unique_key_is_claimed_before_the_call_not_shared_with_its_transaction(catalog):
    """An email can't share a transaction with anything of ours: for a plain API the key is a row
    claimed before the call; for a database effect it stays in the effect's own transaction."""
    emails = {"symptoms": "duplicate_effect", "trigger": "still_running", "broker": "sqs", "workers": "many",
              "recovery_point_store": "broker_or_orchestrator", "external_effects": "plain_api"}  # fmt: skip
    found = {f.control.id: f.control for f in review(emails, catalog, current="idempotent-retry").findings}
    key = found["unique-key-with-effect"]
    assert "Before the call" in key.fix and "same transaction as the effect" not in key.fix
    assert "twice at once" in key.how_to_check
    rows = {**emails, "external_effects": "none", "recovery_point_store": "database"}
    found = {f.control.id: f.control for f in review(rows, catalog, current="idempotent-retry").findings}
    assert "same transaction as the effect" in found["unique-key-with-effect"].fix


def test_the_considered_options_are_listed_in_rank_order(catalog):
    """Entity changes on a checkpoint job: the current design ranks below the options that share the
    "Further down" line, which stands at its first option's rank, before the current design."""
    answers = {"symptoms": "work_lost", "work_shape": "entity_changes", "ordering": "per_key",
               "inbound_duplicates": "possible"}
    options = section(record(catalog, answers, current=CurrentDesign("checkpoint")), "## Considered options")
    numbers = [int(line.split(".", 1)[0]) for line in options.splitlines() if re.match(r"\d+\. ", line)]
    assert any("Further down" in line for line in options.splitlines()), options
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), options
    assert numbers[-1] == [x.strategy.id for x in review(answers, catalog, current=CurrentDesign("checkpoint")).rec.ranking
                           ].index("checkpoint") + 1, options
