"""What a strategy keeps as history, complete and in order (check ``history``).

A strategy that keeps history exposes it read-only as ``stored_history(ctx)`` (strategy.py),
in this shape (every key but ``streams`` optional):

    {"unit": "order", "entry": "transition",          # words for the messages
     "initial": "new",                                  # a flow's first state
     "moves": [["new", "reserve", "reserved"], ...],    # a flow's legal (from, event, to)
     "operations": ["reserve", "charge", "notify"],      # events that are logged operations
     "streams": [{"id": "r0000001", "state": "done", "version": 3,
                  "entries": [{"seq": 1, "event": "reserve", "from": "new", "to": "reserved"},
                              {"seq": 2, "event": "charge", ..., "item": 0}, ...],
                  "operations": {"reserve": "confirmed", ...}}],   # each operation's log status
     "positions": [{"name": "effects", "position": 812, "head": 812}]}

The state machine gives each order's transition rows, state and version; event sourcing
gives each task stream's events (its version per event, and the record seq of each
RecordProcessed as ``item``) and its subscribers' positions. What must hold:

* each stream's ``seq`` runs 1, 2, 3, ... with no gap and no repeat (a transition row written
  in a later commit than its move, then lost to a kill, leaves a gap);
* with a ``version``, the stream holds exactly that many entries (the last one's is missing
  otherwise);
* with ``moves``: the first entry leaves ``initial``, each starts where the one before
  ended, each is a legal move, and the last ends in the stream's ``state``;
* an entry whose event is an ``operation`` has that operation ``confirmed`` in the stream's
  log (a state-machine step whose transition is committed but whose call's confirmation,
  written in a commit of its own, was lost to a kill: the step log says "maybe called" of a
  step the flow has passed);
* entries with an ``item`` count 0, 1, 2, ... (records in input order, none twice);
* every position is at the head of its log once the run is over (no event left unread).
"""

from __future__ import annotations

from typing import Any

from ..verdict import Failure, failure


def stream_problem(stream: dict[str, Any], history: dict[str, Any]) -> str | None:
    """What is wrong with one stream's history, in words (None: complete and in order)."""
    entry = history.get("entry", "entry")
    entries = stream.get("entries", [])
    seqs = [e["seq"] for e in entries]
    if seqs != list(range(1, len(seqs) + 1)):
        missing = sorted(set(range(1, max(seqs, default=0) + 1)) - set(seqs))
        if missing:
            return f"{entry} {missing[0]} is missing (it holds {_few(seqs)})"
        return f"its {entry}s are numbered {_few(seqs)}, not 1, 2, 3, ..."
    version = stream.get("version")
    if version is not None and version != len(entries):
        return (f"it is at version {version} but holds {len(entries)} {entry}(s)"
                + (f" (the last {version - len(entries)} missing)" if version > len(entries) else ""))
    moves = history.get("moves")
    if moves is not None and entries:
        legal = {(source, event): target for source, event, target in moves}
        state = history.get("initial")
        for e in entries:
            if e.get("from") != state:
                return f"{entry} {e['seq']} starts in {e.get('from')!r}, but the one before ended in {state!r}"
            if legal.get((e.get("from"), e.get("event"))) != e.get("to"):
                return f"{entry} {e['seq']} ({e.get('from')} --{e.get('event')}--> {e.get('to')}) is not a legal move"
            state = e.get("to")
        if stream.get("state") is not None and state != stream["state"]:
            return f"its last {entry} ends in {state!r}, but it is in state {stream['state']!r}"
    logged: dict[str, str] = stream.get("operations") or {}
    operations = set(history.get("operations", ())) if "operations" in stream else set()
    for e in entries:
        if e.get("event") in operations and logged.get(e["event"]) != "confirmed":
            status = logged.get(e["event"])
            return (f"{entry} {e['seq']} ({e['event']}) is committed, but its step is "
                    + (f"still {status!r} in the step log" if status else "not in the step log"))
    items = [e["item"] for e in entries if "item" in e]
    if items != list(range(len(items))):
        return f"its records come as {_few(items)}, not 0, 1, 2, ... (a record twice, skipped or out of order)"
    return None


def check_history(history: dict[str, Any] | None) -> list[Failure]:
    if history is None:
        return []  # the strategy keeps no history of its own
    unit, entry = history.get("unit", "stream"), history.get("entry", "entry")
    bad = [(s["id"], problem) for s in history.get("streams", [])
           if (problem := stream_problem(s, history)) is not None]
    found: list[Failure] = []
    if bad:
        sid, problem = bad[0]
        found.append(failure("history", (
            f"{len(bad)} of {len(history['streams'])} {unit}s have an incomplete or disordered history, e.g. "
            f"{unit} {sid}: {problem}; write each {entry}, and the log of what it records, in the same commit "
            "as the change itself")))
    behind = [p for p in history.get("positions", []) if p["position"] != p["head"]]
    for p in behind:
        found.append(failure("history", (
            f"the {p['name']} subscriber's position is {p['position']}, the log's head {p['head']}, after the "
            "run ended: " + ("events it never read" if p["position"] < p["head"] else "a position past the last "
                             "event") + "; commit the position with the work it stands for")))
    return found


def _few(values: list[int]) -> str:
    return ", ".join(map(str, values[:8])) + (", ..." if len(values) > 8 else "") if values else "nothing"
