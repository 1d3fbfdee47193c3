"""Every external call of every strategy, with the recovery rule of the service's kind.

A crash can land after a call went through and before the commit that records it.
What the restarted worker may do about that call depends on the service, not on
the strategy (``settings.EFFECT_KIND``, asked by the template):

``idempotent`` (the service dedupes by key)
    The strategy records its intent and calls with the key; after a kill the call
    is simply sent again with the SAME key, and the service acknowledges it
    instead of applying it twice. Re-sent calls are counted (``redone_calls``).
``queryable`` (no dedupe, but a call can be looked up by its reference)
    The intent (with the reference) is committed BEFORE the call; after a kill a
    call whose intent has no outcome is looked up, and sent only if missing.
``plain`` (neither: SMTP, most webhooks)
    Nobody can tell afterwards whether a call in flight got through: it is IN
    DOUBT. Each call is written to the call ledger (``effect_calls``, in the state
    store) just before it is sent; a call found there without its record's commit
    is in doubt, and ``settings.PLAIN_POLICY`` decides:

    * ``at-most-once``: never sent again by the job. It is marked ``in_doubt``;
      ``status`` counts it and ``reconcile`` lists it for a person, who marks it
      ``--applied`` or ``--not-applied`` (sent at the start of the next ``run``).
      Nothing is duplicated; what is missing is listed.
    * ``at-least-once``: sent again, and counted as a possible duplicate. Nothing
      is lost; the receiver may see it twice (at most once per doubt).

For a plain call no strategy can promise both nothing lost and nothing doubled:
that needs the service's help (a key it dedupes, or a reference it answers for).

A ``TransientError`` means the service refused the call before applying it (a 503,
a refused connection): the ledger forgets that attempt, and the strategy's own
retry policy sends it again. A timeout after the request went out leaves the
outcome unknown: a real adapter raises :class:`InDoubt` (http_service.py), and the
retry then treats the call as one made before a crash (looked up, re-sent with
its key, or held in doubt).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import faults, metrics
from .errors import InDoubt, TransientError
from .external import ExternalService
from ..settings import EFFECT_KIND, PLAIN_POLICY, Settings
from .store import Store, connect, create_table

KIND = EFFECT_KIND
POLICY = PLAIN_POLICY if KIND == "plain" else ""

# ------------------------------------------------------------------------ SQL
LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS effect_calls (
    call_key    TEXT PRIMARY KEY,          -- the strategy's key for (task, record, step)
    record_id   TEXT NOT NULL,
    step        TEXT NOT NULL DEFAULT '',
    payload     TEXT,
    -- sending: the call is (being) sent; in_doubt: found without its record's commit
    -- (at-most-once: not sent again); resent: found so and sent again (at-least-once);
    -- applied / not_applied: a person's answer (reconcile); releasing: a not_applied
    -- call being sent by `run`; released: sent after a person said not applied.
    status      TEXT NOT NULL,
    sends       INTEGER NOT NULL DEFAULT 1,
    first_at    DOUBLE PRECISION NOT NULL,
    doubt_at    DOUBLE PRECISION,
    resolved_at DOUBLE PRECISION
)"""
SELECT_CALL = "SELECT * FROM effect_calls WHERE call_key = ?"
INSERT_SENDING = """
INSERT INTO effect_calls (call_key, record_id, step, payload, status, sends, first_at)
VALUES (?, ?, ?, ?, 'sending', 1, ?)"""
SET_STATUS = "UPDATE effect_calls SET status = ?, sends = ?, doubt_at = ?, resolved_at = ? WHERE call_key = ?"
FORGET_CALL = "DELETE FROM effect_calls WHERE call_key = ?"
SELECT_DOUBTS = """
SELECT call_key, record_id, step, status, sends, first_at, doubt_at, resolved_at FROM effect_calls
WHERE status IN ('in_doubt', 'resent', 'not_applied', 'releasing') OR (status = 'applied' AND sends > 1)
ORDER BY doubt_at, call_key"""
SELECT_RELEASED = "SELECT * FROM effect_calls WHERE status IN ('not_applied', 'releasing') ORDER BY call_key"
#: The ledger's states that wait for a person's answer (``reconcile``); not_applied and releasing wait for a re-send.
AWAITING_ANSWER = ("in_doubt", "resent")
SELECT_ANSWERED = "SELECT record_id, step, doubt_at FROM effect_calls WHERE resolved_at IS NOT NULL AND doubt_at IS NOT NULL"
COUNT_BY_STATUS = "SELECT status, COUNT(*) AS n, SUM(sends) AS sends FROM effect_calls GROUP BY status"


def arrived(status: str, times: int) -> bool:
    """What a receiver's count of its applications of a call in doubt answers: it arrived if applied at
    all; one the job re-sent itself (at least once) had its FIRST send arrive too only if applied twice."""
    return times > (1 if status == "resent" else 0)


def promise(strategy_unit: int) -> int:
    """A strategy's REDONE_CALLS_PER_KILL under this kind: the calls of one uncommitted
    unit (``strategy_unit``), re-sent with their keys to an idempotent service, or re-sent
    in doubt by a plain kind's at-least-once policy; none for the others (looked up, or
    held in doubt). A re-send beyond the unit in flight means the recovery point went back
    further than the last commit (the drill also bounds at-least-once by the calls in doubt)."""
    return strategy_unit if KIND == "idempotent" or (KIND == "plain" and POLICY == "at-least-once") else 0


def promise_text() -> str:
    """What the job promises about its external calls, in words (status, drill, docs)."""
    if KIND == "idempotent":
        return "each effect applied once: the service dedupes a re-sent call by its key"
    if KIND == "queryable":
        return "each effect applied once: a call in doubt is looked up by its reference before it is sent again"
    if POLICY == "at-most-once":
        return ("at most once: no effect applied twice; a call in doubt after a crash is never re-sent "
                "and is listed by `reconcile` for a person")
    return ("at least once: no effect lost; a call in doubt after a crash is sent again, so the receiver "
            "may get it twice (counted as a possible duplicate)")


def _dumps(payload: Any) -> str:
    return json.dumps(payload, sort_keys=True, default=repr)


class Ledger:
    """The plain kind's call ledger (and the queryable kind's intents for strategies
    without their own): one row per call, written durably BEFORE the call."""

    def __init__(self, store: Store) -> None:
        self.store = store
        create_table(store, LEDGER_SCHEMA)  # workers starting at once on PostgreSQL: one creates it

    @classmethod
    def open(cls, data_dir: Path, settings: Settings) -> Ledger:
        return cls(connect(data_dir, settings, create=True))

    def get(self, key: str) -> dict[str, Any] | None:
        return self.store.one(SELECT_CALL, (key,))

    def sending(self, key: str, record_id: str, step: str, payload: Any) -> None:
        """A fresh call about to be sent (autocommit: durable before the call)."""
        self.store.execute(INSERT_SENDING, (key, record_id, step, _dumps(payload), time.time()))

    def set(self, row: dict[str, Any], status: str, *, sends: int | None = None, doubt: bool = False,
            resolved: bool = False) -> None:
        now = time.time()
        # A new doubt is an open one, even about a call a person had answered before (a re-send
        # of a call marked not applied, killed while it was out): reconcile must list it again.
        row.update(status=status, sends=row["sends"] if sends is None else sends,
                   doubt_at=now if doubt else row.get("doubt_at"),
                   resolved_at=None if doubt else now if resolved else row.get("resolved_at"))
        self.store.execute(SET_STATUS, (row["status"], row["sends"], row["doubt_at"], row["resolved_at"],
                                        row["call_key"]))

    def forget(self, key: str) -> None:
        self.store.execute(FORGET_CALL, (key,))

    def doubts(self) -> list[dict[str, Any]]:
        return self.store.all(SELECT_DOUBTS)

    def counts(self) -> dict[str, int]:
        return {row["status"]: int(row["n"]) for row in self.store.all(COUNT_BY_STATUS)}

    def close(self) -> None:
        self.store.close()


class Effects:
    """How a strategy makes its external calls: ``call(record_id, step, key, payload,
    recovering=...)``. ``recovering``: the strategy's own answer to "may this call have
    been made by a killed worker?" (its intent had no outcome); None for a strategy
    without intents of its own: the ledger answers then."""

    def __init__(self, external: ExternalService, data_dir: Path, settings: Settings) -> None:
        self.external, self.data_dir, self.settings = external, data_dir, settings
        self._ledger: Ledger | None = None
        #: Calls of this process whose answer never came (InDoubt): retried as maybe made.
        self._doubted: set[str] = set()

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:  # opened on first need: the idempotent kind never needs it
            self._ledger = Ledger.open(self.data_dir, self.settings)
        return self._ledger

    def call(self, record_id: str, step: str, key: str, payload: Any, *,
             recovering: bool | None = None) -> dict[str, Any]:
        if KIND == "idempotent":
            # Re-sent after a kill with the same key: the service acknowledges, never applies twice.
            metrics.call("resent" if recovering else "sent")
            return self._send_once(record_id, step, key, payload)
        if KIND == "queryable":
            return self._queryable(record_id, step, key, payload, recovering)
        return self._plain(record_id, step, key, payload)

    def _send_once(self, record_id: str, step: str, key: str, payload: Any) -> dict[str, Any]:
        """The call itself, between two crash points of the drill's sweep (faults.py): sent, returned."""
        faults.point("call")
        answer = self.external.apply(record_id, step, key, payload)
        faults.point("called")
        return answer

    # ---- queryable: look a call in doubt up by its reference, send only if missing
    def _queryable(self, record_id: str, step: str, key: str, payload: Any,
                   recovering: bool | None) -> dict[str, Any]:
        if recovering is None:  # no intent of the strategy's own: the ledger row is the intent
            row = self.ledger.get(key)
            if row is None:
                self.ledger.sending(key, record_id, step, payload)
            recovering = row is not None
        if recovering or key in self._doubted:
            metrics.call("looked_up")
            found = self.external.lookup(key)
            if found is not None:
                return found
        metrics.call("sent")
        try:
            return self._send_once(record_id, step, key, payload)
        except InDoubt:
            self._doubted.add(key)  # the retry asks first
            raise

    # ---- plain: in doubt after a crash; the policy decides
    def _plain(self, record_id: str, step: str, key: str, payload: Any) -> dict[str, Any]:
        row = self.ledger.get(key)
        if row is None:  # a fresh call: recorded before it is sent
            self.ledger.sending(key, record_id, step, payload)
            metrics.call("sent")
            return self._send(record_id, step, key, payload, None)
        status = row["status"]
        if status == "applied":  # a person said it got through
            return {"status": "applied", "record_id": record_id, "step": step, "reference": None, "reconciled": True}
        if status in ("sending", "resent", "releasing") and POLICY == "at-least-once":
            # In doubt: sent again, and counted as a possible duplicate.
            before = dict(row)
            self.ledger.set(row, "resent", sends=row["sends"] + 1, doubt=True)
            metrics.call("resent")
            return self._send(record_id, step, key, payload, before)
        if status in ("sending", "releasing", "in_doubt"):
            # At most once: never re-sent by the job; listed for a person (reconcile).
            if status != "in_doubt":
                self.ledger.set(row, "in_doubt", doubt=True)
                metrics.call("held_in_doubt")
            return {"status": "in_doubt", "record_id": record_id, "step": step, "reference": None, "call_key": key}
        if status == "not_applied":  # a person said it never got through: send it now
            before = dict(row)
            self.ledger.set(row, "releasing", sends=row["sends"] + 1)
            metrics.call("sent")  # a person's answer, not a crash: no recovery
            answer = self._send(record_id, step, key, payload, before)
            self.ledger.set(row, "released")
            return answer
        return {"status": status, "record_id": record_id, "step": step, "reference": None,  # released, resolved
                "call_key": key}

    def _send(self, record_id: str, step: str, key: str, payload: Any,
              before: dict[str, Any] | None) -> dict[str, Any]:
        try:
            return self._send_once(record_id, step, key, payload)
        except InDoubt:
            raise  # the ledger row stays: the retry finds the call in doubt
        except TransientError:
            # Refused before it was applied: this attempt never happened (the strategy retries).
            if before is None:
                self.ledger.forget(key)
            else:
                self.ledger.set(dict(before, call_key=key), before["status"], sends=before["sends"])
            raise

    def send_released(self, log: Callable[[str], None] | None = None) -> int:
        """At the start of ``run`` (plain kind): send the calls a person marked
        not applied; their records are committed, so no strategy calls them again.
        A ``releasing`` one found here died while being sent: in doubt again."""
        if KIND != "plain":
            return 0
        sent = 0
        for row in self.ledger.store.all(SELECT_RELEASED):
            self.call(row["record_id"], row["step"], row["call_key"], json.loads(row["payload"] or "null"))
            sent += 1
        if sent and log is not None:
            log(f"sent {sent} call(s) that reconcile marked not applied")
        return sent

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None


# ------------------------------------------------------- status and reconcile
def summary(data_dir: Path, settings: Settings) -> dict[str, Any]:
    """For ``status`` and the drill: the kind, the policy and the calls in doubt."""
    report: dict[str, Any] = {"effect_kind": KIND, "plain_policy": POLICY or None, "promise": promise_text(),
                              "in_doubt": 0, "in_doubt_ids": [], "possible_duplicates": 0,
                              "awaiting_resend": 0}
    rows = doubt_rows(data_dir, settings)
    if rows is None:
        return report
    open_doubts = [r for r in rows if r["status"] in AWAITING_ANSWER and r["resolved_at"] is None]
    report.update(in_doubt=len(open_doubts), in_doubt_ids=[r["call_key"] for r in open_doubts],
                  # the job's re-sends in doubt (at least once), also those a person since said arrived twice
                  possible_duplicates=sum(int(r["sends"]) - 1 for r in rows if r["status"] in ("resent", "applied")),
                  awaiting_resend=sum(r["status"] in ("not_applied", "releasing") for r in rows))
    return report


def doubt_rows(data_dir: Path, settings: Settings) -> list[dict[str, Any]] | None:
    """The ledger's calls in doubt or awaiting a re-send; None when there is no ledger (the
    call is not plain, or no plain call was made yet)."""
    if KIND != "plain" or not has_ledger(data_dir, settings):
        return None
    ledger = Ledger.open(data_dir, settings)
    try:
        return ledger.doubts()
    finally:
        ledger.close()


def has_ledger(data_dir: Path, settings: Settings) -> bool:
    """Only read: a status of a data dir without a ledger must not create a store."""
    if settings.database_url:
        return True
    return (Path(data_dir) / "state.db").exists()


def answered_calls(data_dir: Path, settings: Settings) -> list[dict[str, Any]]:
    """Every call held in doubt that a person answered since (``reconcile``): record_id, step, doubt_at."""
    if KIND != "plain" or not has_ledger(data_dir, settings):
        return []
    ledger = Ledger.open(data_dir, settings)
    try:
        return ledger.store.all(SELECT_ANSWERED)
    finally:
        ledger.close()


def in_doubt_calls(data_dir: Path, settings: Settings) -> list[tuple[str, str]]:
    """(record_id, step) of every unresolved in-doubt call (the drill's ``lost`` check)."""
    if KIND != "plain" or not has_ledger(data_dir, settings):
        return []
    ledger = Ledger.open(data_dir, settings)
    try:
        return [(r["record_id"], r["step"]) for r in ledger.doubts() if r["status"] == "in_doubt"]
    finally:
        ledger.close()
