"""One fault event in words, for the text report and the drill's progress lines (schedule.describe)."""

from __future__ import annotations

from typing import Any

from .bad_input import FILE_FLAWS
from .fault_kinds import FINAL_KINDS


def describe(event: dict[str, Any]) -> str:
    """One event in words, for the text report."""
    where = f"at {event['at']:.0%}" if "at" in event else (
        f"in window {event['window']} (pass {event['pass']})" if "window" in event else
        f"at persistence point {event['point']}" if "point" in event else
        f"at {event['crash_point']} (just before that {_point_words(event['crash_point'])})"
        if "crash_point" in event else
        "after the workers end" if event["kind"] in FINAL_KINDS else "before the workers start")
    extra = {"service-fail": lambda e: f"{e['calls']} call(s) refused",
             "service-timeout": lambda e: f"{e['calls']} call(s) applied, then timed out",
             "service-slow": lambda e: f"every call answered {e['late_ms']} ms late for {e['seconds']:g} s",
             "resubmit-same": lambda e: f"{e['count']} record(s) under the same correlation id",
             "resubmit-new": lambda e: (f"{e['count']} record(s) not done yet, the last queued first, under a new "
                                        "correlation id" if e.get("pending") else
                                        f"{e['count']} done record(s) under a new correlation id")
                                       + (" (the latest done)" if e.get("latest") else ""),
             "store-outage": lambda e: f"write lock held until the workers stalled {e['hold_s']} s" + (
                 f", once every record so far was done, {e['count']} new record(s) published meanwhile"
                 if e.get("idle") else ""),
             "new-input": lambda e: f"{e['count']} new record(s) submitted while the workers run",
             "malformed-input": lambda e: ("malformed messages published to the queue" if e.get("input") == "queue"
                                          else "files with a flaw (" + ", ".join(e.get("flaws") or FILE_FLAWS)
                                          + ") given to submit --file, each as JSON lines, CSV and a JSON list"),
             "submit-crash": lambda e: "killed just before its last persistence point, then submitted again",
             "reconcile": lambda e: ("calls in doubt answered " + ("one by one" if e.get("how") == "each"
                                                                    else "from the service's export")
                                     + "; the next runs killed " + ", then ".join(
                                         e.get("resend_kills") or [e.get("resend_kill", "after")])
                                     + " their first re-send"),
             "second-start": lambda e: "the job started again on the data directory of a running worker",
             "scale-out": lambda e: "one more worker started beside the running ones",
             "rebuild": lambda e: f"the projection rebuilt from the events, then {e['count']} new record(s) and a last run",
             "second-outage": lambda e: "the job alone on new input, its store taken away twice, within its limit",
             "hung-worker": lambda e: "the job once more with a short lease, its worker hung while it holds a unit",
             "upgrade": lambda e: f"the store schema version {e['from']} left mid-run, continued by this code with crashes",
             "sigkill": lambda e: (e.get("moment", "") + (f", then the newest checkpoint {e['damage']}"
                                                          if e.get("damage") else "")) if "at" in e else
                                  ("the worker that recovers from the damaged checkpoint"
                                   if e.get("after") == "damage" else ""),
             "sigterm": lambda e: e.get("moment", ""),
             "host-lost": lambda e: "with every worker on its host, their successors on another, the claims freed by the lease alone"}.get(event["kind"])
    detail = extra(event) if extra else ""
    return f"#{event['n']} {event['kind']} {where}" + (f": {detail}" if detail else "")


def _point_words(crash_point: str) -> str:
    kind = crash_point.partition(":")[0].partition("@")[0]
    return {"call": "call goes out", "state": "write of the durable state"}.get(kind, f"{kind} point")
