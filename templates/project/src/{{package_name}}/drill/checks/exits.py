"""A worker that stopped left nothing behind (checks ``held_after_exit``, ``in_doubt_after_exit``,
``resent_after_exit``, ``acked_uncommitted``).

A SIGKILL may leave a call in doubt, a claim to take over, a call to send again: that is what
recovery is for. A worker that stopped cleanly (its run returned 0: SIGTERM handled, or the
work done) is held to a higher bar: it released what it held, made no call whose outcome it
did not record, so nobody must look a call of its up or send one again. The checks read two
histories, never the fault schedule:

* ``workers``: one entry per drilled process, from its own account (drill/witness.py):
  ``{"pid", "owner", "ended": {"signal", "code", "held": [{"what", "owner"}]} or None,
  "outages", "acks", "acked_uncommitted", "acked_uncommitted_n"}``; ``ended`` is None for
  a process that never finished its run (SIGKILL);
* ``calls``: the external service's log, in order (external.db's ``calls``):
  ``(identity, kind, outcome, pid, at)``, identity = the idempotency key, or ``record/step``
  for a plain call (which has none);
* ``in_doubt``: plain calls held in doubt (at most once): ``(record_id, step, doubt_at)``.

A call is attributed to the process that last sent it and got through (``applied`` or
``duplicate``). Sending it again, looking it up or holding it in doubt AFTER that process's
run ended is fine when the process was killed, rode out a store outage, or lost the call's
answer (any outcome but applied, duplicate or ``failed`` = refused before it was applied);
after a clean stop it is a failure. Two live workers calling at once (a resubmitted record)
is not an exit's doing: ``duplicate_effects`` and ``redone_calls`` speak of that.
"""

from __future__ import annotations

from typing import Any

from ..verdict import Failure, failure

Call = tuple[str, str, str, int, float]  # identity, kind, outcome, pid, at

#: Outcomes of an apply that got through and whose answer came back.
SENT = ("applied", "duplicate")
#: Refused before anything was applied: not a send at all (the strategy retries it).
REFUSED = ("failed",)


def clean_stop(worker: dict[str, Any] | None) -> bool:
    """Stopped by itself with exit 0 (gracefully or done), without a store outage in between."""
    return bool(worker and worker.get("ended") and worker["ended"].get("code") == 0 and not worker.get("outages"))


def how(worker: dict[str, Any]) -> str:
    signal = worker["ended"].get("signal")
    if not worker.get("outages"):
        return f"after {signal}" if signal else "after finishing its work"
    if signal:
        return (f"after {signal} (it had ridden out a store outage and called the service since: back at work, "
                "it never took back what the interrupted run held)")
    return ("after finishing its work (it had ridden out a store outage; the run that started again ended "
            "without taking back what the interrupted run held)")


def back_at_work(worker: dict[str, Any], calls: list[Call]) -> bool:
    """No store outage, or the run started again after it has called the service since: it took
    work, and what the run the outage ended held (same owner, another instance) comes first, or
    nobody takes it while the process lives (it looks held by a live worker). One stopped before
    it took work is excused: the store may not even have answered it again."""
    if not worker.get("outages"):
        return True
    since = float(worker.get("last_outage_at") or 0.0)
    return any(pid == worker["pid"] and at > since for _, _, _, pid, at in calls)


def check_held(workers: list[dict[str, Any]], calls: list[Call]) -> list[Failure]:
    """A run that returned 0 holds nothing, also after riding out a store outage: once back at work
    (back_at_work) if it was asked to stop, always if it ended on its own (its work was done)."""
    holding = [w for w in workers if w.get("ended") and w["ended"].get("code") == 0
               and (not w["ended"].get("signal") or back_at_work(w, calls))
               and isinstance(w["ended"].get("held"), list) and w["ended"]["held"]]
    if not holding:
        return []
    w = holding[0]
    held = w["ended"]["held"]
    return [failure("held_after_exit", (
        f"{len(holding)} worker(s) exited 0 still holding claims, e.g. {how(w)} worker {w['pid']} still held "
        f"{held[0]['what']}" + (f" and {len(held) - 1} more" if len(held) > 1 else "") + f" under owner {w['owner']}; "
        "a stopping worker must release what it holds (on another host its successor waits out the lease)"))]


def attribute(calls: list[Call]) -> tuple[list[tuple[str, int, int, float]], list[tuple[str, int, int, float]]]:
    """``(re-sends, lookups)``: each as (identity, earlier sender's pid, this caller's pid, when),
    for calls whose earlier send got through with its answer and was made by another process."""
    last: dict[str, int] = {}  # identity -> pid of its last send that got through
    lost: set[str] = set()     # identities whose answer was lost once: any later call is explained
    resent: list[tuple[str, int, int, float]] = []
    looked: list[tuple[str, int, int, float]] = []
    for identity, kind, outcome, pid, at in calls:
        if kind == "lookup":
            if outcome == "found" and identity in last and identity not in lost and last[identity] != pid:
                looked.append((identity, last[identity], pid, at))
            continue
        if outcome in REFUSED:
            continue
        if outcome not in SENT:
            lost.add(identity)
            continue
        if identity in last and identity not in lost and last[identity] != pid:
            resent.append((identity, last[identity], pid, at))
        last[identity] = pid
    return resent, looked


def after_clean_stop(worker: dict[str, Any] | None, at: float) -> bool:
    """Did ``worker`` stop cleanly, and before ``at``?"""
    return worker is not None and clean_stop(worker) and at > float(worker["ended"].get("at", 0.0))


def check_after_exit(workers: list[dict[str, Any]], calls: list[Call],
                     in_doubt: list[tuple[str, str, float]]) -> list[Failure]:
    """Calls of a cleanly stopped worker sent again, looked up, or held in doubt after it stopped."""
    by_pid = {w["pid"]: w for w in workers}
    resent, looked = attribute(calls)
    found: list[Failure] = []
    bad = [(i, p, q) for i, p, q, at in resent if after_clean_stop(by_pid.get(p), at)]
    if bad:
        identity, p, q = bad[0]
        found.append(failure("resent_after_exit", (
            f"{len(bad)} call(s) were sent again after the worker that sent them had stopped cleanly, e.g. "
            f"{identity}: sent by worker {p}, which exited 0 {how(by_pid[p])}, then again by worker {q}; a "
            "stopping worker must record the outcome of every call it made before it exits")))
    doubted = [(i, p) for i, p, _, at in looked if after_clean_stop(by_pid.get(p), at)]
    senders = _first_senders(calls)
    for rid, step, at in in_doubt:
        sender = senders.get(f"{rid}/{step}")
        if sender is not None and after_clean_stop(by_pid.get(sender), at):
            doubted.append((f"{rid}/{step}", sender))
    if doubted:
        identity, p = doubted[0]
        found.append(failure("in_doubt_after_exit", (
            f"{len(doubted)} call(s) made by a worker that stopped cleanly were left in doubt (looked up or held "
            f"for `reconcile` by another), e.g. {identity}, sent by worker {p}, which exited 0 {how(by_pid[p])}; "
            "a graceful stop records each call's outcome (its final checkpoint) before it exits")))
    return found


def check_acks(workers: list[dict[str, Any]]) -> list[Failure]:
    bad = [w for w in workers if w.get("acked_uncommitted_n")]
    if not bad:
        return []
    n = sum(w["acked_uncommitted_n"] for w in bad)
    example = next((w["acked_uncommitted"][0] for w in bad if w["acked_uncommitted"]), "?")
    return [failure("acked_uncommitted", (
        f"{n} message(s) were acked before their work was committed to the state store, e.g. correlation id "
        f"{example} (its submission was not there when the ack left): a kill right after such an ack loses the "
        "message; ack only after the commit that stores its work"))]


def _first_senders(calls: list[Call]) -> dict[str, int]:
    senders: dict[str, int] = {}
    for identity, kind, outcome, pid, _at in calls:
        if kind == "apply" and outcome in SENT:
            senders.setdefault(identity, pid)
    return senders
