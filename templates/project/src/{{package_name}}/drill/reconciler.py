"""The drill's operator (fault kind ``reconcile``): the person who answers the calls in doubt.

A plain call at most once is never sent again by the job: a kill between its send and its
recorded answer leaves it in doubt, and ``reconcile`` lists it for a person, who checks with
the receiver and answers. That person is part of the design, so the drill plays them once
every worker has ended, through the project's own commands as the README tells a user:

1. ``reconcile --json`` lists the calls; each is answered from what the service really applied
   (its log, the drill's ground truth): one by one (``--applied ID`` / ``--not-applied ID``) or
   all at once from the service's export (``--from-export external.db``), as the schedule says;
2. one ``run`` is killed at its first external call, the re-send of a call answered "not
   applied", just before it goes out; a ``run`` follows, which must hold it in doubt (at most once
   it cannot know the call never went out: sending it unasked is a ``reconcile`` failure), and
   the calls in doubt are answered again: the one cut short is "not applied" once more (a re-send
   taken for settled is not listed, and is lost);
3. one more ``run`` is killed at its first call, that re-send again, this time just after it
   returned (the schedule's ``resend_kills``, in order); a ``run`` follows, which must hold it in
   doubt and never send it a second time (it arrived: a duplicate); the calls in doubt are
   answered again, and a last ``run`` sends what was not applied. One kill point alone shows
   only one of the ways a re-send cut short goes wrong.

The checks that follow are the usual ones, with no excuse left: a call answered "not applied"
that never arrived is ``lost``, one that arrived twice (or one answered "applied" sent again)
is a duplicate. A command that fails is ``reconcile``.

Plain calls at least once: the job re-sent each call in doubt itself, and ``reconcile`` asks whether
the first send had arrived too (the re-send a duplicate: "applied") or not (the re-send was the only
one: "not applied"). The person answers from how often the service applied it, and whatever they
answer, the runs after it must send that call no more (``reconcile`` fails otherwise: an answer
that queues a third send turns a possible duplicate into a certain one).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from .. import settings as settings_module
from ..runtime.effects import AWAITING_ANSWER, POLICY, arrived
from ..runtime.external import EXTERNAL_DB, applied_effects
from .history import History
from .verdict import Failure, failure
from .workers import Pool, worker_env

#: How long one of the operator's commands or runs may take (a loaded machine, a queue's broker).
COMMAND_S = 300.0
#: Where an armed run dies: just before its first external call goes out, or just after it
#: returned (an event's ``resend_kills``; a schedule written before them has one ``resend_kill``).
RESEND_KILL = {"before": "call:1", "after": "called:1"}


def resend_kills(event: dict[str, Any]) -> list[str]:
    return list(event.get("resend_kills") or [event.get("resend_kill", "after")])


class Operator:
    """Plays one ``reconcile`` event of the schedule; ``errors`` feeds the ``reconcile`` check."""

    def __init__(self, data_dir: Path, pool: Pool, history: History) -> None:
        self.data_dir, self.pool, self.history = data_dir, pool, history
        self.env = worker_env()
        self.errors: list[str] = []
        #: Calls answered while re-sent by the job (at least once): (record, step) -> (call id, times applied).
        self.resent: dict[tuple[str, str], tuple[str, int]] = {}

    def play(self, event: dict[str, Any], done: int, calls_before: int) -> dict[str, Any]:
        """The event's outcome: what was answered, whether the re-send was crashed; ``calls_before``:
        the service's calls before the person came (what the run itself sent)."""
        first = last = self.answer(event)
        crashed: list[str] = []
        answered_again = 0
        for where in resend_kills(event) if first["not_applied"] else [None]:
            if where is not None and not last["not_applied"]:
                break  # the re-send went through: nothing left to cut
            before = self._times()
            if where is not None and self.run_worker(event, kill=where, done=done) == -signal.SIGKILL:
                crashed.append(where)
            cut = self._being_resent() if where == "before" else []
            self.run_worker(event, done=done)  # a re-send cut short is found in doubt again, never sent again
            self._sent_unanswered(cut, before)
            last = self.answer(event)
            answered_again += last["answered"]
        if last["not_applied"]:
            self.run_worker(event, done=done)
        self._resent_again()
        outcome = {"how": event["how"], "resend_kills": crashed, "answered": first["answered"],
                   "applied": first["applied"], "not_applied": first["not_applied"],
                   "answered_again": answered_again, "resend_crashed": bool(crashed),
                   "calls_before": calls_before, "errors": list(self.errors)}
        self.history.add("fault", event=event["n"], kind=event["kind"], done=done, **outcome)
        return outcome

    # ------------------------------------------------------------------ answers
    def answer(self, event: dict[str, Any]) -> dict[str, int]:
        """Every open call answered by the truth, the way the event says; the counts."""
        listing = self._command(["--json"])
        calls = [c for c in (json.loads(listing).get("calls", []) if listing else []) if c["status"] in AWAITING_ANSWER]
        times = self._times()
        applied = {c["id"] for c in calls if arrived(c["status"], times[(c["record_id"], c["step"])])}
        for c in calls:
            if c["status"] == "resent":
                self.resent.setdefault((c["record_id"], c["step"]), (c["id"], times[(c["record_id"], c["step"])]))
        counts = {"answered": len(calls), "applied": len(applied), "not_applied": len(calls) - len(applied)}
        if not calls:
            return counts
        if event["how"] == "export":  # the receiver's own record of what it applied
            self._command(["--from-export", str(self.data_dir / EXTERNAL_DB)])
        else:
            for call in calls:
                said = "--applied" if call["id"] in applied else "--not-applied"
                self._command([said, call["id"]])
        self.history.add("reconcile", how=event["how"], **counts,
                         ids={c["id"]: c["id"] in applied for c in calls})
        return counts

    def _times(self) -> Counter[tuple[str, str]]:
        return Counter((rid, step) for rid, step, _ in applied_effects(self.data_dir))

    def _being_resent(self) -> list[tuple[str, str]]:
        """The calls a killed run was re-sending when it died (the ledger's ``releasing``, as
        ``reconcile --json`` lists them)."""
        listing = self._command(["--json"])
        calls = json.loads(listing).get("calls", []) if listing else []
        return [(c["record_id"], c["step"]) for c in calls if c["status"] == "releasing"]

    def _sent_unanswered(self, calls: list[tuple[str, str]], before: Counter[tuple[str, str]]) -> None:
        """At most once: a re-send killed before it went out is in doubt to the next run, which cannot
        know it never arrived: sending it again before a person answers breaks the promise (here it
        happens to be harmless; had the kill come just after, it is a duplicate)."""
        if POLICY != "at-most-once" or not calls:
            return  # at least once: the job re-sends a call in doubt itself
        times = self._times()
        sent = [f"{rid}/{step}" for rid, step in calls if times[(rid, step)] > before[(rid, step)]]
        if sent:
            self.errors.append(f"{len(sent)} re-send(s) killed before they went out were sent again by the next "
                               f"run before a person answered, e.g. {sent[0]}; at most once, a run cannot know "
                               "such a call never arrived: it must hold it in doubt")

    def _resent_again(self) -> None:
        """At least once: a call the job had re-sent is settled by any answer; the runs since applied it again?"""
        if not self.resent:
            return
        times = self._times()
        again = [call for pair, (call, before) in sorted(self.resent.items()) if times[pair] > before]
        if again:
            self.errors.append(f"{len(again)} call(s) the job had already re-sent in doubt were sent again after "
                               f"a person answered them, e.g. {again[0]}; an answer settles such a call, it never "
                               "queues another send")

    def _command(self, args: list[str]) -> str:
        """``reconcile ARGS`` in a fresh process, as a person types it; its output ('' on failure)."""
        cmd = [sys.executable, "-m", settings_module.PACKAGE, "reconcile", "--data-dir", str(self.data_dir), *args]
        try:
            done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=COMMAND_S)
        except subprocess.TimeoutExpired:
            self.errors.append(f"`reconcile {' '.join(args)}` did not finish in {COMMAND_S:.0f} s")
            return ""
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            self.errors.append(f"`reconcile {' '.join(args)}` exited {done.returncode}: {said}")
            return ""
        return done.stdout

    # --------------------------------------------------------------------- runs
    def run_worker(self, event: dict[str, Any], *, kill: str | None = None, done: int) -> int | None:
        """One run of the job in slot 0 (``kill``: it kills itself at its first call, RESEND_KILL);
        its exit code, None if it did not end in time."""
        self.pool.home(0)
        armed = kill is not None
        arm = {"n": event["n"], "crash_point": RESEND_KILL[kill]} if kill is not None else None
        proc = self.pool.spawn(0, arm, done=done)
        try:
            code = proc.wait(timeout=COMMAND_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self.errors.append(f"the run after reconcile did not end in {COMMAND_S:.0f} s")
            return None
        killed = armed and code == -signal.SIGKILL
        self.history.add("exit", slot=0, pid=proc.pid, code=code, by="self" if killed else "worker",
                         event=event["n"] if killed else None, done=done)
        self.pool.armed[0], self.pool.reaped[0] = None, True
        if code != 0 and not killed:
            self.errors.append(f"the run after reconcile exited {code} (drill-workers.log)")
        return code


def check(outcomes: list[dict[str, Any]]) -> list[Failure]:
    """``reconcile``: every command of the operator's runbook worked (the effects' checks do the rest)."""
    errors = [e for o in outcomes for e in o["errors"]]
    if not errors:
        return []
    return [failure("reconcile", f"{len(errors)} step(s) of answering the calls in doubt failed, e.g. {errors[0]}; "
                                 "a person following `reconcile`'s own instructions must be able to settle them")]
