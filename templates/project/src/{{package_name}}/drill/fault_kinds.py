"""The drill's fault kinds: what each does and proves (``drill --help``, the docs, the report),
which a default drill draws, and whether a kind applies to this project (``not_applicable``:
the report says why not). schedule.py draws them into a plan; an event's fields, by kind:

    sigkill          moment: anywhere | after-effect | after-commit | recovering, delay_ms,
                     slot (timed), or window+pass / point (armed)
    sigterm          slot, moment: recovering | after-refusal | after-outage (optional) (every kill a SIGTERM
                     with --sigterm)

    other-host       slot: SIGTERM that worker, start its successor with another host id
    host-lost        slot: SIGKILL that worker and every other on its host, start their successors
                     with another host id (the claims freed by the lease alone: the drill waits it
                     out if every worker left); with several steps, just after a later step's call
    scale-out        one more worker started while the others run (an autoscaler adding a replica,
                     a deploy's new pod beside the old one): two live workers share the work
    service-fail     calls: the service refuses the next N calls (not applied; the run's last
                     burst LONG_BURST, or one fewer than the strategy's CALL_ATTEMPTS: moments.py);
                     hold (optional): its first refusal answered only once the after-refusal stop
                     was sent
    service-timeout  calls: the service applies the next N calls, then times out
    service-slow     seconds, late_ms: for that long every call is applied at once and answered
                     late_ms late (a slow downstream): units take longer, mid-flight
    resubmit-same    first, count: input[first:first+count] submitted again under the
                     input's correlation id (or, queue input, published again)
    resubmit-new     count: that many records already done, under a new correlation id;
                     latest (optional): the records done last (else the first done);
                     pending (optional): records not done yet instead, the last queued first
                     (lands while two workers run)
    new-input        count: that many new records submitted while the workers run (new input
                     arriving mid-run: a producer, a cron, a user); all of it must be done once
    store-outage     hold_s: the store kept away until no effect was applied for that long
                     (SQLite: its write lock held, the workers waited past busy_timeout;
                     PostgreSQL: the workers' connections cut, the tables locked: store_away.py)
    key-reuse        an idempotency key of a done record, with a different request
    malformed-input  flaws (file input): the flaws of the files given to ``submit --file``, a queue's
                     input: every kind of malformed message (bad_input.py)
    redelivery       queue input: armed window after_commit_before_ack (a message
                     committed, not acked: the broker delivers it again)
    submit-crash     crash_at: last. Before the workers start (neither timed nor armed): the
                     input submitted by a process killed just before its last persistence
                     point (counted on a scratch store first), then submitted again
    rebuild          count. After the workers end (and a reconcile): ``rebuild`` run as an operator
                     would, with every worker stopped, then ``count`` new records and a last run
                     (event sourcing: the rebuild calls nothing, the last run sends only the new work)
    reconcile        how: each | export. After the workers end (neither timed nor armed): the
                     drill plays the person who answers the calls in doubt (plain calls), from
                     what the service really applied, one by one
                     (``reconcile --applied/--not-applied ID``) or from the service's export
                     (``reconcile --from-export``); resend_kills: before, after: a run is killed
                     at its first call, the released re-send, just before it goes out, the calls
                     in doubt answered again, then the next such run killed just after its first
                     call returned, answered again, and a last run finishes (reconciler.py)
    damaged-checkpoint  no event of its own: a timed SIGKILL (after-effect) carries ``damage``: torn
                     (and another rot), done to the newest checkpoint generation once the worker is
                     dead (strategies with ``drill_damage_newest``); its successor falls back, and
                     is the first of the worker's own kills (``after: damage``, AFTER_DAMAGE)
    second-outage    After the workers end (after a rebuild): one worker on new input, with
                     store_outage_s LIMIT_S, meets two store outages held well within it, the
                     second more than LIMIT_S after the first and after a commit (second_outage.py)
    hung-worker      After the workers end: one worker on new input, with
                     lease_s LEASE_S, stopped (SIGSTOP) while it holds a unit and no lock; once the
                     lease ran out another starts on the same host; then the hung one is killed
                     (hung_worker.py)
    upgrade          from: a schema version. After the workers end (after a rebuild): the project's
                     upgrade fixture of that version (its newest) continued by this code in
                     ``<data-dir>/upgrade`` as ``drill --upgrade-from VERSION`` would (upgrade.py)
    power-loss       reserved for the power-loss drill (issue 21): kill and drop what
                     was not fsynced (LazyFS)
"""

from __future__ import annotations

from typing import Any

from ..runtime import effects
from ..runtime.store import is_postgresql
from ..settings import ENV_PREFIX
from .upgrade_fixture import newest as newest_fixture

#: Every fault kind: what it does and what it proves (drill --help, the docs, the report).
KINDS: dict[str, str] = {
    "sigkill": "a worker killed with SIGKILL (timed, or aimed at a window with --aim): the committed state decides",
    "sigterm": "a worker asked to stop with SIGTERM: exit 0 within the grace period, nothing left in doubt",
    "other-host": "a worker stopped with SIGTERM and its successor started under another host id: the claim "
                  "must have been released (another host cannot see the pid)",
    "host-lost": "a worker killed with SIGKILL, with every other worker on that host, and their successors started "
                 "under another host id (a machine lost with what it held): that host cannot see the dead pids, so "
                 "only the lease frees the claims; once it "
                 "ran out (the drill waits, starting the job again there if every worker had left) it is taken over",
    "service-fail": "the external service refuses a few calls before applying them: the job retries",
    "service-timeout": "the external service applies a few calls, then times out: the job cannot tell (in doubt)",
    "service-slow": "the external service answers every call late for a few seconds (a slow downstream): units "
                    "take longer, and a holder must keep its claim alive while its unit moves on",
    "resubmit-same": "part of the input submitted again under its correlation id (a producer retrying, a broker "
                     "redelivering): nothing queued twice",
    "resubmit-new": "records already done submitted again under a new correlation id: refused, or deduped by "
                    "their business key, as the strategy promises",
    "new-input": "new records submitted while the workers run (input that keeps arriving): done once each, "
                "and the work already queued neither lost nor done again",
    "store-outage": "the state store taken away (SQLite: another connection holds the write lock past "
                    "busy_timeout; PostgreSQL: every worker's connection cut, and cut again as it comes back, "
                    "while the drill holds the tables locked): the workers ride it out",
    "key-reuse": "an idempotency key reused with a different request: refused",
    "malformed-input": "input that can never be worked on arrives mid-run (a line cut off, a record without its id "
                       "or with a field of the wrong type, one id twice; a message that is not JSON, has no "
                       "correlation id or a field out of range): a file is refused whole with exit 2, a queue's message dead-lettered, "
                       "and the run goes on",
    "redelivery": "a consumer killed after its commit, before its ack: the broker delivers the message again",
    "submit-crash": "the input submitted by a process killed just before its last commit, then submitted again "
                    "under the same correlation id (a producer crashing and retrying): every record queued once",
    "reconcile": "after the run, the calls in doubt answered as a person would (from what the service applied), "
                 "the next run killed just before its first re-send goes out, answered again, the next killed "
                 "just after that re-send returned, answered again, finished: a call answered "
                 "'not applied' sent once more and no more, one answered 'applied' never again; at least once, "
                 "a call the job already re-sent is never sent again, whatever the answer",
    "damaged-checkpoint": "SIGKILLs just after a call, each then damaging the newest generation of the checkpoint "
                          "(one torn, one rotten: it no longer checks out): the restart notices, falls back to the "
                          "generation before and treats the batch after it as maybe sent, by the effect's kind",
    "scale-out": "one more worker started while the others run (an autoscaler adding a replica, a deploy "
                 "starting the new pod before the old one stops): two live workers share the work, never both "
                 "doing the same unit",
    "second-start": "while a worker runs, the job started again on the same data directory (an overlapping cron "
                    "run, a pod restarted while the old one still stops): a design with one worker per data "
                    "directory refuses the second at once, without a call",
    "rebuild": "after the run, the projection rebuilt from the events with every worker stopped (an operator "
               "fixing a read model), then new input and a last run: the rebuild calls nothing and leaves the other "
               "subscribers where they were, so the last run sends only the new work; then rebuilds killed "
               "before their 2nd and 3rd writes, each followed by new input, a run and a whole rebuild: a killed "
               "rebuild leaves a consistent, shorter projection that the run completes",
    "second-outage": "after the run, the job alone on new input with a short store_outage_s meets two store "
                     "outages, each held well within it, the second more than that limit after the first and after "
                     "a commit: it rides out both (each outage gets the whole limit; a clock kept running from the "
                     "first would give up on the second at once)",
    "hung-worker": "after the run, the job once more on new input with a short lease: its worker hangs (SIGSTOP: a "
                   "long pause, a frozen VM) while it holds a unit, and once the lease ran out another worker starts "
                   "on the same host: it takes the unit over although the hung pid is alive; then the hung one is "
                   "killed, as a liveness probe would end it",
    "upgrade": "after the run, the store an older release left mid-run (the newest upgrade fixture the project "
               "ships) continued by this code, its worker killed at the schema check, at each migration and at "
               "the first pass of every persistence point: nothing lost or applied twice across the upgrade",
    "power-loss": "reserved: a kill that also drops every write not fsynced (the power-loss drill)",
}
#: The kinds a default drill draws (power-loss is the power-loss drill's own).
DEFAULT_KINDS = tuple(kind for kind in KINDS if kind != "power-loss")
#: Kinds that happen once, before the workers start: neither timed nor armed.
SETUP_KINDS = ("submit-crash",)
#: Kinds that happen once, after every worker ended: neither timed nor armed.
FINAL_KINDS = ("reconcile", "rebuild", "second-outage", "hung-worker", "upgrade")
#: host-lost makes the drill wait out the lease once: drawn only when that is this short (seconds).
HOST_LOST_MAX_LEASE_S = 10.0


# ------------------------------------------------------------------ applicability
def not_applicable(kind: str, strategy: Any, settings: Any, *, aimed: bool = False) -> str | None:
    """Why ``kind`` cannot be drilled on this project (None: it can); ``aimed``: the kills are armed."""
    files = getattr(strategy, "STATE_STORE", "database") == "files"
    queue = getattr(strategy, "drill_submit", None) is not None
    declared = (getattr(strategy, "DRILL_SKIPS", None) or {}).get(kind)
    if declared:
        return str(declared)
    if kind == "power-loss":
        return "run by the power-loss drill"
    if kind in ("second-outage", "hung-worker") and aimed:
        return "--aim drills the strategy's windows; this fault's run after the others has no kill to aim"
    if kind == "hung-worker":
        if files or queue or not getattr(strategy, "MULTI_WORKER", True) or getattr(strategy, "held_claims", None) is None:
            return ("no unit held under a lease that another worker could take over here (one worker per data "
                    "directory, or a queue's broker hands the messages out)")
    if kind == "second-outage":  # a store outage, twice: where there is none, the same reason
        return not_applicable("store-outage", strategy, settings, aimed=aimed)
    if kind == "store-outage" and files:
        return "the state is in files: there is no store to take away"
    if kind == "other-host" and files:
        return "the file variant runs one worker per data directory on one host"
    if kind == "other-host" and aimed:
        return "--aim arms every worker, and a graceful stop is only asked of an unarmed one"
    if kind == "host-lost" and files:
        return "the file variant runs one worker per data directory on one host"
    if kind == "host-lost" and aimed:
        return "--aim arms every kill, and a lost host's kill is timed"
    if kind == "host-lost" and float(getattr(settings, "lease_s", 0) or 0) > HOST_LOST_MAX_LEASE_S:
        return (f"lease_s is {settings.lease_s:g} s: another host takes a lost host's claims over only after that, "
                f"and the drill would wait as long; drill it with a shorter lease ({ENV_PREFIX}LEASE_S=5)")
    if kind == "redelivery" and not queue:
        return "the input is not a queue"
    if kind == "submit-crash" and queue:
        return "the input is published to a queue: there is no submit to crash"
    if kind == "submit-crash" and is_postgresql(settings.database_url):
        return ("the drill counts a submit's persistence points on a scratch store first, and a PostgreSQL "
                "database is shared")
    if kind == "resubmit-new" and getattr(strategy, "RESUBMITTED_RECORD", "new-work") == "new-work":
        return (f"the {getattr(strategy, 'NAME', '?')} strategy takes a new correlation id as new work: its records "
                "are processed again (docs/generated-project.md, resubmitting)")
    if kind == "key-reuse" and getattr(strategy, "drill_reuse_key", None) is None:
        return "no client-chosen idempotency keys in this strategy"
    if kind == "damaged-checkpoint" and getattr(strategy, "drill_damage_newest", None) is None:
        return ("the recovery point is kept in one copy (a database), which refuses a damaged store with exit 2 "
                "rather than falling back from it")
    if kind == "damaged-checkpoint" and aimed:
        return "--aim arms every kill, and the damage follows a timed SIGKILL"
    if kind == "second-start" and getattr(strategy, "MULTI_WORKER", True):
        return "several workers share this design's work: a second start is one more worker (scale-out)"
    if kind == "scale-out" and not getattr(strategy, "MULTI_WORKER", True):
        return "one worker per data directory in this design: a second one started must be refused (second-start)"
    if kind == "scale-out" and aimed:
        return "--aim arms every worker, and the one added would run unarmed"
    if kind == "second-start" and aimed:
        return "--aim arms every worker, and the second start waits for one that cannot die at its point meanwhile"
    if kind == "rebuild" and getattr(strategy, "rebuild", None) is None:
        return "no projection rebuilt from an event log in this strategy (event sourcing has `rebuild`)"
    if kind == "upgrade":
        if is_postgresql(settings.database_url):
            return ("the store an older release left needs an empty database of its own: run `drill --upgrade-from "
                    "VERSION` on one")
        if aimed:
            return "--aim drills the strategy's windows; the upgrade's kills are at persistence points"
        return newest_fixture(strategy)[1] or None
    if kind == "reconcile" and effects.KIND != "plain":
        return ("only plain calls wait for a person's answer (the others are deduped by their key or looked up by "
                "the job itself)")
    return None
