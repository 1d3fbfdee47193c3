"""The simulated external service's verdict, from ``external.db`` (read-only):
applied effects, (record, step) pairs applied twice, expected ones not applied, and
what became of the calls a strategy recorded as prepared but not done."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor.inspect.sources import EXTERNAL_DB, InspectError, SQLiteSource

EXAMPLES = 3


def verdict(data_dir: Path, expected: set[tuple[str, str]] | None, complete: bool,
            in_doubt: list[dict[str, str]]) -> dict[str, Any]:
    path = data_dir / EXTERNAL_DB
    if not path.exists():
        for d in in_doubt:
            d["external"] = "not applied"
        return {"present": False, "applied": 0, "duplicates": 0, "duplicate_examples": [], "calls": 0,
                "lookups": 0, "expected": len(expected) if expected is not None else None,
                "missing": len(expected) if expected is not None else None, "missing_examples": [],
                "lost": len(expected) if expected and complete else 0, "in_doubt_applied": 0,
                "text": "no external call yet (external.db does not exist)"}
    source = SQLiteSource(path)
    try:
        tables = set(source.tables())
        if not {"effects", "calls"} <= tables:
            raise InspectError(f"{path} is not the simulated external service's log (no effects and calls "
                               "tables); is this a generated project's data directory?")
        pairs = {(r["record_id"], r["step"]): int(r["n"]) for r in source.rows(
            "SELECT record_id, step, COUNT(*) AS n FROM effects GROUP BY record_id, step")}
        calls = source.rows("SELECT kind, COUNT(*) AS n FROM calls GROUP BY kind")
        keys = [d["key"] for d in in_doubt]
        applied_keys: set[str] = set()
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            applied_keys |= {r["idempotency_key"] for r in source.rows(
                f"SELECT idempotency_key FROM effects WHERE idempotency_key IN ({', '.join('?' * len(chunk))})", chunk)}
    finally:
        source.close()
    by_kind = {r["kind"]: int(r["n"]) for r in calls}
    twice = sorted((k, n) for k, n in pairs.items() if n > 1)
    missing = sorted(expected - pairs.keys()) if expected is not None else []
    lost = len(missing) if complete else 0
    for d in in_doubt:
        d["external"] = "applied" if d["key"] in applied_keys else "not applied"
    out: dict[str, Any] = {
        "present": True, "applied": len(pairs), "duplicates": sum(n - 1 for _, n in twice),
        "duplicate_examples": [{"record_id": r, "step": s, "times": n} for (r, s), n in twice[:EXAMPLES]],
        "calls": by_kind.get("apply", 0), "lookups": by_kind.get("lookup", 0),
        "expected": len(expected) if expected is not None else None,
        "missing": len(missing) if expected is not None else None,
        "missing_examples": [{"record_id": r, "step": s} for r, s in missing[:EXAMPLES]],
        "lost": lost, "in_doubt_applied": len(applied_keys),
    }
    out["text"] = _words(out, complete)
    return out


def _words(v: dict[str, Any], complete: bool) -> str:
    parts = [f"{v['applied']} effects applied", f"{v['duplicates']} (record, step) applied twice"]
    if v["duplicate_examples"]:
        e = v["duplicate_examples"][0]
        parts[-1] += f" (e.g. {e['record_id']}{'/' + e['step'] if e['step'] else ''} {e['times']} times)"
    if v["expected"] is not None:
        if complete:
            parts.append(f"{v['lost']} of {v['expected']} expected lost" + (
                f" (e.g. {v['missing_examples'][0]['record_id']})" if v["lost"] else ""))
        else:
            parts.append(f"{v['missing']} of {v['expected']} expected not applied yet (the run is not finished)")
    parts.append(f"{v['calls']} calls, {v['lookups']} lookups")
    return "; ".join(parts)
