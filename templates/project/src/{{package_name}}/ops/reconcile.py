"""``reconcile``: the calls in doubt, for a person to check and answer.

Only plain calls are ever in doubt (effects.py). ``reconcile`` lists each one
(id, record, step, reference, since when); a person checks with the receiver and
answers ``--applied ID`` (it got through: never sent again) or ``--not-applied ID``
(it did not: the next ``run`` sends it, effects.Effects.send_released). Under
at least once the listed calls were already re-sent: the answer says whether the
re-send was a duplicate.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..runtime.effects import AWAITING_ANSWER, KIND, Ledger, doubt_rows, has_ledger, summary
from ..runtime.errors import JobError
from ..settings import Settings
from ..runtime.store import check_data_dir


def resolve(data_dir: Path, settings: Settings, key: str, *, applied: bool) -> str:
    """A person's answer for one in-doubt call; returns what happens next, in words."""
    ledger = open_ledger(data_dir, settings, missing=f"no call in doubt with id {key!r}: ")
    try:
        row = ledger.get(key)
        if row is None or row["status"] not in OPEN:
            raise JobError(f"no call in doubt with id {key!r}; `reconcile` lists them")
        return answer(ledger, row, applied=applied)
    finally:
        ledger.close()


#: A call still waiting for a person's answer.
OPEN = AWAITING_ANSWER


def answer(ledger: Ledger, row: dict[str, Any], *, applied: bool) -> str:
    """Record one answer for an open row; what happens next, in words."""
    if applied or row["status"] == "resent":
        # resent + not applied: the first send never arrived, so the re-send was the only one.
        ledger.set(row, "applied" if applied else row["status"], resolved=True)
        return "marked applied: it is never sent again" if applied else "marked: the re-send was the only one"
    ledger.set(row, "not_applied", resolved=True)
    return "marked not applied: the next `run` sends it"


def open_ledger(data_dir: Path, settings: Settings, *, missing: str = "") -> Ledger:
    """The ledger to answer from; a project whose calls are never in doubt, or no ledger yet, is exit 2."""
    if KIND != "plain":
        raise JobError(f"this project's external calls are {KIND}: no call is ever in doubt, nothing to reconcile")
    check_data_dir(data_dir, create=False)
    if not has_ledger(data_dir, settings):  # never create a store to answer a question about one
        raise JobError(f"{missing}{data_dir} holds no call ledger" + ("" if missing else ": no call was ever in doubt there"))
    return Ledger.open(data_dir, settings)


def doubt_listing(data_dir: Path, settings: Settings) -> dict[str, Any]:
    """For ``reconcile``: every call in doubt (and awaiting a re-send), oldest first."""
    check_data_dir(data_dir, create=False)  # a mistyped --data-dir is an error, not "nothing in doubt"
    listing: dict[str, Any] = {**summary(data_dir, settings), "calls": []}
    rows = doubt_rows(data_dir, settings)
    if rows is None:
        return listing
    listing["calls"] = [{"id": r["call_key"], "record_id": r["record_id"], "step": r["step"],
                         "reference": r["call_key"], "status": r["status"], "sends": int(r["sends"]),
                         "first_sent_at": r["first_at"], "in_doubt_since": r["doubt_at"],
                         "resolved_at": r["resolved_at"]}
                        for r in rows if r["resolved_at"] is None or r["status"] in ("not_applied", "releasing")]
    return listing


def render_listing(listing: dict[str, Any]) -> str:
    if listing["effect_kind"] != "plain":
        return (f"external calls: {listing['effect_kind']}: {listing['promise']}; "
                "no call is ever in doubt, nothing to reconcile")
    lines = [f"external calls: plain, {listing['plain_policy']}: {listing['promise']}"]
    if not listing["calls"]:
        lines.append("no call in doubt")
        return "\n".join(lines)
    lines.append(f"{'id':<32} {'record':<12} {'step':<8} {'state':<12} {'sends':>5}  since")
    for call in listing["calls"]:
        when = call["in_doubt_since"] or call["first_sent_at"]
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when)) if when else "-"
        state = {"in_doubt": "in doubt", "resent": "re-sent", "not_applied": "to send",
                 "releasing": "to send"}.get(call["status"], call["status"])
        lines.append(f"{call['id']:<32} {call['record_id']:<12} {call['step'] or '-':<8} {state:<12} "
                     f"{call['sends']:>5}  {stamp}")
    if listing["plain_policy"] == "at-most-once":
        lines.append("check each with the receiver, then: reconcile --applied ID  or  reconcile --not-applied ID "
                     "(the next run sends it); many at once: reconcile --file IDS --applied (or --not-applied), "
                     "or reconcile --from-export FILE (what the receiver applied)")
    else:
        lines.append("each re-sent call may have arrived twice; check with the receiver, then: "
                     "reconcile --applied ID (a duplicate) or --not-applied ID (the re-send was the only one)")
    return "\n".join(lines)
