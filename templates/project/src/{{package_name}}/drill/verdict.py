"""The drill's verdict: every check it measures, each failure named by its check id.

Pure functions over what the drill collected (no I/O): the applied effects, the
oracle's two runs (oracle.py), what the strategy stored, the kills, the workers'
exits and the durability the probe observed. Each failing check adds one
``{"check": ID, "message": "..."}`` whose message names the problem and, where
there is one, a record. ``ok`` is ``failures == []``.

What ``lost`` and ``duplicate_effects`` demand depends on the external call's kind
(effects.py), i.e. on what the project promises:

* idempotent, queryable: every expected effect applied once, and only once (0
  lost, 0 duplicates);
* plain, at most once: 0 duplicates, and every effect that is missing is listed
  as in doubt (``reconcile``); a missing effect NOT in doubt fails ``lost``;
* plain, at least once: 0 lost, and no more duplicates than calls in doubt (each
  was re-sent once per doubt); more fail ``duplicate_effects``. ``redone_calls``
  is bounded by those re-sends instead of a number per kill.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from . import durability as durability_module

#: Every check id, in the order the text verdict lists them (the later ones: drill/checks/).
CHECKS = ("lost", "duplicate_effects", "unexpected_effects", "incomplete", "results", "final_state",
          "nondeterministic_job", "calls_per_step", "effect_payloads", "history", "kills_not_delivered",
          "redone_calls", "durability", "worker_failures", "graceful_exit", "held_after_exit",
          "in_doubt_after_exit", "resent_after_exit", "acked_uncommitted", "resubmission", "key_reuse",
          "heartbeat_kept", "taken_while_held", "committed_lost", "store_corrupt", "reconcile", "second_start", "rebuild",
          "second_outage", "hung_holder", "upgrade", "stalled", "bad_input")

Failure = dict[str, str]


def failure(check: str, message: str) -> Failure:
    assert check in CHECKS, check
    return {"check": check, "message": message}


def canonical(value: Any) -> str:
    """JSON with sorted keys: a stored result and the oracle's compare by value, not by form."""
    return json.dumps(value, sort_keys=True, default=repr)


def show(value: Any, limit: int = 120) -> str:
    text = canonical(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _first(items: Iterable[Any]) -> Any:
    return sorted(items)[0]


def _step(step: str) -> str:
    return f"step {step!r}"


# ----------------------------------------------------------------- the effects
def check_effects(applied: list[tuple[str, str, Any]], expected: set[tuple[str, str]],
                  oracle: dict[str, Any] | None, *, policy: str = "",
                  in_doubt: set[tuple[str, str]] | None = None, resent: int = 0) -> list[Failure]:
    """Lost, applied twice, applied though not expected.

    ``policy`` (plain calls only): ``at-most-once`` forgives a missing effect listed
    ``in_doubt``; ``at-least-once`` forgives up to ``resent`` duplicates (re-sends of
    calls in doubt).
    """
    found: list[Failure] = []
    counts = Counter((rid, step) for rid, step, _ in applied)
    lost = expected - counts.keys()
    if policy == "at-most-once":
        lost -= in_doubt or set()  # missing, but listed for a person by `reconcile`
    if lost:
        rid, step = _first(lost)
        hint = ""
        asked = oracle["records"].get(rid, {}).get("effects") if oracle else None
        if asked is not None and step not in {s for s, _ in asked}:
            hint = "; job.py declares this step in STEPS but process_record never asks for it"
        unlisted = " and are not listed as in doubt" if policy == "at-most-once" else ""
        found.append(failure("lost", f"{len(lost)} of {len(expected)} expected effects were never applied"
                                     f"{unlisted}, e.g. record {rid} {_step(step)}{hint}"))
    twice = {key: n for key, n in counts.items() if n > 1}
    extra = sum(n - 1 for n in twice.values())
    if twice and policy == "at-least-once" and extra <= resent:
        twice = {}  # the promise: at least once, each call in doubt re-sent once per doubt
    if twice:
        (rid, step), n = sorted(twice.items())[0]
        bound = (f" (at least once allows {resent}: the calls re-sent in doubt)" if policy == "at-least-once" else "")
        found.append(failure("duplicate_effects", f"{extra} effects were applied more than once{bound}, "
                                                  f"e.g. record {rid} {_step(step)} {n} times"))
    unexpected = counts.keys() - expected
    if unexpected:
        rid, step = _first(unexpected)
        found.append(failure("unexpected_effects", f"{len(unexpected)} effects were applied that the input and "
                                                   f"job.STEPS do not call for, e.g. record {rid} {_step(step)}"))
    return found


# -------------------------------------------------------------------- the oracle
def unstable_records(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Records whose two clean oracle runs disagree (result or effects)."""
    return sorted(rid for rid in a["records"]
                  if canonical(a["records"][rid]) != canonical(b["records"].get(rid)))


def check_determinism(a: dict[str, Any], b: dict[str, Any], unstable: list[str]) -> list[Failure]:
    if not unstable:
        return []
    rid = unstable[0]
    one, other = a["records"][rid], b["records"].get(rid) or {}
    # Show the part that differs: the result if it does, else the effects (or the error).
    part = next((k for k in ("result", "error", "effects") if canonical(one.get(k)) != canonical(other.get(k))),
                "result")
    return [failure("nondeterministic_job",
                    f"job.py is not a pure function of its record: {len(unstable)} of {len(a['records'])} records "
                    f"gave different answers in two clean runs ({a['order']} vs {b['order']}, clock moved), "
                    f"e.g. record {rid}: {part} {show(one.get(part))} vs {show(other.get(part))}; keep no state "
                    "across records and read no clock or random numbers in process_record")]


def check_results(stored: list[tuple[str, Any]] | None, oracle: dict[str, Any], skip: set[str],
                  unknown: set[str] | frozenset[str] = frozenset()) -> list[Failure]:
    """Every record's stored result equals job.py's, recomputed by the oracle.

    ``skip``: records whose two oracle runs disagree (nondeterministic_job says so);
    they have no single right answer to compare with. ``unknown``: records with a call in
    doubt (plain, at most once): the service's answer never came, so a result that keeps it
    cannot equal the oracle's; `reconcile` lists them for a person.
    """
    if stored is None:
        return []  # the strategy keeps no per-record results (final state and payloads are checked)
    by_record: dict[str, list[Any]] = {}
    for rid, result in stored:
        by_record.setdefault(rid, []).append(result)
    wanted = {rid: r["result"] for rid, r in oracle["records"].items() if "result" in r}
    found: list[Failure] = []
    missing = sorted(wanted.keys() - by_record.keys())
    if missing:
        found.append(failure("results", f"{len(missing)} of {len(wanted)} records have no stored result, "
                                        f"e.g. record {missing[0]}"))
    extra = sorted(by_record.keys() - oracle["records"].keys())
    if extra:
        found.append(failure("results", f"{len(extra)} stored results belong to no input record, e.g. {extra[0]}"))
    twice = sorted(rid for rid, rows in by_record.items() if len(rows) > 1)
    if twice:
        found.append(failure("results", f"{len(twice)} records have their result stored more than once, "
                                        f"e.g. record {twice[0]} ({len(by_record[twice[0]])} rows)"))
    wrong = sorted(rid for rid in wanted.keys() & by_record.keys() - skip - unknown
                   if any(canonical(r) != canonical(wanted[rid]) for r in by_record[rid]))
    if wrong:
        rid = wrong[0]
        found.append(failure("results", f"{len(wrong)} stored results differ from job.py's, recomputed in a clean "
                                        f"process, e.g. record {rid}: stored {show(by_record[rid][0])}, job.py gives "
                                        f"{show(wanted[rid])} ("
                                        + ("job.py is not deterministic, see nondeterministic_job" if skip else
                                           "a strategy that stored a wrong or stale result, or a job.py that "
                                           "depends on more than its record")
                                        + ")"))
    return found


def check_final_states(states: list[dict[str, Any]] | None, oracle: dict[str, Any], skip: set[str],
                       fold: Callable[[dict[str, Any], Any], dict[str, Any]]) -> list[Failure]:
    """Each task's saved running state equals job.fold over job.py's results of its input, in order."""
    if states is None:
        return []  # one record per task: no running state to compare
    position = {rid: i for i, rid in enumerate(oracle["records_in_order"])}
    covered = Counter(rid for task in states for rid in task["record_ids"])
    found: list[Failure] = []
    if covered.keys() != position.keys() or any(n > 1 for n in covered.values()):
        odd = sorted((covered.keys() ^ position.keys()) | {rid for rid, n in covered.items() if n > 1})
        found.append(failure("final_state", f"the tasks' inputs do not cover the submitted records exactly once, "
                                            f"e.g. record {odd[0] if odd else '?'}"))
    wrong: list[str] = []
    first_message = ""
    for task in states:
        ids = task["record_ids"]
        if any(rid not in position for rid in ids) or ids != sorted(ids, key=position.__getitem__):
            found.append(failure("final_state", f"task {task['task_id']}'s input is not in submission order"))
            continue
        results = [oracle["records"][rid] for rid in ids]
        if skip.intersection(ids) or any("result" not in r for r in results):
            continue  # an unstable or failing record: no single right answer to fold
        expected = functools.reduce(fold, [r["result"] for r in results], json.loads(canonical(oracle["initial_state"])))
        if canonical(task["state"]) != canonical(expected):
            wrong.append(task["task_id"])
            if not first_message:
                first_message = (f"task {task['task_id']} saved the running state {show(task['state'])}, but "
                                 f"job.fold over job.py's results of its {len(ids)} records gives {show(expected)}")
    if wrong:
        found.append(failure("final_state", f"{len(wrong)} of {len(states)} tasks saved a wrong running state: "
                                            f"{first_message}"))
    return found


def check_payloads(applied: list[tuple[str, str, Any]], oracle: dict[str, Any], skip: set[str]) -> list[Failure]:
    """EVERY applied effect of a (record, step) carries a payload job.py asks for in that step
    (not only the first: a re-send or a second call must carry it too)."""
    wrong: list[tuple[str, str, Any, Any]] = []
    asked_by_record: dict[str, dict[str, list[str]]] = {}
    for rid, step, payload in applied:
        if rid in skip or rid not in oracle["records"]:
            continue
        if rid not in asked_by_record:
            asked_by_record[rid] = {}
            for s, p in oracle["records"][rid].get("effects", []):
                asked_by_record[rid].setdefault(s, []).append(canonical(p))
        asked = asked_by_record[rid].get(step)
        if asked is not None and canonical(payload) not in asked:
            wrong.append((rid, step, payload, json.loads(asked[0])))
    if not wrong:
        return []
    rid, step, payload, want = sorted(wrong, key=lambda w: (w[0], w[1]))[0]
    return [failure("effect_payloads", f"{len(wrong)} applied effects carry another payload than job.py asks for, "
                                       f"e.g. record {rid} {_step(step)}: applied {show(payload)}, job.py asks for "
                                       f"{show(want)}")]


# --------------------------------------------------------------- the run itself
def check_run(report: dict[str, Any], *, promise: int, redone_example: str | None,
              failed_task: dict[str, Any] | None, log_path: str, resent: int | None = None,
              redone_by_worker: dict[int, int] | None = None,
              outages_by_worker: dict[int, int] | None = None,
              takeovers_by_worker: dict[int, int] | None = None) -> list[Failure]:
    """``resent`` (plain, at least once): the re-sends of calls in doubt, which bound the
    redone calls besides ``promise`` per kill (a job that counts every call it repeats as
    "in doubt" still may not repeat more than the unit in flight per kill).
    ``redone_by_worker`` (one worker at a time: each process follows one kill, or starts the
    run): the redone calls by the process that sent them, each held to ``promise`` for the kill
    before it and for each store outage it rode out itself (``outages_by_worker``, by pid; a
    process that left no account gets the run's), so a restart that goes back further than its
    last recovery point is not hidden by kills that cost nothing (a kill just after a commit).
    With workers side by side (scale-out) a process may also take over the unit of another
    worker that was stopped: each one it did counts too (``takeovers_by_worker``, history.py)."""
    found: list[Failure] = []
    if report["incomplete_records"]:
        why = f"; task {failed_task['task_id']} failed: {failed_task['error']}" if failed_task else ""
        found.append(failure("incomplete", f"{report['incomplete_records']} of {report['records']} records were "
                                           f"not done when the workers stopped{why}"))
    if report["kills_landed"] < report["kills_requested"]:
        missed = report.get("windows_not_reached") or []
        where = (f"; aimed at {', '.join(missed)}, which the worker did not pass often enough before it finished"
                 if missed else "")
        found.append(failure("kills_not_delivered", f"only {report['kills_landed']} of {report['kills_requested']} "
                                                    "kills landed (the run ended first, or the worker had already "
                                                    f"exited){where}; use more --records or a larger --work-ms"))
    # A lost host's units in flight (one per worker it ran) are redone by whichever worker takes them
    # over once their lease ran out.
    lost = int(report.get("workers_lost", (report.get("faults") or {}).get("host-lost", {}).get("injected", 0)))
    restarts = report["kills_landed"] + report.get("store_outages_ridden", 0) + lost + report.get("hung_taken", 0)
    allowed = promise * restarts if resent is None else min(promise * restarts, resent)
    e_g = f", e.g. key {redone_example}" if redone_example else ""
    if report["redone_calls"] > allowed:
        ridden = (f" and {report['store_outages_ridden']} store outage(s) ridden out"
                  if report.get("store_outages_ridden") else "")
        unit = (f"the {report['strategy']} strategy promises at most {promise} per kill or outage"
                + (" (a call in doubt is looked up or held, not re-sent)" if not promise else ""))
        if resent is not None and report["redone_calls"] > resent:
            unit = f"only the {resent} calls re-sent in doubt may be"
        elif resent is not None:  # counted in doubt, yet more than one unit per kill: progress went back
            unit += (" (the calls of the unit in flight; more means a restart began before its last"
                     " recovery point)")
        found.append(failure("redone_calls", f"{report['redone_calls']} calls were sent again after "
                                             f"{report['kills_landed']} kills{ridden}{e_g}; {unit}"))
    elif promise and redone_by_worker:
        # One worker process follows one kill (or starts the run); a store outage it rides out
        # restarts its unit in flight too, and so does taking over a lost host's (host-lost: whichever
        # worker finds its lease run out).
        outages, takeovers = outages_by_worker or {}, takeovers_by_worker or {}

        def allowed_for(pid: int) -> int:
            return promise * (1 + outages.get(pid, report.get("store_outages_ridden", 0)) + lost
                              + takeovers.get(pid, 0))

        pid, most = max(redone_by_worker.items(), key=lambda item: item[1] - allowed_for(item[0]))
        per_process = allowed_for(pid)
        if most > per_process:
            found.append(failure("redone_calls", f"the worker with pid {pid} sent {most} calls again after one "
                                                 f"kill (all {report['kills_landed']} kills: "
                                                 f"{report['redone_calls']}){e_g}; the "
                                                 f"{report['strategy']} strategy promises at most {per_process} "
                                                 "per kill or outage: the unit in flight (more means a restart "
                                                 "began before its last recovery point)"))
    for code in report["worker_failures"]:
        found.append(failure("worker_failures", f"a worker exited with code {code} (see {log_path})"))
    for n, g in enumerate(report["graceful_exits"], 1):
        if g.get("finished_first"):  # its run had returned 0 before the signal: nothing left to stop
            continue
        if g["exit_code"] != 0 or not g["within_grace"]:
            found.append(failure("graceful_exit", f"after {report['signal']} #{n} the worker exited with code "
                                                  f"{g['exit_code']} after {g['exit_s']} s (grace period: exit 0 "
                                                  "within it)"))
    return found


def check_durability(observed: dict[str, Any]) -> list[Failure]:
    """``observed`` is the report's ``durability``: what the workers really ran with."""
    store = observed["state_store"]
    found: list[Failure] = []
    if store == "files":
        for message in observed["violations"]:
            found.append(failure("durability", f"a state file was not made durable: {message}"))
        if not observed["violations"] and not observed["synced_renames"]:
            found.append(failure("durability", "no worker was seen to complete a checkpoint write "
                                               "(write, fsync, rename, directory fsync)"))
        return found
    seen = observed["settings"]
    if not seen:
        found.append(failure("durability", f"no worker reported the settings of its {store} state store"))
    problems = sorted({p for s in seen for p in durability_module.problems(s)})
    for problem in problems:
        found.append(failure("durability", f"the state store ran with {problem}"))
    return found


def summary_line(failures: list[Failure], calls: dict[str, Any] | None = None) -> list[str]:
    """``calls``: the report's effect kind, policy and calls in doubt (what was promised)."""
    if not failures:
        policy = (calls or {}).get("plain_policy")
        rest = "results and final state match job.py, durability settings observed"
        if policy == "at-most-once":
            return [f"OK (plain call, at most once): 0 duplicates; {calls['in_doubt']} call(s) in doubt listed "  # type: ignore[index]
                    f"by `reconcile`; {rest}"]
        if policy == "at-least-once":
            return [f"OK (plain call, at least once): nothing lost; {calls['duplicate_effects']} duplicate(s), "  # type: ignore[index]
                    f"within the {calls['possible_duplicates']} re-send(s) of {calls['in_doubt']} call(s) in doubt; "  # type: ignore[index]
                    f"{rest}"]
        return [f"OK: nothing lost, nothing applied twice, {rest}"]
    order = {check: i for i, check in enumerate(CHECKS)}
    return [f"FAILED: {f['check']}: {f['message']}" for f in sorted(failures, key=lambda f: order[f["check"]])]
