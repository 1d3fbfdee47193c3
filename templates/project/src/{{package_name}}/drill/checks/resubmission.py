"""The checks only the fault schedule makes possible: pure functions over the report.

They read what the history recorded (report_data.py copies it into the report: the
resubmissions and their answers, the reused keys), never how a fault was made.

* ``resubmission``: part of the input submitted again under its correlation id must be
  answered as a repeat (the first submission's tasks, nothing queued); records already
  done, under a new correlation id, must be answered as the strategy promises
  (``RESUBMITTED_RECORD``: ``refused``, or ``deduped``: queued, and then neither applied
  nor stored twice, which the effects and results checks hold it to, and not sent to the
  service again: ``sent_again``, the calls asked for them after they came again); records not
  done yet, under a new correlation id (``pending``), must be refused where records are refused
  (the store holds them already), and elsewhere must not be applied twice unless a kill, a lost
  answer or a store outage made the second send a re-send in doubt (``applied_twice``).
* ``key_reuse``: an idempotency key sent again with a different request must be refused.
"""

from __future__ import annotations

from typing import Any

#: The check ids of this module (verdict.CHECKS lists them too).
NEMESIS_CHECKS = ("resubmission", "key_reuse")

PROMISES = {"refused": "refused (a record already queued here)", "deduped": "queued as a no-op (its business key)"}


def check(report: dict[str, Any], strategy: Any) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    promised = getattr(strategy, "RESUBMITTED_RECORD", "new-work")
    for r in report.get("resubmissions", []):
        cid, n, outcome = r["correlation_id"], r["records"], r["outcome"]
        said = f": {r['message']}" if r.get("message") else ""
        if r["same"] and outcome not in ("repeat", "published"):
            found.append(_failure("resubmission", f"{n} record(s) of the input submitted again under its correlation "
                                                  f"id {cid} were {outcome}{said}; a repeat must be answered with the "
                                                  "first submission's tasks and queue nothing"))
        elif not r["same"] and outcome != {"refused": "refused", "deduped": "added"}.get(promised, outcome):
            which = "queued and not done yet" if r.get("pending") else "already done"
            found.append(_failure("resubmission", f"{n} record(s) {which}, submitted again under the new "
                                                  f"correlation id {cid}, were {outcome}{said}; the "
                                                  f"{getattr(strategy, 'NAME', '?')} strategy promises them "
                                                  f"{PROMISES.get(promised, promised)}"))
        elif r.get("pending") and r.get("applied_twice"):
            found.append(_failure("resubmission", f"{r['applied_twice']} of {n} record(s) not done yet, submitted "
                                                  f"again under the new correlation id {cid}, were applied twice "
                                                  f"({r['applied_twice_example']}), the first caller alive, its call "
                                                  "answered and its store reachable: a task must wait while another "
                                                  "task of its business key runs, and then find it done"))
        elif not r["same"] and promised == "deduped" and r.get("sent_again"):
            found.append(_failure("resubmission", f"{n} record(s) already done, submitted again under the new "
                                                  f"correlation id {cid}, were sent to the service again "
                                                  f"({r['sent_again']} call(s), e.g. record {r['sent_again_example']}); "
                                                  "their business key must make the new tasks no-ops, whichever "
                                                  "worker runs them and whenever it started"))
    for k in report.get("key_reuse", []):
        if k["outcome"] != "refused":
            found.append(_failure("key_reuse", f"the idempotency key {k['key']} was sent again with a different "
                                               f"request and was {k['outcome']} ({k['message']}); it must be refused: "
                                               "answering with the first request's result hides the conflict"))
    return found


def _failure(check_id: str, message: str) -> dict[str, str]:
    assert check_id in NEMESIS_CHECKS, check_id
    return {"check": check_id, "message": message}
