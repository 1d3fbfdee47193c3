"""``drill --power-loss`` of projects fed by a RabbitMQ queue (issue 21, point 1: the queue consumer's store),
against a real broker (tests/rabbitmq_server.py).

The broker is the remote side, off the mount like the simulated service; the consumer's store is on LazyFS.
* A queue-fed project passes: nothing committed lost, every message's records done once, messages
  redelivered after the cuts and deduplicated.
* The negative control: the same project committing with ``PRAGMA synchronous = NORMAL`` fails with
  ``committed_lost`` (its acks followed commits a power cut took back).
* ``@pytest.mark.soak``: SEEDS seeds of every queue-fed strategy (`make soak`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from lazyfs_support import skip_reason
from rabbitmq_server import RabbitMQ
from suite_share import one_here_rest_in_soak
from test_power_loss_drill import FULL, SEEDS, _mounts_under, _mutated
from test_template_rabbitmq import QUEUE_PROJECTS, _drill, broker  # noqa: F401 (a fixture, used by name)

from advisor import scaffold

pytestmark = [pytest.mark.slow, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

RECORDS = ("--records", 400)


def _generate(tmp_path: Path, strategy: str) -> scaffold.Generated:
    answers, _ = QUEUE_PROJECTS[strategy]
    return scaffold.generate(strategy, tmp_path / "job", answers)


@pytest.mark.parametrize("strategy", one_here_rest_in_soak(sorted(QUEUE_PROJECTS), keep="checkpoint"))
def test_a_queue_fed_project_passes_the_power_loss_drill(strategy: str, broker: RabbitMQ, tmp_path: Path) -> None:
    generated = _generate(tmp_path, strategy)
    report = _drill(generated, broker.url, tmp_path / "d", "--power-loss", "--no-shrink", *RECORDS, "--seed", 1)
    assert report["failures"] == [] and report["_exit"] == 0, report["failures"]
    assert report["lost"] == report["duplicate_effects"] == report["incomplete_records"] == 0, report
    assert report["queue_left"] == 0 and report["redelivered"] > 0 and report["deduped"] > 0, report
    power = report["power_loss"]
    assert power["cuts"] == report["kills"] + 1 and not any(c["lost"] or c["corrupt"] for c in power["cut_log"])
    assert {"commit", "called", "window"} <= {p.split("@")[0] for p in power["cuts_by_point"]}, power
    assert _mounts_under(tmp_path) == []


def test_a_queue_fed_project_committing_with_synchronous_normal_fails_with_committed_lost(
        broker: RabbitMQ, tmp_path: Path) -> None:
    generated = _generate(tmp_path, "checkpoint")
    package = generated.package
    mutated = _mutated(generated.dest, tmp_path / "mutated", f"src/{package}/runtime/store.py", FULL,
                       FULL.replace("FULL", "NORMAL"))
    weak = dataclasses.replace(generated, dest=mutated)
    report = _drill(weak, broker.url, tmp_path / "d", "--power-loss", "--no-shrink", *RECORDS, "--seed", 1,
                    "--sweep-sample", 0, "--random-cuts", 0)
    assert report["_exit"] == 1 and "committed_lost" in {f["check"] for f in report["failures"]}, report["failures"]
    assert _mounts_under(tmp_path) == []


@pytest.mark.soak
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("strategy", sorted(QUEUE_PROJECTS))
def test_every_seed_of_the_power_loss_drill_passes_on_a_queue(strategy: str, seed: int, broker: RabbitMQ,
                                                               tmp_path: Path) -> None:
    generated = _generate(tmp_path, strategy)
    report = _drill(generated, broker.url, tmp_path / "d", "--power-loss", "--no-shrink", "--seed", seed)
    assert report["failures"] == [] and report["_exit"] == 0, report["failures"]
    assert report["lost"] == report["duplicate_effects"] == report["incomplete_records"] == 0, report
