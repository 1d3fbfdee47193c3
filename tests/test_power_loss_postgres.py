"""``drill --power-loss`` of projects on PostgreSQL (issue 21, point 2): the drill's own throwaway server on
LazyFS, with the durability settings of the team's server (the one ``DATABASE_URL`` names), power cuts under
it while the workers run.

* A project passes; the team's server is read, never written (no table appears in its database).
* The negative controls, each deterministic: the team's server with ``synchronous_commit = off`` (and a
  10 s WAL writer delay, so no background flush rescues the last commits) fails with ``committed_lost``;
  so does a project whose checkpoint transaction says ``SET LOCAL synchronous_commit = off`` on a server
  that is otherwise durable.
* A SIGTERM to the drill stops its server and leaves no mount or server directory behind.
* ``@pytest.mark.soak``: SEEDS seeds of every strategy on PostgreSQL (`make soak`).
"""

from __future__ import annotations

import json
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from lazyfs_support import skip_reason
from pg_server import find_bin, postgres_server
from suite_share import one_here_rest_in_soak
from test_power_loss_drill import (SEEDS, _command, _env, _mounts_under, _mutated, drill_at_first_cut,
                                   terminate_held, wait_while)

from advisor import scaffold

pytestmark = [pytest.mark.slow, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

PG_OPTION_SETS = {
    "checkpoint": ("checkpoint", {}),
    "idempotent-retry": ("idempotent-retry", {}),
    "state-machine": ("state-machine", {}),
    "event-sourcing": ("event-sourcing", {}),
    "event-sourcing-idempotent": ("event-sourcing-idempotent", {}),
}
DRILL_TIMEOUT_S = 900
#: The sweep aims at each point's first pass in turn; an event-sourcing worker appends its commands
#: ahead of their effects, so 200 records are all appended (and sent) before the last points are
#: aimed at, and the drill rightly says "use more --records". Every variant gets enough to reach them.
SWEEP_RECORDS = {"event-sourcing": 600, "event-sourcing-idempotent": 600}
#: No background flush of asynchronous commits within a drill's cut (the default is 200 ms).
SLOW_WAL_WRITER = {"wal_writer_delay": "10s"}
#: The checkpoint transaction's opening lines (checkpoint/worker.py): the SET LOCAL mutation goes after BEGIN.
CHECKPOINT_TX = """            with self.store.transaction():
                now = time.time()
                changed = self.store.execute(ADVANCE_OFFSET, ("""
THROWAWAY_ROOTS = "drill-power-loss-pg-*"
OWNER_FILE = "drill.pid"  # drill/power_loss_pg.py: the drill that made a throwaway root


@contextmanager
def team_server(**settings: str) -> Iterator[str]:
    """The team's own server (durable: fsync on), with ``settings`` made its configuration."""
    if not find_bin("initdb"):
        pytest.fail("PostgreSQL is not installed: `make test` installs it (make postgres)")
    import psycopg

    with postgres_server(fsync=True) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            for name, value in settings.items():
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
            conn.execute("SELECT pg_reload_conf()")
        yield url


def drill(project: Path, package: str, data: Path, url: str, *flags: object) -> dict:
    env = {**_env(project), "DATABASE_URL": url}
    proc = subprocess.Popen(_command(package, data, "--json", "--no-shrink", *flags), cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=DRILL_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert stdout.strip(), stderr[-3000:]
    report: dict = json.loads(stdout)
    report["_exit"] = proc.returncode
    report["_pid"] = proc.pid
    return report


def _checks(report: dict) -> set[str]:
    return {f["check"] for f in report["failures"]}


def _user_tables(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname NOT IN "
                                "('pg_catalog', 'information_schema')").fetchone()[0])


def _throwaway_roots(drill_pid: int) -> set[Path]:
    """The throwaway servers' directories one drill process made and has not removed (each names
    its drill in a file): other tests' drills may be running beside this one (pytest -n)."""
    roots = set()
    for root in Path(tempfile.gettempdir()).glob(THROWAWAY_ROOTS):
        try:
            if (root / OWNER_FILE).read_text().strip() == str(drill_pid):
                roots.add(root)
        except OSError:  # another drill's, just removed or not written yet
            continue
    return roots


def _generate(tmp_path: Path, option_set: str) -> scaffold.Generated:
    strategy, answers = PG_OPTION_SETS[option_set]
    return scaffold.generate(strategy, tmp_path / "job", {"project_name": f"Power Pg {option_set}", **answers})


@pytest.mark.parametrize("option_set", one_here_rest_in_soak(sorted(PG_OPTION_SETS), keep="checkpoint"))
def test_a_postgresql_project_passes_on_a_throwaway_server_with_the_teams_settings(
        option_set: str, tmp_path: Path) -> None:
    generated = _generate(tmp_path, option_set)
    with team_server() as url:
        report = drill(generated.dest, generated.package, tmp_path / "d", url,
                       "--records", SWEEP_RECORDS.get(option_set, 200), "--seed", 1,
                       "--sweep-sample", 1, "--random-cuts", 1)
        assert _user_tables(url) == 0  # the team's server was read, not written
    assert report["failures"] == [] and report["_exit"] == 0, report["failures"]
    power = report["power_loss"]
    assert power["postgresql"]["settings"]["synchronous_commit"] == "on", power["postgresql"]
    assert "DATABASE_URL" in power["postgresql"]["settings_from"]
    assert power["cuts"] == report["kills"] + 1 >= 3
    assert power["postgresql"]["server_starts"] == power["cuts"] + 1  # restarted on what each cut left
    assert {"commit", "called", "random"} <= {p.split("@")[0] for p in power["cuts_by_point"]}, power
    assert _mounts_under(tmp_path) == [] and _throwaway_roots(report["_pid"]) == set()


def test_synchronous_commit_off_on_the_teams_server_fails_with_committed_lost(tmp_path: Path) -> None:
    generated = _generate(tmp_path, "checkpoint")
    with team_server(synchronous_commit="off", **SLOW_WAL_WRITER) as url:
        report = drill(generated.dest, generated.package, tmp_path / "d", url, "--records", 300, "--seed", 1,
                       "--sweep-sample", 0, "--random-cuts", 0)
    assert report["_exit"] == 1 and "committed_lost" in _checks(report), report["failures"]
    assert report["power_loss"]["postgresql"]["settings"]["synchronous_commit"] == "off"
    first = report["power_loss"]["cut_log"][0]
    assert first["phase"] == "census" and first["lost"], first  # the first cut already loses commits


def test_set_local_synchronous_commit_off_in_the_checkpoint_fails_with_committed_lost(tmp_path: Path) -> None:
    """The server is durable; one transaction of the project's own opts out. The SQL the mutation catalogue
    plants (ckpg-checkpoint-commit-not-synchronous), here held to the power cut instead of the settings probe."""
    generated = _generate(tmp_path, "checkpoint")
    package = generated.package
    mutated = _mutated(generated.dest, tmp_path / "mutated", f"src/{package}/checkpoint/worker.py", CHECKPOINT_TX,
                       CHECKPOINT_TX.replace("now = time.time()",
                                             'self.store.execute("SET LOCAL synchronous_commit = off")\n'
                                             "                now = time.time()", 1))
    with team_server(**SLOW_WAL_WRITER) as url:
        report = drill(mutated, package, tmp_path / "d", url, "--records", 300, "--seed", 1,
                       "--sweep-sample", 0, "--random-cuts", 0)
    assert report["power_loss"]["postgresql"]["settings"]["synchronous_commit"] == "on"
    assert report["_exit"] == 1 and "committed_lost" in _checks(report), report["failures"]


def test_a_sigterm_to_the_drill_stops_its_server_and_unmounts(tmp_path: Path) -> None:
    generated = _generate(tmp_path, "checkpoint")
    with team_server() as url, drill_at_first_cut(
            _command(generated.package, tmp_path / "d", "--events", "--records", 300), generated.dest,
            {**_env(generated.dest), "DATABASE_URL": url}) as proc:
        new_roots = _throwaway_roots(proc.pid)
        assert len(new_roots) == 1, new_roots
        root = next(iter(new_roots))
        postmaster = int((root / "mount" / "data" / "postmaster.pid").read_text().split()[0])
        terminate_held(proc)
        code = proc.wait(timeout=90)
    assert code == 128 + signal.SIGTERM
    wait_while(root.exists)
    assert not root.exists() and not Path(f"/proc/{postmaster}").exists()
    assert not any(str(root) in line for line in Path("/proc/self/mountinfo").read_text().splitlines())


@pytest.mark.soak
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("option_set", sorted(PG_OPTION_SETS))
def test_every_seed_of_the_power_loss_drill_passes_on_postgresql(option_set: str, seed: int, tmp_path: Path) -> None:
    generated = _generate(tmp_path, option_set)
    with team_server() as url:
        report = drill(generated.dest, generated.package, tmp_path / "d", url, "--seed", seed)
    assert report["failures"] == [] and report["_exit"] == 0, report["failures"]
    assert _mounts_under(tmp_path) == []


@pytest.mark.soak
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("option_set", sorted(PG_OPTION_SETS))
def test_every_seed_of_the_power_loss_drill_passes_with_three_workers_on_postgresql(
        option_set: str, seed: int, tmp_path: Path) -> None:
    generated = _generate(tmp_path, option_set)
    with team_server() as url:
        report = drill(generated.dest, generated.package, tmp_path / "d", url, "--workers", 3, "--seed", seed)
    assert report["failures"] == [] and report["_exit"] == 0, report["failures"]
    assert report["power_loss"]["workers"] == 3 and _mounts_under(tmp_path) == []
