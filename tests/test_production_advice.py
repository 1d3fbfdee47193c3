"""The advisor's side of production (issue 22): answers that make planned kills wait set
`planned_kills: deferred` (the annotation and the PodDisruptionBudget), the review's verification
plan names the generated alert this incident would have fired, and a preview lists the deploy files."""

from __future__ import annotations

from advisor.model.catalog import Catalog
from advisor.model.template_settings import settings_for

BATCH = {"work_shape": "record_batch", "duration": "hours", "recovery_point_store": "database"}
DEFER = {"kill_control": "can_defer", "unit_vs_notice": "longer_than_notice"}


def test_deferrable_kills_and_a_unit_longer_than_the_notice_defer_planned_kills(catalog: Catalog) -> None:
    for strategy in ("checkpoint", "idempotent-retry", "state-machine", "event-sourcing", "stream-checkpoint"):
        chosen = {s.key: s.value for s in settings_for(strategy, {**BATCH, **DEFER}, catalog)}
        assert chosen.get("planned_kills") == "deferred", strategy
    for near_miss in ({"kill_control": "none", "unit_vs_notice": "longer_than_notice"},
                      {"kill_control": "can_defer", "unit_vs_notice": "fits_notice"}):
        chosen = {s.key: s.value for s in settings_for("checkpoint", {**BATCH, **near_miss}, catalog)}
        assert "planned_kills" not in chosen, near_miss


def _alert_line(answers: dict[str, str], catalog: Catalog, current: str | None = None) -> str:
    from advisor.review.judge import decision_record

    text = decision_record(answers, catalog, current=current)
    return next(line for line in text.splitlines() if "`deploy/prometheus/alerts.yml`" in line)


def test_the_verification_plan_names_the_alert_this_incident_would_have_fired(catalog: Catalog) -> None:
    plain = {**BATCH, "external_effects": "plain_api", "duplicate_cost": "unacceptable"}
    doubled = _alert_line({**plain, "symptoms": "duplicate_effect", "trigger": "crash"}, catalog)
    assert "this incident would have fired `CallsInDoubtWaiting`" in doubled
    # Without a symptom there is no incident to speak of: the same alert is one to watch.
    assert "would have fired" not in (quiet := _alert_line(plain, catalog)) and "watch `CallsInDoubtWaiting`" in quiet
    hung = _alert_line({**BATCH, **DEFER, "symptoms": "stuck_unit", "trigger": "still_running"}, catalog)
    assert "would have fired `UnitStuckPastLease`" in hung and "`CallsInDoubtWaiting`" not in hung
    assert "`CheckpointsFailing` and `RecoverySuccessLow`" in hung  # every job pages on these


def test_no_incident_is_said_to_have_fired_an_alert_for_what_it_did_not_show(catalog: Catalog) -> None:
    """A webhook delivered twice to a flow on a database: nothing says the store went away, so the
    store's alert is one to watch, never one this incident "would have fired"."""
    webhook = {"symptoms": "duplicate_effect", "trigger": "still_running", "inbound_duplicates": "possible",
               "work_shape": "multi_step_flow", "recovery_point_store": "database", "workers": "many"}
    line = _alert_line(webhook, catalog, current="state-machine")
    assert "would have fired" not in line and "watch `StateStoreUnreachable`" in line


def test_the_preview_lists_the_deploy_files() -> None:
    from advisor.scaffold.generation import preview

    files = preview("checkpoint", {"project_name": "Preview Job", "planned_kills": "deferred"})
    for name in ("Dockerfile", "deploy/k8s/job.yaml", "deploy/k8s/pdb.yaml", "deploy/prometheus/alerts.yml",
                 "deploy/systemd/preview_job.service"):
        assert name in files, name
