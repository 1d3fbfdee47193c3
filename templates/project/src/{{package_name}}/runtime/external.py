"""The simulated external service (a payment API, a mailer, an upload target...).

It lives in its own SQLite file, ``<data-dir>/external.db``, so the state store can
never enlist it in a transaction: exactly the situation of a real remote API.

It behaves as one of three KINDS of service (the project's ``effect_kind``, stored
in ``external.db`` so every process of a data directory agrees):

* ``idempotent``: ``apply(record_id, step, key, payload)`` applies the effect once
  per key; a repeated key is acknowledged (``"duplicate"``) and not applied again
  (think: a payment API with an ``Idempotency-Key`` header).
* ``queryable``: every ``apply`` is applied (no dedupe), and the key is kept as the
  call's *reference*; ``lookup(reference)`` answers "did my earlier call get
  through?" (think: an order API you can ``GET /orders/REF``).
* ``plain``: every ``apply`` is applied, the key is ignored and there is no
  lookup (think: SMTP). Nobody can tell afterwards whether a call got through.

``set_failure_rate(rate)``: from now on, fail that fraction of ``apply`` calls with
a :class:`TransientError` before applying anything (``submit-demo --fail-rate F``,
``drill --fail-rate F``). Stored in ``external.db``, so every worker process sees
it; it overrides the ``external_failure_rate`` setting.

**Its answer** to a call is :func:`answer`: ``status`` says what this one call did
(``applied``, ``duplicate``, ``found``: it differs between a first run and a
recovery), ``reference`` is the service's answer to the *request* (think: the payment
reference), derived from the request alone, so a re-sent call, a replayed duplicate
and a lookup all give the same reference. A ``job.py`` that keeps the answer keeps
the ``reference``; the drill's oracle computes it without calling (drill/oracle.py).

``schedule_faults(fail=N, timeout=M)`` (the drill's nemesis): the next N calls, from
whichever process, are refused before anything is applied (``TransientError``, logged
``failed``), and the M after them are applied and then answered with a timeout
(:class:`InDoubt`, logged ``timeout``): the caller cannot tell whether they got through.
The counters live in ``config`` and are taken inside each call's own transaction, so
exactly N and M calls are hit, whatever the number of workers. With ``hold=True`` the
burst's first refusal is answered slowly, as a service that is down answers after its
timeout: logged at once, raised only once the drill has stopped that worker
(``release_hold``), so the stop meets the refusal on every machine, however loaded.
``answer_slowly(record_id, seconds)``: that record's next call is applied and answered late.
``answer_late(seconds, late_s)``: for the next ``seconds``, every call is applied and answered
``late_s`` late (a slow downstream: its callers' units take that much longer).

Every request is logged in ``calls``; every applied effect in
``effects(record_id, step, idempotency_key, applied_at)``. Verify any run with::

    sqlite3 data/external.db "SELECT record_id, step, COUNT(*) FROM effects GROUP BY 1, 2 HAVING COUNT(*) > 1"

Replacing it with a real service: http_service.py (the same interface over HTTP)
and docs/wiring-a-real-service.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

from .errors import InDoubt, JobError, StoreError, TransientError
from ..settings import EFFECT_KIND

EXTERNAL_DB = "external.db"

SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    idempotency_key TEXT,
    record_id       TEXT NOT NULL,
    step            TEXT NOT NULL DEFAULT '',
    kind            TEXT NOT NULL,   -- 'apply' or 'lookup'
    outcome         TEXT NOT NULL,   -- applied | duplicate | failed | timeout | found | missing
    pid             INTEGER NOT NULL,
    at              DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS effects (
    record_id       TEXT NOT NULL,
    step            TEXT NOT NULL DEFAULT '',   -- '' when a record has a single effect
    idempotency_key TEXT,
    applied_at      DOUBLE PRECISION NOT NULL,
    payload         TEXT
);
-- Finding an effect by its key or reference (the idempotent kind's dedupe, the
-- queryable kind's lookup). Not unique: a queryable or plain service applies every call.
CREATE INDEX IF NOT EXISTS effects_by_reference ON effects (idempotency_key);
-- A record's calls (the drill's refusal cap counts one caller's attempts in a row).
CREATE INDEX IF NOT EXISTS calls_by_record ON calls (record_id, step);
-- What the service was told to do (set_failure_rate), for every process.
CREATE TABLE IF NOT EXISTS config (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

INSERT_CALL = "INSERT INTO calls (idempotency_key, record_id, step, kind, outcome, pid, at) VALUES (?, ?, ?, ?, ?, ?, ?)"
INSERT_EFFECT = "INSERT INTO effects (record_id, step, idempotency_key, applied_at, payload) VALUES (?, ?, ?, ?, ?)"
SELECT_EFFECT_BY_KEY = "SELECT record_id, step, idempotency_key, applied_at, payload FROM effects WHERE idempotency_key = ?"
SELECT_FAILURE_RATE = "SELECT value FROM config WHERE name = 'failure_rate'"
SELECT_KIND = "SELECT value FROM config WHERE name = 'kind'"
# The first process to open external.db decides its kind; later ones read it.
INSERT_KIND = "INSERT INTO config (name, value) VALUES ('kind', ?) ON CONFLICT (name) DO NOTHING"

KINDS = ("idempotent", "queryable", "plain")


def reference(record_id: str, step: str, payload: Any) -> str:
    """The service's answer to a request, the same every time it is asked: a pure function of
    (record, step, payload), as a real API's reference is fixed by the first request under a key."""
    request = json.dumps([record_id, step, payload], sort_keys=True, default=repr)
    return "ref-" + hashlib.sha256(request.encode()).hexdigest()[:16]


def answer(status: str, record_id: str, step: str, payload: Any, **extra: Any) -> dict[str, Any]:
    """What ``apply`` and ``lookup`` return; the oracle's recording effect returns the same
    (without the key, which only the strategy knows)."""
    return {"status": status, "record_id": record_id, "step": step,
            "reference": reference(record_id, step, payload), **extra}


class NoLookup(JobError):
    """lookup() on a service that cannot be asked (idempotent or plain): a strategy bug."""
SET_FAILURE_RATE = """
INSERT INTO config (name, value) VALUES ('failure_rate', ?)
ON CONFLICT (name) DO UPDATE SET value = excluded.value"""
#: The drill's scheduled faults: how many of the next calls to refuse, or to time out after applying.
ADD_SCHEDULED = """
INSERT INTO config (name, value) VALUES (?, ?)
ON CONFLICT (name) DO UPDATE SET value = CAST(CAST(config.value AS INTEGER) + CAST(excluded.value AS INTEGER) AS TEXT)"""
SELECT_SCHEDULED = "SELECT name, value FROM config WHERE name IN ('fail_next', 'timeout_next') AND value != '0'"
TAKE_SCHEDULED = "UPDATE config SET value = CAST(CAST(value AS INTEGER) - 1 AS TEXT) WHERE name = ?"
#: A held refusal: 'next' until a refused call takes it ('held'); deleted by release_hold().
ARM_HOLD = "INSERT OR REPLACE INTO config (name, value) VALUES ('hold_refusal', 'next')"
TAKE_HOLD = "UPDATE config SET value = 'held' WHERE name = 'hold_refusal' AND value = 'next'"
SELECT_HOLD = "SELECT value FROM config WHERE name = 'hold_refusal'"
#: A held refusal is raised after this long at most, released or not (a drill that died meanwhile).
HOLD_MAX_S = 10.0
#: A call the drill asked to be answered slowly (``answer_slowly``: its config row, by record), and
#: the slow stretch (``answer_late``: until when, how late), read in one query per call.
SELECT_SLOW = "SELECT name, value FROM config WHERE name IN (?, 'slow_until', 'slow_answer')"
TAKE_SLOW = "DELETE FROM config WHERE name = ?"
SET_CONFIG = "INSERT OR REPLACE INTO config (name, value) VALUES (?, ?)"
SELECT_LAST_APPLY = "SELECT outcome FROM calls WHERE kind = 'apply' ORDER BY rowid DESC LIMIT 1"
#: How many of a design's attempts at one call the drill's faults may spend ('refusal_cap': the
#: strategy's CALL_ATTEMPTS less one; none: a design that retries until the call goes through).
SET_REFUSAL_CAP = "INSERT OR REPLACE INTO config (name, value) VALUES ('refusal_cap', ?)"
SELECT_REFUSAL_CAP = "SELECT value FROM config WHERE name = 'refusal_cap'"
#: The calls for one record and step since the last one that got through: a caller's attempts in a row.
SELECT_STREAK = """
SELECT COUNT(*) FROM calls
WHERE record_id = ? AND step = ? AND kind = 'apply'
  AND rowid > COALESCE((SELECT MAX(rowid) FROM calls WHERE record_id = ? AND step = ? AND kind = 'apply'
                          AND outcome IN ('applied', 'duplicate')), 0)"""


class ExternalService:
    def __init__(self, data_dir: Path, *, failure_rate: float = 0.0, busy_timeout_ms: int = 5000,
                 seed: int | None = None, durable: bool = True, kind: str | None = None) -> None:
        """``durable=False`` (benchmarks only) drops the service's own fsync per call:
        synchronous=OFF, so a benchmark sees the worker's overhead without the service's.

        ``kind``: what a new external.db becomes (default: the project's EFFECT_KIND);
        an existing one keeps the kind it was created with."""
        self.path = Path(data_dir) / EXTERNAL_DB
        self.failure_rate = failure_rate
        self._rng = random.Random(seed)
        try:
            self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=busy_timeout_ms / 1000)
            self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self.conn.execute("PRAGMA journal_mode = WAL")
            # The remote side is durable too: an acknowledged effect stays applied.
            self.conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'OFF'}")
            self.conn.executescript(SCHEMA)
            if kind is not None and kind not in KINDS:
                raise StoreError(f"unknown service kind {kind!r}; valid: {', '.join(KINDS)}")
            self.conn.execute(INSERT_KIND, (kind or EFFECT_KIND,))
            self.kind = str(self.conn.execute(SELECT_KIND).fetchone()[0])
            told = self.conn.execute(SELECT_FAILURE_RATE).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"external service database {self.path}: {exc}") from None
        if told is not None:
            self.failure_rate = float(told[0])

    def set_failure_rate(self, rate: float) -> None:
        """Fail this fraction of apply calls transiently, in every process using this data dir."""
        self.conn.execute(SET_FAILURE_RATE, (str(rate),))
        self.failure_rate = rate

    def faults_settled(self) -> bool:
        """No scheduled fault left to take, and the latest apply got through: a new burst of
        faults now cannot stack onto the last one (one call never meets more than one burst)."""
        if self.conn.execute(SELECT_SCHEDULED).fetchone() is not None:
            return False
        if self.conn.execute(SELECT_HOLD).fetchone() is not None:
            return False  # a held refusal not yet taken or released
        last = self.conn.execute(SELECT_LAST_APPLY).fetchone()
        return last is None or last[0] in ("applied", "duplicate")

    def schedule_faults(self, *, fail: int = 0, timeout: int = 0, hold: bool = False, cap: int | None = None) -> None:
        """The drill's nemesis: refuse the next ``fail`` calls; apply the ``timeout`` after
        them and answer with a timeout (in doubt). Seen by every process of this service.
        ``hold``: the first refusal is raised only after ``release_hold()`` (HOLD_MAX_S at most).
        ``cap``: a fault is never the caller's attempt number ``cap + 1`` or later at one call."""
        if cap is not None:
            self.conn.execute(SET_REFUSAL_CAP, (str(int(cap)),))
        if hold and fail:  # armed first: the burst's first refusal may come at once
            self.conn.execute(ARM_HOLD)
        for name, count in (("fail_next", fail), ("timeout_next", timeout)):
            if count:
                self.conn.execute(ADD_SCHEDULED, (name, str(int(count))))

    def answer_slowly(self, record_id: str, seconds: float) -> None:
        """The drill's nemesis: the next call for ``record_id`` is applied at once and answered only
        ``seconds`` later (HOLD_MAX_S at most), as a loaded service or a slow network answers: its
        caller holds that call in flight all the while. Seen by every process of this service."""
        self.conn.execute(SET_CONFIG, (f"slow:{record_id}", str(float(seconds))))

    def answer_late(self, seconds: float, late_s: float) -> None:
        """The drill's nemesis: for the next ``seconds`` (wall clock, seen by every process of this
        service), every call is applied at once and answered ``late_s`` late (HOLD_MAX_S at most), as
        a slow downstream answers: the units that call it take that much longer, mid-flight."""
        self.conn.execute(SET_CONFIG, ("slow_answer", str(float(late_s))))
        self.conn.execute(SET_CONFIG, ("slow_until", str(time.time() + float(seconds))))

    def release_hold(self) -> None:
        """The held refusal, if any, is answered now (and a hold not yet taken is dropped)."""
        self.conn.execute("DELETE FROM config WHERE name = 'hold_refusal'")

    def _held(self) -> None:
        """A held refusal's caller waits here, outside any transaction, until it is released."""
        deadline = time.monotonic() + HOLD_MAX_S
        while time.monotonic() < deadline and self.conn.execute(SELECT_HOLD).fetchone() is not None:
            time.sleep(0.005)

    def _scheduled_fault(self, record_id: str, step: str) -> str | None:
        """Inside the call's transaction: take one scheduled fault, if any ("fail_next" first). A
        call whose caller has already spent the attempts the drill may take from it goes through,
        and the fault waits for the next call: with workers side by side, one caller can meet two
        bursts in a row (the nemesis's next burst starts once any call got through), and a design
        that gives up after N attempts must not be made to give up."""
        due = {name for name, _ in self.conn.execute(SELECT_SCHEDULED)}
        if not due:
            return None
        cap = self.conn.execute(SELECT_REFUSAL_CAP).fetchone()
        if cap is not None and self.conn.execute(SELECT_STREAK, (record_id, step, record_id, step)).fetchone()[0] >= int(cap[0]):
            return None
        for name in ("fail_next", "timeout_next"):
            if name in due:
                self.conn.execute(TAKE_SCHEDULED, (name,))
                return name
        return None

    def apply(self, record_id: str, step: str, idempotency_key: str | None, payload: Any = None) -> dict[str, Any]:
        """One call. ``idempotency_key``: the dedupe key (idempotent), the reference
        (queryable), ignored (plain: such a service has no key)."""
        now, pid = time.time(), os.getpid()
        key = None if self.kind == "plain" else idempotency_key
        if self.failure_rate and self._rng.random() < self.failure_rate:
            self._busy_is_transient(INSERT_CALL, (key, record_id, step, "apply", "failed", pid, now))
            raise TransientError(f"external service unavailable (simulated) for {record_id}")
        self._busy_is_transient("BEGIN IMMEDIATE")
        try:
            fault = self._scheduled_fault(record_id, step)
            if fault == "fail_next":  # refused before anything is applied
                self.conn.execute(INSERT_CALL, (key, record_id, step, "apply", "failed", pid, now))
                held = self.conn.execute(TAKE_HOLD).rowcount == 1
                self.conn.execute("COMMIT")
                if held:
                    self._held()
                raise TransientError(f"external service unavailable (drill) for {record_id}")
            # Only the idempotent kind dedupes; the others apply every call they get.
            first = self.conn.execute(SELECT_EFFECT_BY_KEY, (key,)).fetchone() \
                if self.kind == "idempotent" and key is not None else None
            seen = first is not None
            late = self._answer_delay(record_id, now)
            if not seen:
                self.conn.execute(INSERT_EFFECT, (record_id, step, key, now, json.dumps(payload)))
            outcome = "duplicate" if seen else "applied"
            logged = "timeout" if fault == "timeout_next" else outcome
            self.conn.execute(INSERT_CALL, (key, record_id, step, "apply", logged, pid, now))
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        if late:  # applied; the answer comes late (outside the transaction: others go on)
            time.sleep(min(late, HOLD_MAX_S))
        if fault == "timeout_next":  # applied, but the answer never reaches the caller
            raise InDoubt(f"external service timed out after the call for {record_id} was sent (drill)")
        if first is not None:  # a duplicate is answered as the first request was (its reference)
            return answer(outcome, first[0], first[1], _payload(first[4]), idempotency_key=key)
        return answer(outcome, record_id, step, payload, idempotency_key=key)

    def _answer_delay(self, record_id: str, now: float) -> float:
        """Inside the call's transaction: how late this call is answered (seconds; 0: at once). A
        record's own slow answer is taken (it was for one call); the slow stretch lasts its time."""
        config = dict(self.conn.execute(SELECT_SLOW, (f"slow:{record_id}",)).fetchall())
        if f"slow:{record_id}" in config:
            self.conn.execute(TAKE_SLOW, (f"slow:{record_id}",))
            return float(config[f"slow:{record_id}"])
        if now < float(config.get("slow_until", 0)):
            return float(config.get("slow_answer", 0))
        return 0.0

    def _busy_is_transient(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """A write that could not get the service's lock (other callers held it past the busy
        timeout): a busy service's 503, nothing applied, the caller may retry."""
        try:
            self.conn.execute(sql, params)
        except sqlite3.OperationalError as exc:
            raise TransientError(f"external service busy (simulated): {exc}") from None

    def lookup(self, reference: str) -> dict[str, Any] | None:
        """Queryable kind only: the applied effect with this reference, or None if the
        earlier call never got through."""
        if self.kind != "queryable":
            raise NoLookup(f"the service is {self.kind}: it cannot be asked whether a call got through (lookup)")
        row = self.conn.execute(SELECT_EFFECT_BY_KEY, (reference,)).fetchone()
        record_id, step = (row[0], row[1]) if row else ("", "")
        self._busy_is_transient(INSERT_CALL, (reference, record_id, step, "lookup",
                                                 "found" if row else "missing", os.getpid(), time.time()))
        if row is None:
            return None
        return answer("found", row[0], row[1], _payload(row[4]), idempotency_key=row[2])

    def close(self) -> None:
        self.conn.close()


def _payload(stored: str | None) -> Any:
    return json.loads(stored) if stored is not None else None


#: Calls sent again: per key (a keyless call: per record and step), every send after the
#: first, except one re-send per timeout of that key (the caller never got the answer, so
#: sending again is what it must do).
REDONE_CALLS = """
SELECT COALESCE(SUM(MAX(0, n - 1 - t)), 0), COALESCE(SUM(t), 0) FROM (
    SELECT COUNT(*) AS n, SUM(outcome = 'timeout') AS t FROM calls
    WHERE kind = 'apply' AND outcome != 'failed'
    GROUP BY COALESCE(idempotency_key, record_id || '/' || step))"""


def verify(data_dir: Path, expected: set[tuple[str, str]]) -> dict[str, Any]:
    """Compare the applied effects with the expected (record_id, step) pairs.

    lost = expected with no effect; duplicate_effects = extra applications of a
    (record_id, step); redone_calls = apply calls repeating an earlier key.
    """
    conn = sqlite3.connect(Path(data_dir) / EXTERNAL_DB)
    try:
        counts = {(r, s): n for r, s, n in conn.execute(
            "SELECT record_id, step, COUNT(*) FROM effects GROUP BY record_id, step")}
        calls = conn.execute("SELECT COUNT(*) FROM calls WHERE kind = 'apply' AND outcome != 'failed'").fetchone()[0]
        redone, timeouts = conn.execute(REDONE_CALLS).fetchone()
        lookups = conn.execute("SELECT COUNT(*) FROM calls WHERE kind = 'lookup'").fetchone()[0]
        refused = conn.execute("SELECT COUNT(*) FROM calls WHERE kind = 'apply' AND outcome = 'failed'").fetchone()[0]
    finally:
        conn.close()
    return {
        "lost": len(expected - counts.keys()),
        "duplicate_effects": sum(n - 1 for n in counts.values() if n > 1),
        "unexpected_effects": len(counts.keys() - expected),
        "applied": len(counts),
        "redone_calls": int(redone or 0),
        "lookups": lookups,
        "requests": calls + lookups,
        # The service's own failures (the drill's service faults, --fail-rate): refused before
        # applying, or applied and answered with a timeout (whose re-send is not a redone call).
        "calls_refused": refused,
        "calls_timed_out": int(timeouts or 0),
    }


def applied_effects(data_dir: Path) -> list[tuple[str, str, Any]]:
    """Every applied effect in the order applied: (record_id, step, payload)."""
    rows = log_rows(data_dir, "SELECT record_id, step, payload FROM effects ORDER BY rowid")
    return [(r, s, json.loads(p) if p is not None else None) for r, s, p in rows]


def log_rows(data_dir: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of the service's own log (external.db), read in a connection of their own."""
    conn = sqlite3.connect(Path(data_dir) / EXTERNAL_DB)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()
