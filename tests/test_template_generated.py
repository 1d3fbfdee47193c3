"""Generated projects, installed and tested: their own suites (kill -9 drills
included) must pass, and advisor.scaffold must stream their drill.

What each project's suite runs here (a user runs all of it): every generated suite
holds the same drill machinery, so its whole-drill tests would be paid fourteen times.
The reference project runs everything; each other strategy the tests of its own code
(its module's tests, its call kind, its windows, its contract) and one of the drill modes
its own code decides (STRATEGY_MODE: the default fault schedule, the
aimed kills in its windows, the crash-point sweep, the power cuts; every mode on one
strategy at least besides the reference); a variant of a strategy (other answers) the
tests of what its answers change (the call's kind, the strategy's own tests) and the
kill right after a call (four variants: one per other kind of call and the tuned settings;
the rest in `make soak`). Which is which is data below; `make soak` runs every suite whole.

All generated projects of a test session share ONE virtual environment (built once,
under a file lock so pytest-xdist workers share it too): it sees the toolkit's own
packages through a .pth file, and each project is installed with
`pip install --no-deps --no-build-isolation -e` (nothing is downloaded).
"""

from __future__ import annotations

import fcntl
import os
import re
import sqlite3
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from advisor import scaffold
from advisor.errors import DrillError
from suite_share import DRILLS, STRATEGY_DRILLS, STREAM_DRILLS, STREAM_KEPT, VARIANT_DRILLS, leaving_out_drills_but
from drill_kills import planned_kills

pytestmark = pytest.mark.slow

#: strategy, answers. One entry per template option set; every package name is
#: distinct because they are all installed into the same environment.
OPTION_SETS = {
    "checkpoint-table": ("checkpoint", {"project_name": "Ck Table Job"}),
    "checkpoint-file": ("checkpoint", {"project_name": "Ck File Job", "checkpoint_store": "file"}),
    "checkpoint-tuned": ("checkpoint", {"project_name": "Ck Tuned Job", "batch_size": 40, "task_size": 300,
                                         "checkpoint_interval_s": 0.5, "grace_period_s": 8}),
    "idempotent-retry": ("idempotent-retry", {"project_name": "Ir Retry Job"}),
    # A flaky external service baked in: every drill of the suite retries transient failures.
    "idempotent-retry-flaky": ("idempotent-retry", {"project_name": "Ir Flaky Job", "external_failure_rate": 0.1,
                                                     "grace_period_s": 10}),
    "state-machine": ("state-machine", {"project_name": "Sm Orders Job"}),
    # PostgreSQL as the default store (the suite still runs on SQLite: conftest clears DATABASE_URL).
    "state-machine-pg": ("state-machine", {"project_name": "Sm Pg Job", "state_store": "postgresql",
                                           "grace_period_s": 10}),
    "event-sourcing": ("event-sourcing", {"project_name": "Es Events Job"}),
    # Snapshots often and small batches: rebuilds and the drill cross many snapshots. PostgreSQL as the
    # default store: its dependencies (the library's postgres extra) install; the suite runs on SQLite.
    "event-sourcing-tuned": ("event-sourcing", {"project_name": "Es Tuned Job", "snapshot_every": 7,
                                                "batch_size": 30, "task_size": 400, "state_store": "postgresql"}),
    "event-sourcing-idempotent": ("event-sourcing-idempotent", {"project_name": "Es Ledger Job"}),
    # The external call's kinds besides the default (idempotent): what a kill may cost differs.
    "idempotent-retry-plain-at-most-once": ("idempotent-retry", {"project_name": "Ir Smtp Job",
                                                                 "effect_kind": "plain",
                                                                 "plain_policy": "at-most-once"}),
    "checkpoint-queryable": ("checkpoint", {"project_name": "Ck Lookup Job", "effect_kind": "queryable"}),
    "state-machine-plain-at-least-once": ("state-machine", {"project_name": "Sm Webhook Job",
                                                            "effect_kind": "plain",
                                                            "plain_policy": "at-least-once"}),
    # A plain call beside a file checkpoint: its ledger is a database next to the files.
    "checkpoint-file-plain-at-least-once": ("checkpoint", {"project_name": "Ck File Smtp Job",
                                                           "checkpoint_store": "file", "effect_kind": "plain",
                                                           "plain_policy": "at-least-once"}),
    "checkpoint-table-plain-at-least-once": ("checkpoint", {"project_name": "Ck Table Smtp Job",
                                                            "effect_kind": "plain",
                                                            "plain_policy": "at-least-once"}),
    "event-sourcing-plain-at-most-once": ("event-sourcing", {"project_name": "Es Smtp Job", "effect_kind": "plain",
                                                             "plain_policy": "at-most-once"}),
}


#: The project whose suite runs whole: the drill's machinery is tested there.
REFERENCE = "checkpoint-table"
#: One per strategy (and per store kind): its quick tests and its drill mode in make test.
STRATEGY_MODE = {
    "checkpoint-file": "test_power_cuts_lose_nothing_the_store_committed",          # files, renames, fsyncs
    "idempotent-retry": "test_aim_all_kills_in_every_window_and_loses_nothing",     # its windows
    "state-machine": "test_the_sweep_crashes_at_every_kind_of_point_and_loses_nothing",  # every transition
    "event-sourcing": "test_power_cuts_lose_nothing_the_store_committed",           # the event store on disk
    "event-sourcing-idempotent": "test_a_default_drill_mixes_every_fault_that_applies_and_passes",  # key reuse
}
STRATEGIES = set(STRATEGY_MODE)
#: The variants in make test: one per kind of call besides the default, and the tuned settings
#: of the strategy with the most of them (the rest of them run in make soak).
VARIANTS_IN_MAKE_TEST = {"checkpoint-queryable", "idempotent-retry-plain-at-most-once",
                         "state-machine-plain-at-least-once", "event-sourcing-tuned",
                         "checkpoint-file-plain-at-least-once"}
#: A variant's further drills in make test (file, test): where its option set changes what the
#: others test.
VARIANT_EXTRA = {
    # The upgrade fixture of a file checkpoint must carry the plain call's ledger (a database
    # beside the files): without it a continued run re-sends calls nobody counted in doubt.
    "checkpoint-file-plain-at-least-once": ("tests/test_upgrade.py",
                                            "test_a_store_saved_by_this_code_is_continued_with_nothing_lost"),
}
IN_MAKE_TEST = {REFERENCE} | STRATEGIES | VARIANTS_IN_MAKE_TEST
#: The tests of what a strategy or its answers decide: the call's kind and the strategy's own
#: tests (those files that exist in the project). The tests every project shares (the drill's
#: verdict, input parsing, the runtime) run in the reference project.
OWN_FILES = ("tests/test_effects.py", "tests/test_checkpoint.py", "tests/test_checkpoint_file.py",
             "tests/test_idempotent_retry.py", "tests/test_state_machine.py", "tests/test_event_sourcing.py",
             "tests/test_event_sourcing_idempotent.py")
#: A strategy's further files: its windows, its submit/run/status contract, and where its drill
#: modes live (STRATEGY_MODE chooses the one that runs).
STRATEGY_FILES = ("tests/test_aimed_kills.py", "tests/test_runtime.py", "tests/test_nemesis.py", "tests/test_sweep.py",
                  "tests/test_power_loss.py")

def selection(option_set: str, dest: Path) -> list[str]:
    """The pytest arguments that choose this option set's share of its suite (see the docstring)."""
    if option_set == REFERENCE:
        return []
    own = [f for f in OWN_FILES if (dest / f).is_file()]
    if option_set in STRATEGIES:
        return [*own, *STRATEGY_FILES, *leaving_out_drills_but((STRATEGY_MODE[option_set],))]
    extra = VARIANT_EXTRA.get(option_set)
    files, kept = ([extra[0]], (extra[1],)) if extra else ([], ())
    return [*own, *files, *leaving_out_drills_but((*VARIANT_DRILLS[:1], *kept))]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # With xdist, getbasetemp() is per worker; its parent is shared by the session.
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return root / "generated-env"


@pytest.fixture(scope="session")
def generated_python(shared_root: Path) -> Path:
    """The shared environment's interpreter (created on first use)."""
    shared_root.mkdir(parents=True, exist_ok=True)
    venv = shared_root / "venv"
    python = venv / "bin" / "python"
    with _locked(shared_root / ".lock"):
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
            purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                          capture_output=True, text=True, check=True).stdout.strip())
            # The toolkit's site-packages (pytest, hatchling, ...) become visible here.
            (purelib / "_toolkit.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def install(python: Path, project: Path, shared_root: Path) -> None:
    with _locked(shared_root / ".lock"):
        result = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
             "--no-build-isolation", "--no-index", "-e", str(project)],
            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DATABASE_URL")
           and not k.startswith(("PYTEST_", "COV_"))}
    return env


def _suites() -> list[Any]:
    """Each option set with its share of the suite; in `make soak` (marked soak) each suite whole."""
    return [pytest.param(o, False, id=o, marks=() if o in IN_MAKE_TEST else pytest.mark.soak)
            for o in sorted(OPTION_SETS)] + [
        pytest.param(o, True, id=f"{o}-whole", marks=pytest.mark.soak) for o in sorted(OPTION_SETS) if o != REFERENCE]


@pytest.mark.parametrize(("option_set", "whole"), _suites())
def test_generated_project_installs_and_its_suite_passes(option_set: str, whole: bool, tmp_path: Path,
                                                         generated_python: Path, shared_root: Path) -> None:
    strategy, answers = OPTION_SETS[option_set]
    generated = scaffold.generate(strategy, tmp_path / option_set, answers)
    install(generated_python, generated.dest, shared_root)
    # Installed: importable from anywhere, and `python -m <pkg>` answers.
    where = subprocess.run([str(generated_python), "-c", f"import {generated.package}; print({generated.package}.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, env=clean_env())
    assert where.returncode == 0 and str(generated.dest / "src") in where.stdout, where.stderr
    helped = subprocess.run([str(generated_python), "-m", generated.package, "--help"], cwd=tmp_path,
                            capture_output=True, text=True, env=clean_env())
    assert helped.returncode == 0
    contract = (Path(__file__).resolve().parents[1] / "docs" / "generated-project.md").read_text()
    listing = subprocess.run(
        [str(generated_python), "-c", f"from {generated.package}.cli import build_parser; "
         f"from {generated.package}.runtime.strategy import load; "
         "print(' '.join(build_parser(load())._subparsers._group_actions[0].choices))"],
        cwd=tmp_path, capture_output=True, text=True, env=clean_env())
    commands = listing.stdout.split()
    assert {"submit-demo", "run", "status", "drill"} <= set(commands)
    for command in commands:  # the contract documents every command
        assert f"python -m <pkg> {command}" in contract, command
    # Its own tests, with plain pytest, exactly as a user runs them.
    result = subprocess.run([str(generated_python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             *([] if whole else selection(option_set, generated.dest))],
                            cwd=generated.dest, capture_output=True, text=True, timeout=1500, env=clean_env())
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", summary).group(1))  # type: ignore[union-attr]
    assert passed >= 10 and "failed" not in summary and "skipped" not in summary, summary
    if option_set != REFERENCE and not whole:  # the selection left out exactly what it names, and ran the rest
        assert "deselected" in summary, summary


def test_every_named_test_exists_in_the_template() -> None:
    """A renamed generated test must not silently fall out of the selection (or into it)."""
    tests = Path(__file__).resolve().parents[1] / "templates" / "project" / "tests"
    defined = {m.group(1) for f in tests.glob("*.jinja") for m in re.finditer(r"^def (test_\w+)", f.read_text(), re.M)}
    named = set(DRILLS) | set(STRATEGY_DRILLS) | set(VARIANT_DRILLS) | set(STREAM_DRILLS) | set(STREAM_KEPT)
    assert set(STRATEGY_DRILLS) | set(VARIANT_DRILLS) <= set(DRILLS)
    assert {n for n in named if not any(d.startswith(n) for d in defined)} == set()
    assert set(OPTION_SETS) >= STRATEGIES | {REFERENCE}
    assert set(STRATEGY_MODE.values()) <= set(STRATEGY_DRILLS)
    assert {test for _, test in VARIANT_EXTRA.values()} <= set(DRILLS) and set(VARIANT_EXTRA) <= VARIANTS_IN_MAKE_TEST
    modes = list(STRATEGY_MODE.values())
    assert all(modes.count(mode) >= 1 for mode in STRATEGY_DRILLS), "a drill mode no strategy runs in make test"


def test_scaffold_streams_the_drill(tmp_path: Path) -> None:
    generated = scaffold.generate("checkpoint", tmp_path / "job", {"project_name": "Stream Job"})
    events = list(scaffold.drill_events(generated.dest, records=800, kills=3, seed=4, work_ms=0.5))
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "report"
    report = events[-1]
    # The default fault schedule: the 3 kills, a successor on another host (a SIGTERM too), each
    # restarted and recovered; the other faults as "fault" events.
    moved = report["faults"].get("other-host", {}).get("injected", 0)
    # and one just before each of a worker's first writes but the chain's own (drill/moments.py, WRITES_CUT)
    assert kinds.count("kill") == planned_kills(3, "checkpoint") + moved == kinds.count("recovered"), kinds
    assert kinds.count("fault") >= 4, kinds  # the service refusing and timing out, a resubmission, an outage
    progress = [e for e in events if e["event"] == "progress"]
    # the total grows only when the drill adds records (new input while the workers run, an extension)
    assert progress and progress[0]["total"] == 800 and all(0 <= e["done"] <= e["total"] for e in progress)
    assert [e["total"] for e in progress] == sorted(e["total"] for e in progress)
    assert report["ok"] is True and report["lost"] == 0 and report["duplicate_effects"] == 0
    assert report["kills"] == planned_kills(3, "checkpoint") and report["strategy"] == "checkpoint"
    # docs/generated-project.md documents every key the drill really reports.
    contract = (Path(__file__).resolve().parents[1] / "docs" / "generated-project.md").read_text()
    undocumented = [key for key in report if key != "event" and f"`{key}`" not in contract]
    assert not undocumented, undocumented


def test_scaffold_run_drill_with_sigterm(tmp_path: Path) -> None:
    generated = scaffold.generate("checkpoint", tmp_path / "job", {"checkpoint_store": "file"})
    report = scaffold.run_drill(generated.dest, records=600, kills=2, seed=2, sigterm=True, work_ms=0.5)
    assert report["ok"] is True and report["signal"] == "SIGTERM"
    assert [g["exit_code"] for g in report["graceful_exits"]] == [0, 0]
    assert report["redone_calls"] == 0


def test_drill_of_something_that_is_not_a_project(tmp_path: Path) -> None:
    with pytest.raises(DrillError, match="not a generated project"):
        list(scaffold.drill_events(tmp_path))


def test_drill_that_cannot_report_is_a_drill_error(tmp_path: Path) -> None:
    generated = scaffold.generate("checkpoint", tmp_path / "job")
    # Break the project: the drill crashes before reporting.
    (generated.dest / "src" / generated.package / "drill" / "command.py").write_text("raise SystemExit('drill broken')\n")
    with pytest.raises(DrillError, match="did not report"):
        scaffold.run_drill(generated.dest, records=10, kills=0)


def test_closing_the_event_stream_stops_the_drill_and_its_workers(tmp_path: Path) -> None:
    generated = scaffold.generate("checkpoint", tmp_path / "job", {"project_name": "Stop Probe Job"})
    events = scaffold.drill_events(generated.dest, records=50000, kills=5, seed=1, work_ms=1)
    for event in events:
        if event["event"] == "progress" and event["done"] > 0:
            break
    events.close()  # what the TUI does when the user quits mid-drill
    # The drill stopped its worker: external.db stops growing, far from done.
    (drill_dir,) = (generated.dest / "data").glob("drill-*")

    def applied() -> int:
        conn = sqlite3.connect(drill_dir / "external.db")
        try:
            return int(conn.execute("SELECT COUNT(*) FROM effects").fetchone()[0])
        finally:
            conn.close()

    first = applied()
    time.sleep(0.5)
    assert applied() == first < 50000


#: Phrases that would promise a plain call more than it can have.
EXACTLY_ONCE = re.compile(r"exactly[- ]once", re.IGNORECASE)


@pytest.mark.parametrize("policy", ["at-most-once", "at-least-once"])
def test_a_plain_project_never_claims_exactly_once(policy: str, tmp_path: Path) -> None:
    """README, help, status, reconcile and the drill's text of a plain-call project: no
    'exactly once' anywhere, and the drill says which promise it checked."""
    generated = scaffold.generate("idempotent-retry", tmp_path / "job",
                                  {"project_name": "Plain Job", "effect_kind": "plain", "plain_policy": policy})
    readme = (generated.dest / "README.md").read_text(encoding="utf-8")
    assert not EXACTLY_ONCE.search(readme), EXACTLY_ONCE.search(readme)
    assert f"**plain** ({policy})" in readme and "reconcile" in readme
    env = {**clean_env(), "PYTHONPATH": str(generated.dest / "src")}
    data = tmp_path / "data"

    def cli(*argv: str) -> str:
        done = subprocess.run([sys.executable, "-m", generated.package, *argv], cwd=generated.dest,
                              capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    outputs = [cli("--help"), cli("reconcile", "--help"), cli("drill", "--help")]
    # The wording of a drill with calls in doubt (kills between a call and its commit); the fault mix's
    # own verdicts are held by the drill's tests and the soak, not by this one.
    drill = cli("drill", "--records", "150", "--kills", "2", "--seed", "3", "--work-ms", "0", "--only", "sigkill",
                "--aim", "after_call_before_commit", "--data-dir", str(data))
    outputs += [drill, cli("status", "--data-dir", str(data)), cli("reconcile", "--data-dir", str(data)),
                cli("reconcile", "--json", "--data-dir", str(data))]
    for text in outputs:
        assert not EXACTLY_ONCE.search(text), text
    assert f"OK (plain call, {policy.replace('-', ' ')})" in drill, drill
    assert "in doubt" in drill and "call(s) in doubt" in outputs[4]
