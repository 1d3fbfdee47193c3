"""Claims between living workers: a holder that moves its unit on without renewing its heartbeat
(check ``heartbeat_kept``), and a unit taken from a holder that was still working (``taken_while_held``).

The drill's watch (claims_watch.py) wrote one ``claim`` op for each unit it saw moved on by the
same holder while the heartbeat stayed where it was. Such a holder looks silent while it works:
once one of its units outlasts the lease, another worker takes it over and both send its calls.

The service's log (runtime/service_log.py, ``resends``) shows the takeovers themselves: a call sent
again by another worker than its last sender. After a kill, a stop or a crash that is the takeover a
lease or a dead pid allows. It is a unit taken from a living holder when the first sender had called
the service within the lease before it and called again after it (it was working, and went on), its
call was answered (not a timeout, which leaves it in doubt for anyone), no store outage came between
the two sends (a holder that cannot write cannot keep its claim), and the drill had not submitted the record
again (resubmissions have their own check). Both then send the unit's calls: a claim that lets a second
worker in while the first holds it (a lease compared the wrong way, a guard dropped from the claim).
"""

from __future__ import annotations

from typing import Any

from ...runtime.service_log import Resend
from ..history import outages_between
from ..verdict import Failure, failure

#: Units named in the message (the count is exact).
EXAMPLES = 3


def check(ops: list[dict[str, Any]], lease_s: float) -> list[Failure]:
    seen = [o for o in ops if o.get("op") == "claim"]
    if not seen:
        return []
    first = seen[0]
    names = ", ".join(o["what"] for o in seen[:EXAMPLES]) + (", ..." if len(seen) > EXAMPLES else "")
    return [failure("heartbeat_kept", f"{len(seen)} claimed unit(s) moved on by their holder without renewing its "
                                      f"heartbeat ({names}; e.g. {first['what']} went from {first['progress'][0]} to "
                                      f"{first['progress'][1]} in {first['moves']} moves with its heartbeat still at "
                                      f"{first['heartbeat']}): a unit "
                                      f"that outlasts the lease ({lease_s:g} s) is then taken from a living worker and "
                                      "its calls sent twice; renew the heartbeat in the write that moves the unit on")]



def check_taken(ops: list[dict[str, Any]], resends: list[Resend], lease_s: float) -> list[Failure]:
    workers = {o["pid"] for o in ops if o.get("op") == "spawn"}
    again = {str(r) for o in ops if o.get("op") == "submit"
             for r in (o.get("record_ids") or []) + (o.get("same_ids") or [])}

    def unexplained(r: Resend) -> bool:
        return (r.pid in workers and r.before in workers  # two drilled workers (not the drill, not an operator)
                and r.record_id not in again  # not a record the drill submitted again
                and r.before_outcome != "timeout"  # the first send was answered: nothing in doubt
                and r.before_called_after and r.at - r.before_last_call_at <= lease_s  # its sender kept working
                and not outages_between(ops, r.before_applied, r.applied))  # no store outage between the sends

    taken = [r for r in resends if unexplained(r)]
    if not taken:
        return []
    first = taken[0]
    return [failure("taken_while_held", f"{len(taken)} call(s) sent again by another worker while the worker that "
                                        f"sent them was still working (e.g. {first.key}: first sent by pid "
                                        f"{first.before}, sent again by pid {first.pid}, and pid {first.before} made "
                                        "calls after that): a unit was taken from a living holder, with no kill, no "
                                        "lost answer and no store outage to explain it; both then send its calls")]
