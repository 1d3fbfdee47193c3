"""The drill's fault schedule (the nemesis's plan): drawn from the seed, printed, replayable.

A schedule is data: the drill's options and a list of fault events. ``plan()`` draws one
from ``--seed`` and the options; the runner (runner.py) executes it, records what
happened in the history (history.py), and the checks read the history, never this
plan. ``drill --replay FILE`` reads a schedule back and runs exactly those events
again; shrink.py makes smaller ones from a failing schedule. The file format::

    {"format": 1, "strategy": "checkpoint", "seed": 1, "records": 2000, "workers": 1,
     "hosts": 1, "work_ms": 0.5, "fail_rate": null, "kills": 10,
     "kinds": ["sigkill", "sigterm", ...],           # the kinds this run may use
     "skipped": {"store-outage": "why not here"},      # kinds asked for but not applicable
     "events": [EVENT, ...]}

Every EVENT has ``n`` (1, 2, ... in schedule order) and ``kind`` (a key of KINDS). A
TIMED event also has ``at``: the fraction of the expected effects applied when it is
injected (0 < at < 1). An ARMED event (a SIGKILL the worker gives itself) has no
``at``: the next worker started is armed with it, and it lands when that worker passes
the point; ``window``+``pass`` (``--aim``: die the pass-th time WINDOW is passed) or
``point`` (``--sweep``: die at the point-th persistence point, runtime/faults.py) or
``crash_point`` (``call:N``: die just before the worker's N-th external call goes out;
``state:N``: just before its N-th write of the durable state, runtime/faults.py).
The other fields of each kind are listed in fault_kinds.py.

``slot`` picks the victim among the workers alive at that moment (``slot % alive``).
An ``after-refusal`` SIGTERM follows a ``service-fail``: it lands on the worker whose call the
service has just refused, while that worker waits to retry (a deploy during an outage of the
service): it must hand its work back, not fail it, and exit 0 in time.
A ``recovering`` kill follows a SIGKILL: it lands on the worker started in the killed one's
place while that worker recovers (once it is ready and the service sees calls again), so
the recovery itself is crashed, or asked to stop, before it is done (a deploy landing on a
crash loop): its own intents, lookups and releases must be as safe as the work's.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..runtime.errors import JobError
from ..runtime.store import is_postgresql
# The kinds and whether each applies here live in fault_kinds.py; schedule.KINDS etc. stay the names to use.
from .bad_input import FILE_FLAWS
from .event_words import describe  # noqa: F401  (schedule.describe: one event in words)
from .fault_kinds import DEFAULT_KINDS, FINAL_KINDS, KINDS, SETUP_KINDS, newest_fixture, not_applicable  # noqa: F401
# Where some kills land (a recovery, a refusal) and which damage a checkpoint: moments.py.
from .moments import (AFTER_DAMAGE, DAMAGE, FIRST_CALL, OWN_KILL_EVERY, SERVICE_CALLS, STATE_POINT,  # noqa: F401
                      WRITES_CUT, after_outage, after_refusal, damage_some, in_recovery, long_burst, own_chain)

FORMAT = 1

#: How many events of each non-kill kind a default schedule holds (kills: --kills).
PER_RUN = {"other-host": 1, "host-lost": 1, "service-fail": 2, "service-timeout": 2, "resubmit-same": 1, "resubmit-new": 1,
           "store-outage": 1, "key-reuse": 1, "redelivery": 1, "submit-crash": 1, "new-input": 1, "scale-out": 1}
#: How the drill's operator answers the calls in doubt (reconciler.py): one by one, or from an export.
RECONCILE_HOW = ("each", "export")
#: Where the operator's runs die at their first call, the re-send of a call answered "not applied"
#: (reconciler.py), in this order: just before it goes out, then just after it returned.
RESEND_KILL = ("before", "after")
#: With ``reconcile`` in a run with kills (not --sigterm, not --aim), one of the kills is a SIGKILL
#: armed just before a worker's N-th external call goes out (N drawn in this range): a call in doubt
#: that truly never arrived, so the person's answers hold a "not applied" one, whose re-send the
#: operator's run then crashes.
UNSENT_CALL = (2, 30)
#: A default drill's kills: this fraction of them SIGTERM (graceful), the rest SIGKILL.
SIGTERM_SHARE = 0.3
#: Timed events land between these fractions of the expected effects.
EARLIEST, LATEST = 0.05, 0.9
#: A successor on another host comes first, before any kill (see _timed).
OTHER_HOST_AT = (0.02, 0.045)
#: Records a resubmission carries (a fraction of the input, at least 1).
RESUBMIT_SHARE = 0.05
#: An aimed kill lands the N-th time the worker passes its window, N in 1..AIM_SPREAD.
AIM_SPREAD = 3
MOMENTS = ("anywhere", "after-effect", "after-commit")
#: With kills and ``resubmit-new`` in a run, one more resubmission lands soon after the last
#: timed kill or store outage (this span of the expected effects later, and by LATE_RESUBMIT_BY),
#: carrying the records done last: a client retrying what it has just sent, answered by the very
#: worker that did it. A dedupe that only knows what was done before the worker started (a cache
#: loaded at start, or when the store came back) lets it through; a resubmission answered after
#: a restart or an outage never shows that. It waits for a worker alive (the nemesis): due after
#: the work ran out, it lands in the run the drill extends the work with. Drawn with a generator
#: of its own, like RECOVERING_EVERY.
LATE_RESUBMIT_AFTER = (0.02, 0.05)
#: New work arriving while the workers run lands between these fractions of the expected effects.
NEW_INPUT_AT = (0.15, 0.6)
LATE_RESUBMIT_BY = 0.97
#: The slow stretch of the service (service-slow) starts between these fractions of the expected
#: effects and lasts SLOW_FOR_S, every call answered SLOW_LATE_MS late: long enough for the claims
#: watch (claims_watch.py) to see units mid-flight several times over (an order's next step, a
#: batch's next offset), short enough to cost a drill about that many seconds.
SLOW_AT = (0.1, 0.6)
SLOW_FOR_S = 2.0
SLOW_LATE_MS = 250
#: Where records are deduplicated by their business key (RESUBMITTED_RECORD "deduped") and two
#: workers share the work, the records not done yet are resubmitted under a new correlation id,
#: the last queued first (between these fractions of the expected effects): the input's last task
#: and its second one are then next to each other in the queue, taken by two workers at once
#: unless the claim keeps a task waiting while another of its business key runs.
PENDING_RESUBMIT_AT = (0.75, 0.88)
#: Where a record the store holds is refused, records queued and not done yet come again early (between
#: these fractions): the input's last units are then surely still queued (a design that records its
#: units as done well before their effects go out finishes them early in the run).
QUEUED_RESUBMIT_AT = (0.1, 0.3)
#: PostgreSQL: a store outage is held until no effect was applied for this long (the workers see it at
#: once: their connections are cut, store_away.py).
PG_OUTAGE_HOLD_S = 2.0
#: Malformed input (bad_input.py) arrives between these fractions of the expected effects.
MALFORMED_AT = (0.1, 0.7)
#: A queue's consumers also meet a store outage with nothing in hand: once every record so far is done
#: (the consumers wait for messages), the store goes away and new messages arrive while it is away. A
#: consumer must leave them on the queue (unacked, or requeued) until the store is back; one that takes
#: the store's refusal for the message's fault dead-letters good work. Mid-run, a consumer meets an
#: outage inside its work pass and takes no message before the store is back: it never sees this.
IDLE_OUTAGE_AT = 0.99


@dataclass
class Schedule:
    strategy: str
    seed: int
    records: int
    workers: int = 1
    hosts: int = 1
    work_ms: float = 0.5
    fail_rate: float | None = None
    kills: int = 0
    kinds: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    format: int = FORMAT
    #: --stall-s: how long a run may stand still before the drill calls it stalled (None: stall.py's default).
    stall_s: float | None = None

    def timed(self) -> list[dict[str, Any]]:
        """The events the drill injects, in the order they come due. A refusal is held only for the
        stop that follows it: in a schedule without that stop (shrunk away) the burst is not held."""
        timed = sorted((e for e in self.events if "at" in e), key=lambda e: e["at"])
        stopped = any(e.get("moment") == "after-refusal" for e in timed)
        return [e if stopped or not e.get("hold") else {k: v for k, v in e.items() if k != "hold"} for e in timed]

    def armed(self) -> list[dict[str, Any]]:
        return [e for e in self.events if "at" not in e and e["kind"] not in SETUP_KINDS + FINAL_KINDS]

    def setup(self) -> list[dict[str, Any]]:
        """The events before the workers start (SETUP_KINDS)."""
        return [e for e in self.events if e["kind"] in SETUP_KINDS]

    def final(self) -> list[dict[str, Any]]:
        """The events after the workers end (FINAL_KINDS)."""
        return [e for e in self.events if e["kind"] in FINAL_KINDS]

    def renumbered(self) -> Schedule:
        """The same schedule with its events numbered 1, 2, ... again (after shrinking)."""
        events = [dict(e, n=i) for i, e in enumerate(self.events, 1)]
        return Schedule(**{**asdict(self), "events": events})

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    def write(self, path: Path) -> Path:
        path.write_text(self.to_json() + "\n", encoding="utf-8")
        return path


def load(path: Path, strategy_name: str) -> Schedule:
    """A schedule written by an earlier drill (``--replay FILE``); JobError if unusable."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise JobError(f"cannot read the schedule {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise JobError(f"{path} is not a drill schedule (not JSON: {exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("events"), list):
        raise JobError(f"{path} is not a drill schedule of format {FORMAT} (written by `drill`, beside its report)")
    if data.get("strategy") != strategy_name:
        raise JobError(f"{path} is a schedule of the {data.get('strategy')!r} strategy; this project is "
                       f"{strategy_name!r}")
    known = set(Schedule.__dataclass_fields__)
    try:
        schedule = Schedule(**{k: v for k, v in data.items() if k in known})
        for event in schedule.events:
            _check_event(event)
    except (TypeError, ValueError) as exc:
        raise JobError(f"{path}: {exc}") from None
    return schedule


def _check_event(event: Any) -> None:
    if not isinstance(event, dict) or event.get("kind") not in KINDS or not isinstance(event.get("n"), int):
        raise ValueError(f"not a fault event: {event!r}")
    if "at" in event and not (isinstance(event["at"], (int, float)) and 0 <= event["at"] <= 1):
        raise ValueError(f"event {event['n']}: 'at' must be a fraction between 0 and 1")
    if "at" not in event and event["kind"] not in SETUP_KINDS + FINAL_KINDS and not (
            "window" in event or "point" in event or "crash_point" in event):
        raise ValueError(f"event {event['n']}: an event without 'at' must name a window or a point")


# -------------------------------------------------------------------- the plan
def plan(strategy: Any, settings: Any, *, seed: int, records: int, kills: int, workers: int = 1, hosts: int = 1,
         work_ms: float = 0.5, fail_rate: float | None = None, kinds: list[str] | None = None,
         sigterm_only: bool = False, aims: list[str] | None = None) -> Schedule:
    """Draw the schedule from ``seed``. ``kinds``: the kinds switched on (default: all that
    apply); ``sigterm_only`` (--sigterm): every kill a SIGTERM; ``aims`` (--aim): the
    window of every kill, each then an armed SIGKILL."""
    rng = random.Random(seed)
    wanted = list(DEFAULT_KINDS if kinds is None else kinds)
    skipped = {k: why for k in wanted if (why := not_applicable(k, strategy, settings, aimed=aims is not None))}
    if "reconcile" in wanted and "reconcile" not in skipped and hosts > 1:
        skipped["reconcile"] = "the calls in doubt are answered in one data directory; --hosts gives each its own"
    usable = [k for k in wanted if k not in skipped]
    events: list[dict[str, Any]] = []
    # One of the kills is the reconcile fault's call that never went out (UNSENT_CALL), drawn last.
    unsent = int("reconcile" in usable and "sigkill" in usable and kills > 0 and not sigterm_only and aims is None)
    own_kills = min(3, (kills - unsent + 2) // OWN_KILL_EVERY) if "sigkill" in usable and not sigterm_only and aims is None else 0
    events += _kills(rng, usable, kills - unsent - own_kills, sigterm_only, aims,
                     aim_spread(strategy, settings, records, kills))
    if getattr(strategy, "KILLS_IN_RECOVERY", True):
        in_recovery(events, random.Random(f"{seed}:recovering"), [k for k in ("sigterm", "sigkill") if k in usable])
    if "host-lost" in usable and sigterm_only:
        usable.remove("host-lost")
        skipped["host-lost"] = "--sigterm: every kill is a SIGTERM, and a lost machine sends none"
    if "upgrade" in usable and sigterm_only:
        usable.remove("upgrade")
        skipped["upgrade"] = "--sigterm: every kill is a SIGTERM, and the upgrade's are SIGKILLs at persistence points"
    if "hung-worker" in usable and sigterm_only:
        usable.remove("hung-worker")
        skipped["hung-worker"] = "--sigterm: every kill is a SIGTERM, and a hung worker is ended with a SIGKILL"
    for kind in ("other-host", "host-lost", "service-fail", "service-timeout", "resubmit-same", "resubmit-new",
                 "store-outage", "key-reuse", "scale-out"):  # a new kind goes last: the others' draws stay
        if kind in usable:
            events += [_timed(rng, kind, records, settings) for _ in range(PER_RUN[kind])]
    after_refusal(events, random.Random(f"{seed}:refusal"), usable)
    after_outage(events, random.Random(f"{seed}:outage"), usable)
    long_burst(events, strategy)
    if "redelivery" in usable:
        events += [{"kind": "redelivery", "window": "after_commit_before_ack", "pass": rng.randint(1, AIM_SPREAD)}]
    if "submit-crash" in usable:
        events.insert(0, {"kind": "submit-crash", "crash_at": "last"})
    if "resubmit-new" in usable and any(e["kind"] in ("sigkill", "sigterm") for e in events):
        events.append(_late_resubmission(events, random.Random(f"{seed}:late"), records))
    if "resubmit-new" in usable and (_two_hold_one_key(strategy, usable, workers) or _refuses_queued(strategy)):
        drawn = random.Random(f"{seed}:pending")  # its own generator: the other events stay as they were
        when = QUEUED_RESUBMIT_AT if _refuses_queued(strategy) else PENDING_RESUBMIT_AT
        events.append({"kind": "resubmit-new", "at": round(drawn.uniform(*when), 4),
                       "count": min(max(1, round(records * RESUBMIT_SHARE)), records), "pending": True})
    if "damaged-checkpoint" in usable and not damage_some(events, random.Random(f"{seed}:damaged")):
        usable.remove("damaged-checkpoint")
        skipped["damaged-checkpoint"] = ("no timed SIGKILL for the damage to follow: it needs --kills, the sigkill "
                                         "kind, and no --sigterm")
    final: list[dict[str, Any]] = []
    if "reconcile" in usable:  # its own generator, like RECOVERING_EVERY: the other events stay as they were
        drawn = random.Random(f"{seed}:reconcile")
        final.append({"kind": "reconcile", "how": drawn.choice(RECONCILE_HOW), "resend_kills": list(RESEND_KILL)})
        if unsent:
            final.append({"kind": "sigkill", "crash_point": f"call:{drawn.randint(*UNSENT_CALL)}"})
    # The kills a worker gives itself (moments.py), with their own generator: the rest stays as it was.
    events += own_chain(own_kills, final, usable, random.Random(f"{seed}:state"), UNSENT_CALL,
                        cut_writes=getattr(strategy, "CUT_FIRST_WRITES", True))
    added = max(10, round(records * RESUBMIT_SHARE))  # records the drill adds: new input, after a rebuild
    if "new-input" in usable:
        drawn = random.Random(f"{seed}:new-input")
        events.append({"kind": "new-input", "at": round(drawn.uniform(*NEW_INPUT_AT), 4), "count": added})
    if "second-start" in usable:  # its own generator; early: the second needs the first still running once it is up
        events.append({"kind": "second-start", "at": round(random.Random(f"{seed}:second").uniform(0.1, 0.5), 4)})
    if "service-slow" in usable:  # its own generator: the other events stay as they were
        events.append({"kind": "service-slow", "at": round(random.Random(f"{seed}:slow").uniform(*SLOW_AT), 4),
                       "seconds": SLOW_FOR_S, "late_ms": SLOW_LATE_MS})
    if "malformed-input" in usable:  # its own generator: the other events stay as they were
        drawn = random.Random(f"{seed}:malformed")
        sent = {"input": "queue"} if getattr(strategy, "drill_submit", None) else {"flaws": list(FILE_FLAWS)}
        events.append({"kind": "malformed-input", "at": round(drawn.uniform(*MALFORMED_AT), 4), **sent})
    if "store-outage" in usable and getattr(strategy, "drill_submit", None):  # no draw: the others stay
        events.append({"kind": "store-outage", "at": IDLE_OUTAGE_AT, "hold_s": outage_hold(settings, idle=True), "idle": True,
                       "count": max(1, round(records * RESUBMIT_SHARE))})
    if "rebuild" in usable:  # after the workers end (after a reconcile): no draw, the other events stay as they were
        events.append({"kind": "rebuild", "count": added})
    if "second-outage" in usable:  # after the workers end: no draw, the other events stay as they were
        events.append({"kind": "second-outage"})
    if "hung-worker" in usable:  # after the workers end: no draw, the other events stay as they were
        events.append({"kind": "hung-worker"})
    if "upgrade" in usable:  # after the rest: the newest fixture the project ships (fault_kinds.py)
        events.append({"kind": "upgrade", "from": newest_fixture(strategy)[0]})
    events += final
    # setup first, then the timed ones, the armed ones (in their order), the final ones
    events = sorted(events, key=lambda e: (-1.0 if e["kind"] in SETUP_KINDS else 3.0 if e["kind"] in FINAL_KINDS
                                           else e.get("at", 2.0), e["kind"]))
    schedule = Schedule(strategy=getattr(strategy, "NAME", "?"), seed=seed, records=records, workers=workers,
                        hosts=hosts, work_ms=work_ms, fail_rate=fail_rate, kills=kills, kinds=usable,
                        skipped=skipped, events=events)
    return schedule.renumbered()


def aim_spread(strategy: Any, settings: Any, records: int, kills: int) -> int:
    """The largest pass an aimed kill may be drawn at: AIM_SPREAD, unless the strategy says how
    many times a run over ``records`` passes each window (``window_passes``, e.g. once per
    micro-batch): then at most that many passes per kill, so that every kill can land before the
    work runs out (the passes a kill waits for are passes the next kill cannot have)."""
    window_passes = getattr(strategy, "window_passes", None)
    if window_passes is None or kills <= 0:
        return AIM_SPREAD
    return max(1, min(AIM_SPREAD, int(window_passes(records, settings)) // kills))


def _kills(rng: random.Random, usable: list[str], kills: int, sigterm_only: bool,
           aims: list[str] | None, spread: int = AIM_SPREAD) -> list[dict[str, Any]]:
    if aims is not None:  # --aim: every kill an armed SIGKILL in its window
        return [{"kind": "sigkill", "window": w, "pass": rng.randint(1, spread)} for w in aims]
    kinds = [k for k in ("sigkill", "sigterm") if k in usable]
    if sigterm_only:
        kinds = ["sigterm"] if "sigterm" in usable else []
    if not kinds:
        return []
    terms = kills if kinds == ["sigterm"] else 0 if kinds == ["sigkill"] else max(1, round(kills * SIGTERM_SHARE))
    order = ["sigterm"] * min(terms, kills) + ["sigkill"] * (kills - min(terms, kills))
    rng.shuffle(order)
    found = []
    for kind in order:
        event: dict[str, Any] = {"kind": kind, "at": round(rng.uniform(EARLIEST, LATEST), 4),
                                 "slot": rng.randrange(64)}
        if kind == "sigkill":
            draw = rng.random()  # a fifth anywhere, three tenths after an effect, half after a commit
            event["moment"] = MOMENTS[0] if draw < 0.2 else MOMENTS[1] if draw < 0.5 else MOMENTS[2]
            event["delay_ms"] = round(rng.uniform(0, 10), 2)
        found.append(event)
    return found


def _two_hold_one_key(strategy: Any, usable: list[str], workers: int) -> bool:
    """Can two live workers hold tasks of one business key here (PENDING_RESUBMIT_AT)? Not with a
    queue's own redelivery instead of a store's tasks (its resubmission publishes again)."""
    return (getattr(strategy, "RESUBMITTED_RECORD", "new-work") == "deduped" and (workers > 1 or "scale-out" in usable)
            and getattr(strategy, "drill_republish", None) is None)


def _refuses_queued(strategy: Any) -> bool:
    """Does the strategy refuse a record its store holds, queued and not done yet as well as done? Not a
    queue's input (its resubmission publishes again)."""
    return (getattr(strategy, "RESUBMITTED_RECORD", "new-work") == "refused"
            and getattr(strategy, "drill_republish", None) is None)


def _late_resubmission(events: list[dict[str, Any]], rng: random.Random, records: int) -> dict[str, Any]:
    """The resubmission of the records done last, just after the last kill or outage (LATE_RESUBMIT_AFTER)."""
    restarts = ("sigkill", "sigterm", "other-host", "host-lost", "store-outage")
    last = max((e["at"] for e in events if "at" in e and e["kind"] in restarts), default=EARLIEST)
    return {"kind": "resubmit-new", "at": round(min(last + rng.uniform(*LATE_RESUBMIT_AFTER), LATE_RESUBMIT_BY), 4),
            "count": min(max(1, round(records * RESUBMIT_SHARE)), records), "latest": True}


def outage_hold(settings: Any, *, idle: bool = False) -> float:
    """A store outage is held until no effect was applied for this long: every worker waited on the
    lock past busy_timeout, so each saw an outage (runtime/outage.py), wherever it was when it began.
    An idle consumer's (IDLE_OUTAGE_AT) may try twice on SQLite (its batch, then message by message)."""
    if is_postgresql(settings.database_url):
        return PG_OUTAGE_HOLD_S  # the workers' connections are cut: each try fails at once
    return round(settings.busy_timeout_ms / 1000 * (2 if idle else 1) + 1.0, 3)


def _timed(rng: random.Random, kind: str, records: int, settings: Any) -> dict[str, Any]:
    count = max(1, round(records * RESUBMIT_SHARE))
    if kind in ("service-fail", "service-timeout"):
        return {"kind": kind, "at": round(rng.uniform(EARLIEST, 0.85), 4), "calls": rng.randint(*SERVICE_CALLS)}
    if kind == "resubmit-same":
        first = rng.randrange(max(1, records - count + 1))
        return {"kind": kind, "at": round(rng.uniform(0.1, 0.6), 4), "first": first, "count": min(count, records)}
    if kind == "resubmit-new":  # records already done: chosen when it lands, from what is stored
        return {"kind": kind, "at": round(rng.uniform(0.35, 0.8), 4), "count": min(count, records)}
    if kind == "store-outage":
        return {"kind": kind, "at": round(rng.uniform(0.2, 0.8), 4), "hold_s": outage_hold(settings)}
    if kind == "other-host":
        # Before any kill: a worker killed on this host leaves claims only this host can judge by
        # its pid; moved away first, every later kill is restarted on the killed worker's own host.
        return {"kind": kind, "at": round(rng.uniform(OTHER_HOST_AT[0], OTHER_HOST_AT[1]), 4),
                "slot": rng.randrange(64)}
    if kind == "scale-out":  # early: two workers share most of the run, its kills and faults
        return {"kind": kind, "at": round(rng.uniform(EARLIEST, 0.3), 4)}
    return {"kind": kind, "at": round(rng.uniform(0.35, 0.8), 4)}
