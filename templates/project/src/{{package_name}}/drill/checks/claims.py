"""A holder that moves its unit on without renewing its heartbeat (check ``heartbeat_kept``).

The drill's watch (claims_watch.py) wrote one ``claim`` op for each unit it saw moved on by the
same holder while the heartbeat stayed where it was. Such a holder looks silent while it works:
once one of its units outlasts the lease, another worker takes it over and both send its calls.
"""

from __future__ import annotations

from typing import Any

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
                                      f"{first['progress'][1]} in {first['moves']} moves with its heartbeat still at {first['heartbeat']}): a unit "
                                      f"that outlasts the lease ({lease_s:g} s) is then taken from a living worker and "
                                      "its calls sent twice; renew the heartbeat in the write that moves the unit on")]
