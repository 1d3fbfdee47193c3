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


def test_the_verification_plan_names_the_alert_this_incident_would_have_fired(catalog: Catalog) -> None:
    from advisor.review.judge import decision_record

    plain = decision_record({**BATCH, "external_effects": "plain_api", "duplicate_cost": "unacceptable"}, catalog)
    assert "`deploy/prometheus/alerts.yml`" in plain and "`CallsInDoubtWaiting`" in plain
    stuck = decision_record({**BATCH, **DEFER}, catalog)
    assert "`UnitStuckPastLease`" in stuck and "`CallsInDoubtWaiting`" not in stuck
    assert "`CheckpointsFailing` and `RecoverySuccessLow`" in stuck  # every job pages on these


def test_the_preview_lists_the_deploy_files() -> None:
    from advisor.scaffold.generation import preview

    files = preview("checkpoint", {"project_name": "Preview Job", "planned_kills": "deferred"})
    for name in ("Dockerfile", "deploy/k8s/job.yaml", "deploy/k8s/pdb.yaml", "deploy/prometheus/alerts.yml",
                 "deploy/systemd/preview_job.service"):
        assert name in files, name
