"""Each store outage gets the whole store_outage_s (check ``second_outage``).

The second-outage fault (second_outage.py) ran one worker with a short limit through two store
outages, the second after a commit. The drill measured, for each, how long it held the store away
after the worker's first failed try (the worker's probe counts them): all the worker could have
counted as that outage. A worker that exited 4 ("the store stayed unreachable too long") while no
outage lasted that long for it counted time that was not one outage: a clock kept from an earlier
outage the commit had ended, or started before the store went away. Another exit code than 0 is
the worker failing outright.
"""

from __future__ import annotations

from typing import Any

from ...runtime.errors import EXIT_STORE_UNAVAILABLE
from ..verdict import Failure, failure


def check(ops: list[dict[str, Any]]) -> list[Failure]:
    found = []
    for o in ops:
        if o.get("op") != "fault" or o.get("kind") != "second-outage" or o.get("code") in (0, None):
            continue
        held = [float(h["held_s"]) - float(h["seen_s"] or h["held_s"]) for h in o.get("outages", [])]
        limit = float(o["limit_s"])
        during = {1: "the first outage", 2: "the second outage"}.get(o.get("ended_in"), "its run")
        if o["code"] == EXIT_STORE_UNAVAILABLE and all(h < limit for h in held):
            second = (f"; the second began {o['apart_s']:g} s after the first, once the worker had committed again"
                      if o.get("apart_s") is not None else "")
            found.append(failure("second_outage", f"a worker run with store_outage_s={limit:g} gave up on the store "
                                                  f"(exit {EXIT_STORE_UNAVAILABLE}) during {during}, though each "
                                                  "outage lasted less than that from its first failed try "
                                                  f"({', '.join(f'{h:.2f} s' for h in held)}"
                                                  f"{second}): an outage's clock must start when the store goes "
                                                  "away and start again once the worker commits, so each outage "
                                                  "gets the whole limit"))
        elif o["code"] != EXIT_STORE_UNAVAILABLE:
            found.append(failure("second_outage", f"a worker run through two short store outages (store_outage_s="
                                                  f"{limit:g}) exited with code {o['code']} during {during}, where "
                                                  "riding them out ends in 0 (see drill-workers.log)"))
    return found
