"""The projection rebuilt from the events by an operator (check ``rebuild``).

An event-sourced design rebuilds a read model from its events (after a bug in the projection, a new
column): the rebuild reads events only, never calls the external service, and leaves every other
subscriber where it was, so the run after it sends only the work that came since. The drill's rebuild
fault (runner.py) runs `rebuild` once the workers have ended, records its exit and the calls made
meanwhile and how the rebuilt projection differs from the one the workers left (a live projection
that lost rows is repaired by the rebuild: the difference is the finding), then submits new input and
runs the job once more; what that run sends again is judged by the usual checks (duplicate_effects,
redone_calls). Then rebuilds killed mid-way (rebuilder.KILLED_AT), each followed by new input, the
job's run and a whole rebuild: a killed rebuild must leave a consistent, shorter projection that the
run completes, so the whole rebuild after it finds nothing to repair.
"""

from __future__ import annotations

from typing import Any

from ..verdict import Failure, failure


def check(ops: list[dict[str, Any]]) -> list[Failure]:
    found = []
    after_kill = None  # the write the last killed rebuild died before: what this one compares follows it
    for o in ops:
        if o.get("op") != "fault" or o.get("kind") != "rebuild":
            continue
        killed = o.get("killed_at") is not None  # armed to die mid-way: killed, or done before its point
        if o.get("code") not in ((0, -9) if killed else (0,)):
            found.append(failure("rebuild", f"`rebuild` with every worker stopped exited {o.get('code')}"
                                            f"{' (armed to die before its write ' + str(o['killed_at']) + ')' if killed else ''}: "
                                            f"{o.get('message') or 'no message'}"))
        differed = {k: o.get(k + "_before") or [] for k in ("missing", "extra")}
        if any(differed.values()):
            what = ", ".join(f"{len(v)} {k}" for k, v in differed.items() if v)
            example = next(v[0] for v in differed.values() if v)
            cause = ("live projection" if after_kill is None else
                     f"projection left by a rebuild killed before its write {after_kill}, and the job's run after it,")
            found.append(failure("rebuild", f"the projection as the workers left it differed from its rebuild from "
                                            f"the events ({what} result row(s), e.g. record {example}; a changed row counts as both): the "
                                            f"{cause} lost, doubled or changed what its events say (the "
                                            "rebuild repaired it)"))
        after_kill = o.get("killed_at")
        if o.get("calls"):
            found.append(failure("rebuild", f"`rebuild` made {o['calls']} external call(s): a rebuild reads "
                                            "events only, it must never call the service"))
    return found
