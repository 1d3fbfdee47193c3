"""What the simulated service's own log (external.db's ``calls``) says about who sent what, read
back by the drill and its checks: a process's calls, the calls sent again and by whom, the records
applied twice. The service itself, its schema and ``verify``: external.py."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from .external import log_rows


def calls_by(data_dir: Path, pid: int) -> int:
    """Every call (applied, refused, looked up) the process ``pid`` made to the service."""
    return int(log_rows(data_dir, "SELECT count(*) FROM calls WHERE pid = ?", (pid,))[0][0])


def redone_by_process(data_dir: Path) -> dict[int, int]:
    """The redone calls (apply calls repeating an earlier key, less the re-sends a timeout
    allows: as verify() counts them) by the process that sent them."""
    rows = log_rows(data_dir, "SELECT COALESCE(idempotency_key, record_id || '/' || step), outcome, pid FROM calls"
                               " WHERE kind = 'apply' AND outcome != 'failed' ORDER BY rowid")
    seen: set[str] = set()
    excuses: dict[str, int] = {}  # timeouts of each key not yet followed by their one re-send
    redone: dict[str, list[int]] = {}  # the senders of each key's redone calls
    for key, outcome, pid in rows:
        if key in seen and excuses.get(key, 0):
            excuses[key] -= 1  # the re-send a timeout allows
        elif key in seen:
            redone.setdefault(key, []).append(pid)
        seen.add(key)
        excuses[key] = excuses.get(key, 0) + (outcome == "timeout")
    found: dict[int, int] = {}
    for key, pids in redone.items():
        # A timeout no re-send followed excuses the key's latest redone call (verify's count).
        for pid in pids[:max(0, len(pids) - excuses.get(key, 0))]:
            found[pid] = found.get(pid, 0) + 1
    return found


def calls_sent_after(data_dir: Path, after: int, record_ids: list[str], until: int | None = None) -> list[str]:
    """The records, of ``record_ids``, that the service was asked to apply (not refused) after
    its ``after``-th call (and up to its ``until``-th): one entry per call, in call order (the
    drill's resubmission check)."""
    if not record_ids:
        return []
    wanted = set(record_ids)
    rows = log_rows(data_dir, "SELECT record_id FROM calls WHERE rowid > ? AND rowid <= ? AND kind = 'apply'"
                               " AND outcome != 'failed' ORDER BY rowid", (after, until or 2 ** 62))
    return [rid for (rid,) in rows if rid in wanted]


def applications(data_dir: Path, record_ids: list[str], until: int | None = None) -> dict[str, list[tuple[int, int, str]]]:
    """How often the service applied each step of ``record_ids`` (up to its ``until``-th call), for the
    kinds that apply every call they do not refuse (plain, queryable; "timeout": applied, then the
    answer was lost), by ``"<record id>"`` (one step) or ``"<record id> step <step>"``: (the effect's
    place among all effects applied, 1-based, as the drill's ``done`` counts them; the caller's pid;
    the outcome), in order."""
    wanted = set(record_ids)
    found: dict[str, list[tuple[int, int, str]]] = {}
    rows = log_rows(data_dir, "SELECT record_id, step, pid, outcome FROM calls WHERE kind = 'apply'"
                               " AND outcome IN ('applied', 'timeout') AND rowid <= ? ORDER BY rowid", (until or 2 ** 62,))
    for place, (rid, step, pid, outcome) in enumerate(rows, 1):
        if rid in wanted:
            found.setdefault(f"{rid} step {step}" if step else rid, []).append((place, int(pid), outcome))
    return found


class Resend(NamedTuple):
    """A call sent again by another process than the one that sent it last (refused calls left out)."""

    key: str  # the call's key, or keyless its record and step
    record_id: str
    pid: int  # who sent it again, and when (the service's clock)
    at: float
    applied: int  # effects the service had applied before it (the drill's ``done`` at that moment)
    before: int  # who had sent it last, that call's outcome, and that process's last call of any kind before
    before_outcome: str
    before_last_call_at: float
    before_applied: int  # effects the service had applied before that call
    before_called_after: bool = False  # that process made a call (any) after this re-send: it was alive


def resends(data_dir: Path) -> list[Resend]:
    """Every call sent again by a process other than its last sender, in the service's order: who
    took over whose unit, when, and whether the one before was still calling."""
    rows = log_rows(data_dir, "SELECT COALESCE(idempotency_key, record_id || '/' || step), record_id, pid, outcome,"
                               " at, kind FROM calls ORDER BY rowid")
    last: dict[str, tuple[int, str, int]] = {}
    last_call: dict[int, float] = {}  # every call counts here: a refused one or a lookup is a sign of life too
    found: list[Resend] = []
    applied = 0
    for key, record_id, pid, outcome, at, kind in rows:
        if kind != "apply" or outcome == "failed":
            last_call[int(pid)] = float(at)
            continue
        before = last.get(key)
        if before is not None and before[0] != pid:
            found.append(Resend(key, record_id, int(pid), float(at), applied, before[0], before[1],
                                last_call.get(before[0], 0.0), before[2]))
        last[key] = (int(pid), outcome, applied)
        last_call[int(pid)] = float(at)
        applied += outcome in ("applied", "timeout")
    return [r._replace(before_called_after=last_call.get(r.before, 0.0) > r.at) for r in found]


def resent_from(data_dir: Path) -> dict[int, dict[int, int]]:
    """For each process, the processes whose calls it sent again, each with how many effects the
    service had applied before the first such re-send: whose units it took over, and when."""
    found: dict[int, dict[int, int]] = {}
    for r in resends(data_dir):
        found.setdefault(r.pid, {}).setdefault(r.before, r.applied)
    return found


def a_redone_call(data_dir: Path) -> str | None:
    """One idempotency key (or keyless record/step) that was sent more than once, for messages."""
    rows = log_rows(data_dir, "SELECT COALESCE(idempotency_key, record_id || '/' || step), COUNT(*) AS n FROM calls"
                               " WHERE kind = 'apply' AND outcome != 'failed' GROUP BY 1"
                               " HAVING COUNT(*) > 1 + SUM(outcome = 'timeout') ORDER BY 1 LIMIT 1")
    return f"{rows[0][0]} ({rows[0][1]} times)" if rows else None
