"""The drill's judgement: the oracle's two clean runs, what the strategy stored read back, the checks.

The oracle (oracle.py) knows only the input and job.py; verdict.py holds the checks as pure
functions; the workers' durability probes (durability.py) say what they really ran with.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import job
from .. import settings as settings_module
from ..runtime import effects
from ..runtime.external import applied_effects
from ..runtime.service_log import a_redone_call, redone_by_process, resends, resent_from
from ..runtime.strategy import Context
from ..runtime.strategy import load as load_strategy
from ..settings import Settings
from . import evidence, reconciler, verdict
from .checks import (bad_input, calls, claims, exits, history, hung_worker, rebuild, resubmission, second_outage,
                     second_start, upgrade)
from .durability import PROBE_ENV, collect
from .history import read as read_history
from .history import takeovers

ORACLE_TIMEOUT_S = 120  # the oracle runs meanwhile; waiting longer means job.py hangs
#: The second oracle run's wall clock is moved this far (a day and a bit): a job that
#: reads the time, even rounded to the hour or the day, answers differently.
ORACLE_CLOCK_SHIFT_S = 90061.5
INPUT_FILE = "drill-input.json"
PROBE_DIR = "drill-durability"


def start_oracle(data_dir: Path, name: str, shuffle_seed: int | None, clock_shift_s: float,
                 env: dict[str, str]) -> subprocess.Popen[bytes]:
    """One oracle run in a clean process (oracle.py); ``env`` is the workers' without the probe."""
    cmd = [sys.executable, "-m", f"{settings_module.PACKAGE}.drill.oracle", "--input", str(data_dir / INPUT_FILE),
           "--output", str(data_dir / f"drill-oracle-{name}.json")]
    if shuffle_seed is not None:
        cmd += ["--shuffle-seed", str(shuffle_seed)]
    if clock_shift_s:
        cmd += ["--clock-shift-s", str(clock_shift_s)]
    # What the job's effect() answers in the run: the service's answer, or "recorded" (strategy.py).
    cmd += ["--answers", getattr(load_strategy(), "EFFECT_ANSWERS", "service")]
    env = dict(env)
    env.pop(PROBE_ENV, None)
    with open(data_dir / f"drill-oracle-{name}.log", "wb") as err:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env)


def start_oracles(data_dir: Path, records: list[dict[str, Any]], seed: int, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    """The two oracle runs, started while the workers run (almost free): they read the input,
    never the strategy's state; the second shuffled by the seed, its clock moved."""
    (data_dir / INPUT_FILE).write_text(json.dumps(records), encoding="utf-8")
    return [start_oracle(data_dir, "a", None, 0.0, env), start_oracle(data_dir, "b", seed, ORACLE_CLOCK_SHIFT_S, env)]


def stop_oracles(procs: list[subprocess.Popen[bytes]]) -> None:
    """Oracle runs nobody will read (the drill stopped, or its input grew): killed and reaped."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def _oracle_result(data_dir: Path, proc: subprocess.Popen[bytes], name: str) -> dict[str, Any]:
    try:
        code = proc.wait(timeout=ORACLE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise _OracleFailed(f"the oracle took longer than {ORACLE_TIMEOUT_S} s (does process_record hang?)")
    if code != 0:
        lines = (data_dir / f"drill-oracle-{name}.log").read_text(errors="replace").strip().splitlines()
        raise _OracleFailed(f"the oracle exited with code {code}: {lines[-1] if lines else 'no output'}")
    result: dict[str, Any] = json.loads((data_dir / f"drill-oracle-{name}.json").read_text(encoding="utf-8"))
    return result


def judge(ctx: Context, settings: Settings, data_dir: Path, report: dict[str, Any], expected: set[tuple[str, str]],
          records: list[dict[str, Any]], oracles: list[subprocess.Popen[bytes]],
          state: dict[str, Any]) -> list[verdict.Failure]:
    """Every failing check of the run (verdict.py); fills the report's ``oracle``, ``durability``
    and ``store_outages_ridden``. ``settings`` are the project's (``ctx`` is the drill's own)."""
    strategy = ctx.strategy
    applied = applied_effects(data_dir)
    failures: list[verdict.Failure] = []
    try:
        a, b = (_oracle_result(data_dir, proc, name) for proc, name in zip(oracles, "ab"))
    except _OracleFailed as exc:
        a = None
        failures.append(verdict.failure("results", f"{exc}; results could not be checked"))
    policy = report["plain_policy"] or ""
    in_doubt = effects.in_doubt_calls(ctx.data_dir, settings)  # the ledger: the workers' state.db
    # Held in doubt at some point: still, or until a person answered (the reconcile fault).
    held = evidence.held_in_doubt(ctx.data_dir, settings)
    failures += verdict.check_effects(applied, expected, a, policy=policy, in_doubt=set(in_doubt),
                                      resent=report["possible_duplicates"])
    if a is not None:
        a["records_in_order"] = [str(r["record_id"]) for r in records]
        unstable = verdict.unstable_records(a, b)
        skip = set(unstable)
        failures += verdict.check_determinism(a, b, unstable)
        stored = _read_back(strategy.stored_results, ctx, "results", failures)
        if stored is not _UNREADABLE:
            # A record whose call was in doubt when it was done keeps that answer in its result, also
            # after a person answered for the call (the re-send does not redo the record).
            failures += verdict.check_results(stored, a, skip, unknown={rid for rid, _, _ in held})
        states = _read_back(strategy.stored_final_states, ctx, "final_state", failures)
        if states is not _UNREADABLE:
            failures += verdict.check_final_states(states, a, skip, job.fold)
        failures += calls.check_calls_per_step(a)
        failures += verdict.check_payloads(applied, a, skip)
        report["oracle"] = {
            "records": len(a["records"]), "expected_effects": len(expected), "steps": a["steps"],
            "computed_by": "job.process_record in two clean processes (input order; shuffled with the clock "
                           "moved), with a recording effect: no external call",
            "unstable_records": len(unstable),
            "errors": sum("error" in r for r in a["records"].values()),
        }
    else:
        report["oracle"] = {"records": len(records), "expected_effects": len(expected), "steps": list(job.STEPS),
                            "computed_by": "the oracle failed; see the results failure"}
    stored_history = getattr(strategy, "stored_history", None)  # optional (strategy.py)
    if stored_history is not None:
        kept = _read_back(stored_history, ctx, "history", failures)
        if kept is not _UNREADABLE:
            failures += history.check_history(kept)
    failed_task = next((t for t in state.get("tasks", []) if t.get("error")), None)
    seen = collect(data_dir / PROBE_DIR)
    # A store outage a worker rode out restarts its unit in flight like a kill: same allowance.
    report["store_outages_ridden"] = seen["outages"]
    # How each worker stopped, told by itself (witness.py): a clean stop leaves nothing behind.
    report["exits"] = evidence.exits_summary(seen["workers"])
    sent = evidence.call_log(data_dir)
    failures += exits.check_held(seen["workers"], sent)
    failures += exits.check_after_exit(seen["workers"], sent, held)
    failures += exits.check_acks(seen["workers"])
    failures += reconciler.check(report.get("operator") or [])
    ops = read_history(Path(report["history"])) if report.get("history") else []
    if ops:  # the fault schedule's runs (a sweep's segments keep none)
        failures += second_start.check(ops) + rebuild.check(ops) + claims.check(ops, float(settings.lease_s))
        failures += upgrade.check(ops) + second_outage.check(ops) + hung_worker.check(ops)
        failures += bad_input.check(ops, report)
        failures += claims.check_taken(ops, resends(data_dir), float(settings.lease_s))
    failures += verdict.check_run(report, promise=strategy.REDONE_CALLS_PER_KILL,
                                  redone_example=a_redone_call(data_dir) if report["redone_calls"] else None,
                                  failed_task=failed_task, log_path=str(data_dir / "drill-workers.log"),
                                  resent=report["possible_duplicates"] if policy == "at-least-once" else None,
                                  redone_by_worker=redone_by_process(data_dir) if report["workers"] == 1 else None,
                                  outages_by_worker={w["pid"]: w["outages"] for w in seen["workers"]},
                                  takeovers_by_worker=takeovers(ops, resent_from(data_dir)))
    report["durability"] = observed_durability(ctx, data_dir, seen)
    failures += verdict.check_durability(report["durability"])
    failures += resubmission.check(report, strategy)  # what only the fault schedule can show
    return failures


def observed_durability(ctx: Context, data_dir: Path, seen: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the workers were observed to run with (their probes' reports, durability.py)."""
    seen = collect(data_dir / PROBE_DIR) if seen is None else seen
    if getattr(ctx.strategy, "STATE_STORE", "database") == "files":
        return {"state_store": "files", "processes": seen["processes"], **seen["files"],
                "violations": seen["violations"]}
    # commits_read: state-store commits whose settings were read, each inside its transaction.
    if ctx.settings.database_url.startswith(("postgresql://", "postgres://")):
        return {"state_store": "postgresql", "processes": seen["processes"], "settings": seen["postgresql"],
                "commits_read": seen["commits_read"]}
    return {"state_store": "sqlite", "processes": seen["processes"], "settings": seen["sqlite"],
            "commits_read": seen["commits_read"]}


_UNREADABLE = object()


def _read_back(read: Callable[[Context], Any], ctx: Context, check: str, failures: list[verdict.Failure]) -> Any:
    """What the strategy stored; a store it cannot read back is that check's failure, not a crash."""
    try:
        return read(ctx)
    except Exception as exc:  # a broken store is exactly what a drill is for
        failures.append(verdict.failure(check, f"what the run stored cannot be read back: "
                                               f"{type(exc).__name__}: {exc}"))
        return _UNREADABLE


class _OracleFailed(Exception):
    """The oracle could not say what the run should have produced."""
