"""End to end: a real Prometheus (Debian's package, `make prometheus`) on 127.0.0.1 scrapes the
workers of a crash drill and then of a run whose store is made unreachable, with the project's
own deploy/prometheus/alerts.yml loaded unchanged.

It sees the counters move (records done, commits, the killed worker's unit taken over) and
CheckpointsFailing fire on the planted failure (the SQLite file held locked). Prometheus listens
on one loopback port only (checked), and is stopped afterwards, like every worker.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor import scaffold
from rabbitmq_server import listening_ports

pytestmark = pytest.mark.slow
PACKAGE = "prom_drill_job"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    def __init__(self, root: Path, rules: Path, target_port: int) -> None:
        self.port = free_port()
        root.mkdir(parents=True, exist_ok=True)
        shutil.copy(rules, root / "alerts.yml")
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                  "rule_files": ["alerts.yml"],
                  "scrape_configs": [{"job_name": PACKAGE,
                                      "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}]}
        (root / "prometheus.yml").write_text(yaml.safe_dump(config))
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("prometheus is missing: `make prometheus` installs Debian's package")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=open(root / "prometheus.log", "wb"))

    def get(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.loads(answer.read())["data"]

    def ready(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "prometheus exited at start"
            try:
                self.get("/api/v1/status/buildinfo")
                return
            except OSError:
                time.sleep(0.3)
        pytest.fail("prometheus did not answer")

    def value(self, query: str) -> float:
        result = self.get("/api/v1/query", query=query)["result"]
        return max((float(r["value"][1]) for r in result), default=0.0)

    def alert_state(self, name: str) -> str | None:
        states = [a["state"] for a in self.get("/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == name]
        return "firing" if "firing" in states else (states[0] if states else None)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def wait_for(what: str, check: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


def test_prometheus_scrapes_a_drill_and_pages_on_a_planted_failure(tmp_path: Path) -> None:
    dest = scaffold.generate("checkpoint", tmp_path / "project", {
        "project_name": "Prom Drill Job", "store_outage_s": 600.0, "batch_size": 50}).dest
    worker_port = free_port()
    prefix = PACKAGE.upper() + "_"
    env = {**os.environ, "PYTHONPATH": str(dest / "src"), prefix + "METRICS_PORT": str(worker_port),
           prefix + "BUSY_TIMEOUT_MS": "100"}
    env.pop("DATABASE_URL", None)
    prometheus = Prometheus(tmp_path / "prometheus", dest / "deploy" / "prometheus" / "alerts.yml", worker_port)
    worker: subprocess.Popen[bytes] | None = None
    try:
        prometheus.ready()
        assert listening_ports([prometheus.proc.pid]) == [("127.0.0.1", prometheus.port)]
        job = f'job="{PACKAGE}"'

        # 1. A crash drill: its workers (killed, restarted) serve their metrics on worker_port. One at a time
        # (--no-scale-out): a worker added beside them serves none (one port per machine), and it would take
        # over much of the work the scrapes are meant to see move.
        drill = subprocess.run([sys.executable, "-m", PACKAGE, "drill", "--records", "4000", "--kills", "2",
                                "--seed", "1", "--work-ms", "1", "--no-scale-out", "--json",
                                "--data-dir", str(tmp_path / "drill")],
                               cwd=dest, env=env, capture_output=True, text=True, timeout=600)
        assert drill.returncode == 0, drill.stderr[-2000:]
        report = json.loads(drill.stdout)
        assert report["lost"] == 0 and report["kills"] >= 1
        window = "[15m]"
        assert prometheus.value(f"max_over_time(continuity_records_done_total{{{job}}}{window})") > 0
        assert prometheus.value(f"max_over_time(continuity_checkpoints_total{{{job}}}{window})") > 0
        assert prometheus.value(f"max_over_time(continuity_external_calls_total{{{job},action=\"sent\"}}{window})") > 0
        samples = prometheus.get("/api/v1/query", query=f"continuity_records_done_total{{{job}}}{window}")["result"]
        values = [float(v) for series in samples for _, v in series["values"]]
        assert len(set(values)) > 2, "the counter never moved between scrapes"

        # 2. A planted failure: the state file held locked, so every commit fails after busy_timeout.
        data = tmp_path / "planted"
        submitted = subprocess.run([sys.executable, "-m", PACKAGE, "submit-demo", "--records", "100000",
                                    "--work-ms", "1", "--data-dir", str(data)], cwd=dest, env=env,
                                   capture_output=True, text=True, timeout=120)
        assert submitted.returncode == 0, submitted.stderr
        worker = subprocess.Popen([sys.executable, "-m", PACKAGE, "run", "--data-dir", str(data)], cwd=dest, env=env,
                                  stdout=subprocess.DEVNULL, stderr=open(tmp_path / "worker.log", "wb"))
        wait_for("the worker's first commits", lambda: prometheus.value(
            f"continuity_records_done_total{{{job}}}") > 0, 60)
        assert prometheus.alert_state("CheckpointsFailing") is None
        lock = sqlite3.connect(data / "state.db", timeout=30, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        try:
            wait_for("CheckpointsFailing to fire", lambda: prometheus.alert_state("CheckpointsFailing") == "firing",
                     90)
            assert prometheus.value(f"continuity_checkpoint_consecutive_failures{{{job}}}") >= 2
            assert prometheus.value(f"continuity_store_unreachable_seconds{{{job}}}") > 0
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        # The store answers again: the worker commits, and the page resolves.
        wait_for("the alert to resolve", lambda: prometheus.alert_state("CheckpointsFailing") is None, 90)
        assert prometheus.value(f"continuity_store_outages_total{{{job}}}") >= 1
    finally:
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        prometheus.stop()
    assert worker is not None and worker.returncode == 0  # SIGTERM: a final checkpoint, exit 0
