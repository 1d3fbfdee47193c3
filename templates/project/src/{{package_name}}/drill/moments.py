"""Where some of a schedule's kills land, and what a few of them do besides (schedule.py draws
them, each with a generator of its own so that the other events of a seed stay as they were):
kills of a successor still recovering, a SIGTERM just after the service refused a call, one just
after a store outage, the kills that damage the newest generation of a checkpoint, and the kills
workers give themselves at their first writes and calls.
"""

from __future__ import annotations

import random
from typing import Any

#: Calls a service fault refuses or times out: below every strategy's retry budget (schedule.py).
SERVICE_CALLS = (1, 3)
#: The refusals of a run's last service-fail burst (long_burst): past every call's quick retries.
LONG_BURST = 12

#: Of a default drill's timed kills, one in this many (at least one from 3 kills on, two from 5) follows
#: a SIGKILL and lands while its successor recovers (moment "recovering"); one kill at least is left
#: for the stop after a refusal (after_refusal). Drawn with a random generator of its own: the other
#: events of a seed stay as they were.
RECOVERING_EVERY = 3
#: With SIGTERMs and service refusals in a run, one SIGTERM lands just after the first burst of
#: refusals (moment "after-refusal"), while the refused worker waits to retry. Drawn with a
#: generator of its own, like RECOVERING_EVERY.
REFUSAL_STOPS = 1
#: With SIGTERMs and a store outage in a run, one SIGTERM lands just after the outage, once work
#: moved again, on a worker that rode it out (moment "after-outage"): a deploy just after a database
#: failover. Its run started again in the same process when the store came back; stopping now, it
#: must hold nothing, also what the run the outage ended held. Drawn with a generator of its own.
#: One kill in OWN_KILL_EVERY (at most 3; from 2 kills; SIGKILLs allowed, neither --sigterm nor --aim) is
#: one the worker gives itself, exactly where a kill timed from outside rarely lands. Armed kills go to
#: the workers in the order they start, so each lands on the successor of the one before: the first
#: just before the worker's N-th write of its durable state (``state:N``, N drawn in STATE_POINT),
#: wherever the code writes (a batch recorded in two transactions where one was meant is cut between
#: them); with three, the second just before the successor's M-th call goes out (``call:M``, M in
#: UNSENT_CALL: a call whose intent is recorded and which never went out); the last just before the
#: next successor's first call (FIRST_CALL), most often its recovery's re-send of what the one before
#: left in doubt: a re-send cut short must leave the call in doubt, never settled. N is small: the
#: armed worker dies within its first batches, never holding up the timed events that wait for an
#: unarmed worker. Drawn with a generator of their own. After the chain every other write in STATE_POINT
#: is cut once too, each by the next successor (these kills are added to --kills): the second of a
#: unit's two writes is then cut wherever it falls among the first ones, not only when the draw hits it.
OWN_KILL_EVERY = 4
#: With damaged-checkpoint the chain starts at the successor of the first kill that damaged the newest
#: generation, just before its AFTER_DAMAGE-th write (``state:N``): its first save after falling back is
#: then cut before its last write, whichever way the design makes it (the damaged generation set aside,
#: then the new one renamed into place; or the damaged one rotated out, then the new one renamed in).
AFTER_DAMAGE = 2
STATE_POINT = (2, 6)
#: The kills that come on top of --kills with the chain: every write of STATE_POINT but the chain's own.
WRITES_CUT = STATE_POINT[1] - STATE_POINT[0]
FIRST_CALL = "call:1"
#: How a damaged-checkpoint kill leaves the newest generation: cut short, as a torn write leaves
#: a file, or its recorded offset changed, as a rotten sector could (its checksum no longer holds).
DAMAGE = ("torn", "rot")


def in_recovery(kills: list[dict[str, Any]], rng: random.Random, usable: list[str]) -> None:
    """Turn some timed kills into kills of a recovering successor: each chosen one moves to just
    after a SIGKILL (its ``at``), where the runner lets it land before that restart recovers;
    ``usable``: the kill kinds the run may use."""
    timed = sorted((e for e in kills if "at" in e), key=lambda e: e["at"])
    wanted = max(2 if len(timed) >= 5 else 1, len(timed) // RECOVERING_EVERY) if len(timed) >= 3 else 0
    # Each chosen SIGKILL is followed by the kill nearest it in time, moved to just after it; a
    # predecessor is never a recovering kill itself, nor followed twice.
    chosen: list[tuple[int, int]] = []
    used: set[int] = set()
    for before in rng.sample(range(len(timed)), len(timed)):
        if len(chosen) == wanted:
            break
        movers = [m for m in range(len(timed)) if m not in used and m != before]
        if before in used or timed[before]["kind"] != "sigkill" or not movers:
            continue
        mover = min(movers, key=lambda m: (abs(m - before), m))
        used |= {before, mover}
        chosen.append((before, mover))
    # SIGTERM and SIGKILL in turn, from a drawn first: a deploy landing on a worker still
    # recovering from a crash, and a second crash before the first was recovered from.
    turns = ["sigterm", "sigkill"] if rng.random() < 0.5 else ["sigkill", "sigterm"]
    turns = [kind for kind in turns if kind in usable] or ["sigkill"]
    for k, (before, mover) in enumerate(sorted(chosen)):
        event, crash = timed[mover], timed[before]
        # The crash before it lands just after a call got through, before the commit that records
        # it: the successor has calls in doubt to recover, not only a clean batch boundary.
        crash["moment"] = "after-effect"
        event["at"] = round(crash["at"] + 0.0001, 4)
        event["kind"] = turns[k % len(turns)]
        event["moment"] = "recovering"
        event["delay_ms"] = round(rng.uniform(0, 5), 2)  # early in the recovery: its first batch


def faults_a_call_rides_out(strategy: Any) -> int | None:
    """A design that gives up after N attempts at one call (its ``CALL_ATTEMPTS``) rides out N - 1
    faults in a row there; None: it retries until the call goes through."""
    gives_up = getattr(strategy, "CALL_ATTEMPTS", None)
    return gives_up - 1 if gives_up else None


def long_burst(events: list[dict[str, Any]], strategy: Any) -> None:
    """Of two or more service-fail bursts, the run's last one and the one a stop follows (after_refusal)
    made LONG_BURST refusals: more than a call's quick retries, so what the job does then (a batch
    paused, a page cut short, a task handed back) must carry the call to the end, and the stop finds
    the worker still waiting to retry (its waits grow); one fewer than a design that fails the unit
    after N attempts (``CALL_ATTEMPTS``, a strategy's) gives it, whose failing is its promise."""
    fails = sorted((e for e in events if e["kind"] == "service-fail"), key=lambda e: e["at"])
    if len(fails) < 2:
        return
    spare = faults_a_call_rides_out(strategy)
    calls = LONG_BURST if spare is None else max(SERVICE_CALLS[1], min(LONG_BURST, spare))
    stopped = {round(e["at"] - 0.0001, 4) for e in events if e.get("moment") == "after-refusal"}
    for fail in fails:
        if fail is fails[-1] or fail["at"] in stopped:
            fail["calls"] = calls


def free_stops(events: list[dict[str, Any]], usable: list[str]) -> list[dict[str, Any]]:
    """The timed SIGTERMs no moment was given yet; with none, one free SIGKILL (neither a recovery's
    kill nor the crash one follows, nor damaging) made a SIGTERM, if SIGTERMs are drilled."""
    stops = [e for e in events if e["kind"] == "sigterm" and "at" in e and "moment" not in e]
    if not stops and "sigterm" in usable:  # every SIGTERM went somewhere: a free SIGKILL becomes one
        followed = {round(e["at"] - 0.0001, 4) for e in events if e.get("moment") == "recovering"}
        stops = [e for e in events if e["kind"] == "sigkill" and "at" in e and not e.get("damage")
                 and e.get("moment") != "recovering" and e["at"] not in followed][:1]
        for event in stops:
            event["kind"] = "sigterm"
            event.pop("delay_ms", None)
            event.pop("moment", None)
    return stops


def after_outage(events: list[dict[str, Any]], rng: random.Random, usable: list[str]) -> None:
    """Move one timed SIGTERM to just after the first store outage, moment "after-outage"."""
    outages = sorted((e for e in events if e["kind"] == "store-outage"), key=lambda e: e["at"])
    stops = free_stops(events, usable) if outages else []
    if stops:
        event = rng.choice(stops)
        event["at"], event["moment"] = round(outages[0]["at"] + 0.0001, 4), "after-outage"


def after_refusal(events: list[dict[str, Any]], rng: random.Random, usable: list[str]) -> None:
    """Move REFUSAL_STOPS timed SIGTERMs (none aimed at a recovery) to just after the first
    service-fail burst, moment "after-refusal"."""
    fails = sorted((e for e in events if e["kind"] == "service-fail"), key=lambda e: e["at"])
    if not fails:
        return
    stops = free_stops(events, usable)
    if not stops:
        return
    # The longest burst (long_burst lengthens it further), its first refusal held until the stop was
    # sent (runtime/external.py): the stop meets the refused worker however late the drill sees it.
    fails[0]["calls"], fails[0]["hold"] = SERVICE_CALLS[1], True
    for event in rng.sample(stops, min(REFUSAL_STOPS, len(stops))):
        event["at"] = round(fails[0]["at"] + 0.0001, 4)
        event["moment"] = "after-refusal"


def damage_some(events: list[dict[str, Any]], rng: random.Random) -> bool:
    """Timed SIGKILLs (none that lands in a recovery) that also damage the newest generation of the
    checkpoint once the worker is dead, one of each DAMAGE while there are kills to carry them (a torn
    file tests the fallback, a rotten one the checksum); each lands just after a call went out,
    before the commit that records it, so the damaged generation is one whose calls were sent.
    False: none to pick."""
    kills = [e for e in events if e["kind"] == "sigkill" and "at" in e and e.get("moment") != "recovering"]
    for event, how in zip(rng.sample(kills, len(kills)), rng.sample(DAMAGE, len(DAMAGE))):
        event["moment"], event["damage"] = "after-effect", how
    return bool(kills)


def own_chain(own_kills: int, final: list[dict[str, Any]], usable: list[str], drawn: random.Random,
              unsent_call: tuple[int, int], *, cut_writes: bool = True) -> list[dict[str, Any]]:
    """The kills workers give themselves (OWN_KILL_EVERY), in the order the workers that take them start:
    the chain, then (``cut_writes``) the rest of STATE_POINT's writes, WRITES_CUT more. ``final``: the
    reconcile fault's call that never goes out, if any, taken from it when it completes a chain of two."""
    # Each armed kill goes to the successor of the one before: before a write; before a call (from 3);
    # before the first call of the next successor, its re-send of that call (from 2).
    chain = [f"state:{drawn.randint(*STATE_POINT)}", f"call:{drawn.randint(*unsent_call)}", FIRST_CALL]
    own = [{"kind": "sigkill", "crash_point": point}
           for point in {0: [], 1: chain[:1], 2: [chain[0], chain[2]], 3: chain}[own_kills]]
    if own_kills == 2 and len(final) == 2:  # the call that never went out takes the chain's missing link: the
        own.insert(1, final.pop())         # next successor's first call is then its re-send (at least once)
    if not own:
        return own
    damaged = "damaged-checkpoint" in usable
    if damaged:  # the chain starts with the worker recovering from the damage, at its first save:
        own[0]["crash_point"] = f"state:{AFTER_DAMAGE}"  # what the recovery leaves must survive a second crash
    own += [{"kind": "sigkill", "crash_point": f"state:{n}"} for n in range(STATE_POINT[0], STATE_POINT[1] + 1)
            if cut_writes and f"state:{n}" != own[0]["crash_point"]]
    return [dict(e, after="damage") for e in own] if damaged else own
