"""The upgrade drill: a store the previous release wrote, killed mid-run, continued by this code.

Every other drill starts on an empty store at the current schema, so a migration that
breaks a store in use (a running-state column dropped, a claim column renamed) would pass
them all: the default drill ends with this one (its ``upgrade`` fault, continue_fixture). ``drill --upgrade-from VERSION`` starts instead from an upgrade fixture
(upgrade_fixture.py): the rows a release whose schema version was VERSION left in its
store when it was killed mid-run, and what it had applied at the external service. The
current code then continues it, crashing at the first points of its first worker (the
schema check, each migration's transaction), at the first pass of every persistence point
and at a seeded sample (sweep_plan.py; ``--sweep`` for the full sweep), and the run is
judged like every drill: nothing lost or applied twice, every result and running state as
job.py computes them.

Fixtures live in ``tests/fixtures/upgrade/v<VERSION>.json`` of the project (VERSION may
also be a fixture's path). The template ships one per schema version it released; a
project that changes its own schema saves one with its code BEFORE the change::

    python -m <package> drill --save-upgrade-fixture      # writes tests/fixtures/upgrade/v<current>.json

commits it, then bumps ``SCHEMA_VERSION`` and adds the migration; from then on
``drill --upgrade-from <that version>`` proves the migration on a store in use.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import job
from .. import settings as settings_module
from ..job import demo_records
from ..runtime import faults
from ..runtime.errors import JobError
from ..runtime.strategy import Context
from . import upgrade_fixture
from .upgrade_fixture import FIXTURES
from .durability import PROBE_ENV
from .preflight import fresh_data_dir
from .segments import CrashPointRun, worker_env
from .sweep_plan import SweepPlan, Target

#: Crashes at the first points of the first worker on the old store: its schema check and migrations.
OPENING = 3
#: Without --sweep: each point's first pass after a restart, and a small sample beyond.
PREFIX, SAMPLE = 1, 2
#: A saved fixture: the demo records, the worker killed before this share of its calls.
FIXTURE_RECORDS = 150
KILLED_AT = 0.75


def fixture_path(spec: str) -> Path:
    """``VERSION`` (a fixture of this project) or the path of a fixture file."""
    if spec.isdigit():
        path = FIXTURES / f"v{int(spec)}.json"
        if not path.is_file():
            have = sorted(p.stem for p in FIXTURES.glob("v*.json")) if FIXTURES.is_dir() else []
            raise JobError(f"no upgrade fixture for schema version {spec} in {FIXTURES} "
                           f"({'there are: ' + ', '.join(have) if have else 'there is none'}); save one with "
                           f"`python -m {settings_module.PACKAGE} drill --save-upgrade-fixture` before changing "
                           "the schema")
        return path
    path = Path(spec)
    if not path.is_file():
        raise JobError(f"--upgrade-from {spec}: neither a schema version nor a fixture file")
    return path


def run_upgrade(args: argparse.Namespace, ctx: Context, emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """``drill --upgrade-from VERSION``: the fixture loaded, then continued with crashes (module doc)."""
    if args.workers != 1:
        raise JobError("--upgrade-from continues the old store with one worker at a time; drop --workers")
    path, doc = _fixture(ctx, str(args.upgrade_from))
    plan = (SweepPlan(args.sweep_prefix, args.sweep_sample, args.seed, opening=OPENING) if args.sweep
            else SweepPlan(PREFIX, SAMPLE, args.seed, opening=OPENING))
    done = len({(r[0], r[1]) for r in doc["external"]["effects"]["rows"]})
    about = {"upgrade": {"from_version": doc["schema_version"], "fixture": str(path), "made_by": doc["made_by"],
                         "effects_applied_before": done}}
    return _continued(ctx, doc, plan, seed=args.seed, work_ms=args.work_ms, data_dir=args.data_dir, emit=emit,
                      fail_rate=args.fail_rate, extra=about)


def continue_fixture(ctx: Context, version: int, data_dir: Path, *, seed: int, work_ms: float) -> dict[str, Any]:
    """The default drill's ``upgrade`` (finals.py): ``--upgrade-from VERSION`` with its defaults, run in
    ``data_dir`` once every worker of the drill ended; what it found, and the command that reruns it alone."""
    path, doc = _fixture(ctx, str(version))
    report = _continued(ctx, doc, SweepPlan(PREFIX, SAMPLE, seed, opening=OPENING), seed=seed, work_ms=work_ms,
                        data_dir=data_dir, emit=lambda event: None)
    rerun = (f"{shlex.quote(sys.executable)} -m {settings_module.PACKAGE} drill --upgrade-from {doc['schema_version']}"
             f" --seed {seed} --work-ms {work_ms:g}")
    return {"from_version": doc["schema_version"], "fixture": path.name, "crashes": report["kills"],
            "failures": [{"check": f["check"], "message": f["message"]} for f in report["failures"]],
            "data_dir": str(data_dir), "rerun": rerun}


def _fixture(ctx: Context, spec: str) -> tuple[Path, dict[str, Any]]:
    """The fixture ``spec`` names, read and checked against this project."""
    path = fixture_path(spec)
    doc = upgrade_fixture.read(path)
    upgrade_fixture.check(doc, ctx, path)
    return path, doc


def _continued(ctx: Context, doc: dict[str, Any], plan: SweepPlan, **options: Any) -> dict[str, Any]:
    """The fixture's store loaded into the run's data directory, then continued by this code with crashes."""
    return CrashPointRun(ctx, plan, lambda run_ctx: upgrade_fixture.load(doc, run_ctx), mode="upgrade",
                         **options).run()


def summary_lines(report: dict[str, Any]) -> list[str]:
    upgrade = report.get("upgrade")
    if not upgrade:
        return []
    return [f"upgrade: from schema version {upgrade['from_version']} ({upgrade['fixture']}: "
            f"{upgrade['effects_applied_before']} effects applied before the old code was killed), "
            f"continued by this code"]


# ------------------------------------------------------------ saving one
def save(args: argparse.Namespace, ctx: Context) -> int:
    """``drill --save-upgrade-fixture [FILE]``: this code's store, killed mid-run, as a fixture."""
    strategy = ctx.strategy
    if strategy is None:
        raise JobError("no strategy loaded")
    data_dir = fresh_data_dir(args.data_dir)
    run_ctx = Context(data_dir=data_dir, settings=ctx.settings, strategy=strategy)
    records = demo_records(args.records or FIXTURE_RECORDS)
    strategy.submit(run_ctx, records, work_ms=0.0)
    kept_elsewhere = [n for n in getattr(strategy, "STATE_FILES", ()) if (data_dir / n).is_dir()]
    if kept_elsewhere:  # the stream: Spark's checkpoint and its landing files, with absolute paths
        raise JobError(f"the {strategy.NAME} strategy keeps its progress in directories ({', '.join(kept_elsewhere)}); "
                       "an upgrade fixture holds tables and files only")
    calls = max(2, int(KILLED_AT * len(records) * len(job.STEPS)))
    env = worker_env(data_dir, Target("call", calls, "fixture"))
    for name in (PROBE_ENV, faults.POINTS_ENV):  # nothing of the drill's own in the fixture's data directory
        env.pop(name, None)
    code = subprocess.run([sys.executable, "-m", settings_module.PACKAGE, "run", "--data-dir", str(data_dir)],
                          env=env, stdin=subprocess.DEVNULL, capture_output=True).returncode
    if code != -signal.SIGKILL:
        raise JobError(f"the worker was to be killed at its call {calls} but exited with code {code}; "
                       "use more --records")
    schema = Path(__file__).resolve().parents[1] / "schema.sql"
    doc = upgrade_fixture.dump(run_ctx, records, schema_sql=schema.read_text(encoding="utf-8")
                               if schema.is_file() else None,
                               made_by=f"{settings_module.PACKAGE} ({strategy.NAME}), killed at its call {calls}")
    target = Path(args.save_upgrade_fixture) if args.save_upgrade_fixture else FIXTURES / f"v{doc['schema_version']}.json"
    if target.exists():
        raise JobError(f"{target} exists: a fixture is made once, by the code that wrote that schema version "
                       "(pass another FILE to keep both)")
    upgrade_fixture.write(doc, target)
    print(f"saved {target}: schema version {doc['schema_version']}, {len(records)} records, "
          f"killed at call {calls}; commit it, then change the schema and run "
          f"`python -m {settings_module.PACKAGE} drill --upgrade-from {doc['schema_version']}`")
    return 0
