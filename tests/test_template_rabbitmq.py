"""Generated projects whose input is a RabbitMQ queue (input_source=rabbitmq), against a real broker.

The broker is Debian's rabbitmq-server started as a throwaway node on loopback ports
(tests/rabbitmq_server.py). Each drill really kills the consumer with SIGKILL, at random
moments and aimed at every critical window (the consumer's and the strategy's); one run
restarts the broker under the consumer. The generated project's own queue tests run
against the same broker (AMQP_URL), and without it they skip, saying why.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from suite_share import one_here_rest_in_soak

from advisor import scaffold
from rabbitmq_server import RabbitMQ, find_server, listening_ports, rabbitmq_server
from drill_kills import planned_kills
from pg_server import create_database

pytestmark = pytest.mark.slow

#: (strategy, answers, records): enough messages that every window is passed a few times per worker life.
QUEUE_PROJECTS = {
    "checkpoint": ({"project_name": "Q Ck Job", "input_source": "rabbitmq", "task_size": 200, "batch_size": 50},
                   1200),
    "idempotent-retry": ({"project_name": "Q Ir Job", "input_source": "rabbitmq"}, 400),
    "state-machine": ({"project_name": "Q Sm Job", "input_source": "rabbitmq"}, 200),
}


@pytest.fixture(scope="module")
def broker() -> Iterator[RabbitMQ]:
    if find_server() is None:
        pytest.fail("rabbitmq-server is not installed: `make test` installs it (make rabbitmq)")
    with rabbitmq_server() as node:
        yield node


def _generate(tmp_path: Path, strategy: str) -> scaffold.Generated:
    answers, _ = QUEUE_PROJECTS[strategy]
    return scaffold.generate(strategy, tmp_path / "job", answers)


def _env(generated: scaffold.Generated, url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("PYTEST_")}
    return {**env, "AMQP_URL": url, "PYTHONPATH": str(generated.dest / "src"), **extra}


def _drill(generated: scaffold.Generated, url: str, data: Path, *args: object) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", generated.package, "drill", "--json", "--data-dir", str(data), *map(str, args)],
        cwd=generated.dest, env=_env(generated, url), capture_output=True, text=True, timeout=600)
    assert result.stdout.strip(), result.stderr[-3000:]
    report: dict = json.loads(result.stdout)
    report["_exit"] = result.returncode
    return report


def _assert_exactly_once(report: dict) -> None:
    assert report["lost"] == 0 and report["duplicate_effects"] == 0, report
    assert report["incomplete_records"] == 0 and report["queue_left"] == 0, report
    assert report["redelivered"] > 0, "no message was redelivered: the kills proved nothing about the queue"
    assert report["failures"] == [] and report["ok"] is True and report["_exit"] == 0, report["failures"]


def test_every_broker_port_is_on_loopback_and_nothing_is_left_running() -> None:
    if find_server() is None:
        pytest.fail("rabbitmq-server is not installed: `make test` installs it (make rabbitmq)")
    with rabbitmq_server() as node:
        pids = node.pids()
        ports = listening_ports(pids)
        by_port: dict[int, set[str]] = {}
        for address, port in ports:
            by_port.setdefault(port, set()).add(address)
        # AMQP and the inter-node (distribution) port on 127.0.0.1 only; epmd on loopback only
        # (it always adds ::1 next to ERL_EPMD_ADDRESS when the host has IPv6).
        assert by_port.get(node.amqp_port) == {"127.0.0.1"}, ports
        assert by_port.get(node.dist_port) == {"127.0.0.1"}, ports
        assert by_port.get(node.epmd_port, set()) >= {"127.0.0.1"}, ports
        assert by_port[node.epmd_port] <= {"127.0.0.1", "::1"}, ports
        assert set(by_port) == {node.amqp_port, node.dist_port, node.epmd_port}, f"unexpected listener: {ports}"
        assert {a for a, _ in ports} <= {"127.0.0.1", "::1"}, ports
        names = {Path(f"/proc/{pid}/exe").resolve().name for pid in pids if Path(f"/proc/{pid}").exists()}
        assert {"beam.smp", "epmd"} <= names, names
    # Teardown stopped the node and its epmd: none of its processes is alive (a zombie is not).
    alive = [pid for pid in pids if _alive(pid)]
    assert alive == [] and node.pids() == [], alive


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("strategy", one_here_rest_in_soak(sorted(QUEUE_PROJECTS), keep="checkpoint"))
def test_kills_through_the_queue_lose_nothing_and_double_nothing(strategy: str, tmp_path: Path,
                                                                  broker: RabbitMQ) -> None:
    generated = _generate(tmp_path, strategy)
    _, records = QUEUE_PROJECTS[strategy]
    random = _drill(generated, broker.url, tmp_path / "random", "--records", records, "--kills", 5, "--seed", 7)
    _assert_exactly_once(random)
    assert random["kills_landed"] == planned_kills(5, strategy), random
    # Every window, the consumer's (ack after commit, submit before work) and the strategy's.
    windows = subprocess.run([sys.executable, "-c", f"from {generated.package}.runtime import strategy; "
                              "print(' '.join(strategy.load().WINDOWS))"],
                             env=_env(generated, broker.url), capture_output=True, text=True).stdout.split()
    assert {"after_commit_before_ack", "after_submit_before_work"} <= set(windows), windows
    aimed = _drill(generated, broker.url, tmp_path / "aimed", "--records", records, "--kills", 2 * len(windows),
                   "--seed", 8, "--aim", "all", "--work-ms", 0)
    _assert_exactly_once(aimed)
    assert aimed["kills_by_window"] == {w: 2 for w in windows}, aimed


def test_the_consumer_rides_out_a_broker_restart(tmp_path: Path) -> None:
    """The broker goes down mid-run and comes back: the consumer reconnects, the unacked messages come
    back (redelivered) and are deduped; nothing lost or doubled. A broker of its own: others keep theirs.

    The restart can fall between two of the drill's workers (one killed, the next not yet connected),
    and then no consumer meets it: every attempt must still be exactly-once, and at least one of up to
    three (seeds 9-11) must show a consumer that lost its connection and carried on."""
    if find_server() is None:
        pytest.fail("rabbitmq-server is not installed: `make test` installs it (make rabbitmq)")
    generated = _generate(tmp_path, "idempotent-retry")
    met = []
    with rabbitmq_server() as node:
        for seed in (9, 10, 11):
            data = tmp_path / f"data-{seed}"
            report, log = _drill_across_a_restart(generated, node, data, seed)
            _assert_exactly_once(report)
            assert "drained and its work done" in log and report["worker_failures"] == [], report
            met.append("broker connection lost" in log)
            if met[-1]:
                break
    assert any(met), f"no consumer met the broker's restart in {len(met)} attempts"


def _drill_across_a_restart(generated: Any, node: Any, data: Path, seed: int) -> tuple[dict, str]:
    """Run a drill, restart the broker once 150 effects are in, and return its report and workers' log."""
    drill = subprocess.Popen(
        [sys.executable, "-m", generated.package, "drill", "--json", "--records", "600", "--kills", "2",
         "--seed", str(seed), "--work-ms", "4", "--data-dir", str(data)],
        cwd=generated.dest, env=_env(generated, node.url), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        deadline = time.monotonic() + 120
        while _effects(data) < 150 and drill.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert drill.poll() is None and _effects(data) >= 150, "the drill ended before the restart"
        node.restart()
        out, err = drill.communicate(timeout=600)
    finally:
        if drill.poll() is None:
            drill.kill()
            drill.wait()
    assert out.strip(), f"the drill printed no report (exit {drill.returncode}): {err[-3000:]}"
    report = json.loads(out)
    report["_exit"] = drill.returncode
    return report, (data / "drill-workers.log").read_text()


def _effects(data: Path) -> int:
    try:
        with sqlite3.connect(f"file:{data / 'external.db'}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM effects").fetchone()[0])
    except sqlite3.Error:
        return 0


@pytest.mark.parametrize("strategy", one_here_rest_in_soak(sorted(QUEUE_PROJECTS), keep="state-machine"))
def test_the_generated_queue_tests_pass_against_the_broker_and_skip_without_it(strategy: str, tmp_path: Path,
                                                                                broker: RabbitMQ) -> None:
    generated = _generate(tmp_path, strategy)
    assert (generated.dest / "src" / generated.package / "runtime" / "amqp_input" / "consumer.py").is_file()
    assert "pika" in (generated.dest / "pyproject.toml").read_text()
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests/test_amqp_input.py"]
    ran = subprocess.run(command, cwd=generated.dest, env=_env(generated, broker.url), capture_output=True,
                         text=True, timeout=900)
    assert ran.returncode == 0 and "skipped" not in ran.stdout, ran.stdout[-4000:] + ran.stderr[-2000:]
    without = _env(generated, broker.url)
    del without["AMQP_URL"]
    skipped = subprocess.run(command, cwd=generated.dest, env=without, capture_output=True, text=True, timeout=300)
    assert skipped.returncode == 0, skipped.stdout[-3000:]
    assert "skipped" in skipped.stdout and "set AMQP_URL=" in skipped.stdout, skipped.stdout[-3000:]


def test_input_source_is_asked_only_where_a_message_is_a_unit_of_work(tmp_path: Path) -> None:
    asked = {s: {q.id for q in scaffold.template_questions(s)} for s in scaffold.generated_strategies()}
    assert {s for s, ids in asked.items() if "input_source" in ids} == set(QUEUE_PROJECTS)
    # Given anyway for a strategy that does not ask it: ignored, like Copier ignores it.
    stream = scaffold.generate("event-sourcing", tmp_path / "es", {"project_name": "Es Q", "input_source": "rabbitmq"})
    assert not any("amqp_input" in f for f in stream.files) and any("runtime/" in f for f in stream.files)
    plain = scaffold.generate("checkpoint", tmp_path / "plain", {"project_name": "Plain Job"})
    assert not any("amqp_input" in f for f in plain.files) and any("runtime/" in f for f in plain.files)
    assert "pika" not in (plain.dest / "pyproject.toml").read_text()
    with pytest.raises(scaffold.ScaffoldError, match="choose one of"):
        scaffold.generate("checkpoint", tmp_path / "bad", {"input_source": "kafka"})


def test_advisor_generate_set_input_source(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "advisor.cli", "generate", "state-machine", str(tmp_path / "sm"),
                             "--set", "input_source=rabbitmq", "--set", "project_name=Sm Queue"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    settings = next((tmp_path / "sm" / "src").glob("*/settings.py")).read_text()
    assert 'INPUT_SOURCE = "rabbitmq"' in settings and "amqp://guest:guest@127.0.0.1:5672/%2F" in settings


def test_a_node_whose_port_was_taken_before_it_bound_it_is_started_again_on_new_ports(monkeypatch) -> None:
    """Ports are found free, then bound by the node a moment later: another test's process can take
    one in between. The node then exits (its epmd's port taken: `nodistribution`); the throwaway
    server starts a fresh node on new ports instead of failing the test, and leaves nothing running."""
    if find_server() is None:
        pytest.fail("rabbitmq-server is not installed: `make test` installs it (make rabbitmq)")
    import rabbitmq_server  # the module itself, to replace how a node is made

    made, taken = [], []
    first_init = rabbitmq_server.RabbitMQ.__init__

    def init(self, root):
        first_init(self, root)
        made.append(self)
        if len(made) == 1:  # someone else listens on the first node's epmd port
            holder = socket.socket()
            holder.bind(("127.0.0.1", self.epmd_port))
            holder.listen()
            taken.append(holder)

    monkeypatch.setattr(rabbitmq_server.RabbitMQ, "__init__", init)
    try:
        with rabbitmq_server.rabbitmq_server() as node:
            assert len(made) == 2 and node is made[1] and node.epmd_port != made[0].epmd_port
            assert node._accepts_login()
            pids = node.pids()
        assert [pid for pid in pids if _alive(pid)] == [] and made[0].pids() == []
    finally:
        for holder in taken:
            holder.close()


def test_workers_on_two_hosts_consume_the_drills_own_queue(tmp_path: Path, broker: RabbitMQ, postgres_url: str) -> None:
    """Each simulated host's workers run in a data directory of their own: they must find the drill's queue
    there too (not the setting's), or they drain an empty queue and leave the input undone."""
    generated = scaffold.generate("checkpoint", tmp_path / "job", {"project_name": "Q Hosts Job", "input_source": "rabbitmq",
                                                                   "state_store": "postgresql"})
    env = _env(generated, broker.url, DATABASE_URL=create_database(postgres_url, "qhosts"))
    data = tmp_path / "drill"
    result = subprocess.run([sys.executable, "-m", generated.package, "drill", "--json", "--data-dir", str(data),
                             "--hosts", "2", "--workers", "3", "--records", "600", "--kills", "3", "--seed", "4"],
                            cwd=generated.dest, env=env, capture_output=True, text=True, timeout=600)
    report = json.loads(result.stdout)
    assert report["lost"] == 0 and report["duplicate_effects"] == 0 and report["incomplete_records"] == 0, report
    assert report["queue_left"] == 0 and report["faults"]["malformed-input"]["injected"] == 1, report
    # fsync=off on the test server: the drill must say so, and find nothing else.
    assert [f["check"] for f in report["failures"]] == ["durability"], report["failures"]
    assert all((data / f"host-{n}" / "drill-queue.json").is_file() for n in (1, 2))
