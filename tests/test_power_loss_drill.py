"""``drill --power-loss`` of generated projects (issue 21): power cuts on LazyFS, held to what they exist for.

* A checkpoint project passes it; a copy that commits with ``PRAGMA synchronous = NORMAL``
  fails it with ``committed_lost``: the census worker dies at a call two batches in, after commits
  that sat in the WAL unsynced (the submit's closing checkpoint synced everything before them).
  A checkpoint-file copy that renames its new generation into place without fsyncing it fails
  with ``committed_lost`` and ``store_corrupt`` (the file comes back empty).
* No LazyFS mount is left behind: after a pass, after a failure, after a SIGTERM to the drill.
* ``@pytest.mark.soak``: SEEDS seeds of every SQLite option set (`make soak`).

Each generated suite runs the drill once itself (its tests/test_power_loss.py). Without LazyFS
these are skipped with how to get it (tests/lazyfs_support.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from lazyfs_support import load_lazyfs, skip_reason

from advisor import scaffold

pytestmark = [pytest.mark.slow, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

SEEDS = range(1, int(os.environ.get("SOAK_SEEDS", "10")) + 1)
OPTION_SETS = {
    "checkpoint": ("checkpoint", {}),
    "checkpoint-file": ("checkpoint", {"checkpoint_store": "file"}),
    "idempotent-retry": ("idempotent-retry", {}),
    "state-machine": ("state-machine", {}),
    "state-machine-plain-at-least-once": ("state-machine", {"effect_kind": "plain", "plain_policy": "at-least-once"}),
    "event-sourcing": ("event-sourcing", {}),
    "event-sourcing-idempotent": ("event-sourcing-idempotent", {}),
}
DRILL_TIMEOUT_S = 900
FULL = 'store.execute("PRAGMA synchronous = FULL")'
#: save_checkpoint's fsync of the new generation before it is renamed into place (checkpoint_file/files.py).
CHECKPOINT_FSYNC = """        f.write(doc)
        f.flush()
        os.fsync(f.fileno())
"""


def _env(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DATABASE_URL")
           and not k.startswith(("PYTEST_", "COV_"))}
    env["PYTHONPATH"] = str(project / "src")
    return env


def _command(package: str, data: Path, *flags: object) -> list[str]:
    return [sys.executable, "-m", package, "drill", "--power-loss", "--data-dir", str(data), *map(str, flags)]


def drill(project: Path, package: str, data: Path, *flags: object) -> dict:
    result = subprocess.run(_command(package, data, "--json", "--no-shrink", *flags), cwd=project,
                            env=_env(project), capture_output=True, text=True, timeout=DRILL_TIMEOUT_S)
    assert result.stdout.strip(), result.stderr[-3000:]
    report: dict = json.loads(result.stdout)
    report["_exit"] = result.returncode
    return report


def _mutated(project: Path, to: Path, relative: str, old: str, new: str) -> Path:
    """A copy of the project with ``old`` replaced by ``new`` in one file (which must hold it once)."""
    shutil.copytree(project, to, ignore=shutil.ignore_patterns("data", ".pytest_cache"))
    path = to / relative
    source = path.read_text(encoding="utf-8")
    assert source.count(old) == 1, f"{relative} no longer holds, once, what this mutation changes: {old!r}"
    path.write_text(source.replace(old, new), encoding="utf-8")
    return to


def _mounts_under(path: Path) -> list[str]:
    """LazyFS mounts at or below ``path``, read from /proc/self/mountinfo."""
    root = str(path.resolve())
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if " - fuse.lazyfs " in line and root in line]


@pytest.fixture(scope="module")
def checkpoint_project(tmp_path_factory: pytest.TempPathFactory) -> scaffold.Generated:
    return scaffold.generate("checkpoint", tmp_path_factory.mktemp("power") / "job", {"project_name": "Power Loss"})


def test_a_checkpoint_project_passes_and_synchronous_normal_fails_with_committed_lost(
        checkpoint_project: scaffold.Generated, tmp_path: Path) -> None:
    project, package = checkpoint_project.dest, checkpoint_project.package
    passed = drill(project, package, tmp_path / "pass", "--records", 300, "--seed", 1, "--sweep-sample", 1,
                   "--random-cuts", 1)
    assert passed["failures"] == [] and passed["_exit"] == 0, passed["failures"]
    assert passed["power_loss"]["cuts"] == passed["kills"] + 1
    assert {"commit", "called", "random"} <= {p.split("@")[0] for p in passed["power_loss"]["cuts_by_point"]}

    mutated = _mutated(project, tmp_path / "mutated", f"src/{package}/runtime/store.py", FULL,
                       FULL.replace("FULL", "NORMAL"))
    failed = drill(mutated, package, tmp_path / "fail", "--records", 300, "--seed", 1, "--sweep-sample", 1,
                   "--random-cuts", 1)
    assert failed["_exit"] == 1 and "committed_lost" in {f["check"] for f in failed["failures"]}, failed["failures"]
    first_cut = failed["power_loss"]["cut_log"][0]
    assert first_cut["phase"] == "census" and first_cut["lost"], first_cut  # right after commits: lost, each time
    assert _mounts_under(tmp_path) == []  # after a pass and after a failure


def test_checkpoint_files_renamed_without_fsync_fail_with_committed_lost(tmp_path: Path) -> None:
    """The new generation renamed into place with its data never fsynced: after the cut it is empty."""
    generated = scaffold.generate("checkpoint", tmp_path / "job", {"project_name": "Power Files",
                                                                   "checkpoint_store": "file"})
    package = generated.package
    mutated = _mutated(generated.dest, tmp_path / "mutated", f"src/{package}/checkpoint_file/files.py",
                       CHECKPOINT_FSYNC, CHECKPOINT_FSYNC.replace("        os.fsync(f.fileno())\n", ""))
    failed = drill(mutated, package, tmp_path / "fail", "--records", 300, "--seed", 1, "--sweep-sample", 0,
                   "--random-cuts", 0)
    checks = {f["check"] for f in failed["failures"]}
    assert failed["_exit"] == 1 and {"committed_lost", "store_corrupt"} <= checks, failed["failures"]
    assert any("checkpoint.json" in lost for lost in failed["power_loss"]["cut_log"][0]["lost"])
    assert _mounts_under(tmp_path) == []


@contextmanager
def drill_at_first_cut(command: list[str], cwd: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """A power-loss drill (``--events``) held at its first power cut (mounted, workers running) and
    handed to the body; killed if the body leaves it running.

    Held with SIGSTOP, so it cannot finish its records while the body looks around (it once did,
    and a SIGTERM sent after that found nothing to stop); :func:`terminate_held` signals it."""
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if json.loads(line).get("event") == "power_cut":
                proc.send_signal(signal.SIGSTOP)
                break
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def terminate_held(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to a drill held by :func:`drill_at_first_cut`: the signal waits while it is stopped
    and is the first thing it meets when it goes on."""
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGCONT)


def wait_while(condition: Callable[[], object], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while condition() and time.monotonic() < deadline:
        time.sleep(0.1)


def test_a_sigterm_to_the_drill_unmounts(checkpoint_project: scaffold.Generated, tmp_path: Path) -> None:
    project, package = checkpoint_project.dest, checkpoint_project.package
    with drill_at_first_cut(_command(package, tmp_path / "d", "--events", "--records", 300), project,
                            _env(project)) as proc:
        assert _mounts_under(tmp_path), "the drill's LazyFS mount was not seen while it ran"
        terminate_held(proc)
        code = proc.wait(timeout=60)
    assert code == 128 + signal.SIGTERM
    wait_while(lambda: _mounts_under(tmp_path))
    assert _mounts_under(tmp_path) == [] and load_lazyfs().lazyfs_mounts(tmp_path) == []


def test_several_workers_pass_and_synchronous_normal_fails_with_committed_lost(
        checkpoint_project: scaffold.Generated, tmp_path: Path) -> None:
    """Every cut kills all three workers at once; the next three take over what the dead ones held."""
    project, package = checkpoint_project.dest, checkpoint_project.package
    flags = ("--workers", 3, "--records", 900, "--seed", 1, "--random-cuts", 2)
    passed = drill(project, package, tmp_path / "pass", *flags)
    assert passed["failures"] == [] and passed["_exit"] == 0, passed["failures"]
    power = passed["power_loss"]
    assert power["workers"] == passed["workers"] == 3 and power["cuts"] == 3, power
    assert passed["kills"] > power["cuts"] - 1  # a cut kills every worker still running: more kills than cuts

    mutated = _mutated(project, tmp_path / "mutated", f"src/{package}/runtime/store.py", FULL,
                       FULL.replace("FULL", "NORMAL"))
    failed = drill(mutated, package, tmp_path / "fail", *flags)
    assert failed["_exit"] == 1 and "committed_lost" in {f["check"] for f in failed["failures"]}, failed["failures"]
    assert _mounts_under(tmp_path) == []


@pytest.mark.soak
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("option_set", sorted(set(OPTION_SETS) - {"checkpoint-file"}))  # one worker per directory
def test_every_seed_of_the_power_loss_drill_passes_with_three_workers(option_set: str, seed: int,
                                                                      tmp_path: Path) -> None:
    strategy, answers = OPTION_SETS[option_set]
    generated = scaffold.generate(strategy, tmp_path / "job", {"project_name": f"Power {option_set}", **answers})
    report = drill(generated.dest, generated.package, tmp_path / "d", "--workers", 3, "--seed", seed)
    assert report["failures"] == [] and report["_exit"] == 0, report["failures"]
    assert _mounts_under(tmp_path) == []


@pytest.mark.soak
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("option_set", sorted(OPTION_SETS))
def test_every_seed_of_the_power_loss_drill_passes(option_set: str, seed: int, tmp_path: Path) -> None:
    strategy, answers = OPTION_SETS[option_set]
    generated = scaffold.generate(strategy, tmp_path / "job", {"project_name": f"Power {option_set}", **answers})
    report = drill(generated.dest, generated.package, tmp_path / "d", "--seed", seed)
    assert report["failures"] == [] and report["_exit"] == 0, report["failures"]
    assert _mounts_under(tmp_path) == []
