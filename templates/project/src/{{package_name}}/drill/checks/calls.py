"""Every call job.py asks for, counted per record and step (check ``calls_per_step``).

The oracle records EVERY ``effect()`` call of ``process_record``, in order (oracle.py). A
strategy makes one external call per (record, step), with an idempotency key derived from
them: a second call in the same step is either dropped silently by an idempotent service
(the same key: answered ``duplicate``, never applied) or applied twice by the others. Either
way the job asks for something no strategy can deliver, so the oracle's own count decides,
whatever the service did with it. A call in a step job.STEPS does not declare is named too.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..verdict import Failure, failure, show


def check_calls_per_step(oracle: dict[str, Any]) -> list[Failure]:
    """One call per (record, step), in the steps job.STEPS declares."""
    declared = set(oracle["steps"])
    twice: list[tuple[str, str, int]] = []
    undeclared: list[tuple[str, str]] = []
    for rid, computed in sorted(oracle["records"].items()):
        counts = Counter(step for step, _ in computed.get("effects", []))
        twice += [(rid, step, n) for step, n in sorted(counts.items()) if n > 1]
        undeclared += [(rid, step) for step in sorted(counts) if step not in declared]
    found: list[Failure] = []
    if twice:
        rid, step, n = twice[0]
        payloads = [p for s, p in oracle["records"][rid]["effects"] if s == step]
        found.append(failure("calls_per_step", (
            f"job.py asks for {n} calls in one step for {len({r for r, _, _ in twice})} records, e.g. record {rid} "
            f"step {step!r}: {', '.join(show(p, 60) for p in payloads[:3])}; a strategy makes one call per record "
            "and step (its idempotency key is theirs), so the service drops or doubles the others: declare a "
            "step for each call in job.STEPS and pass it, effect(payload, step=...)")))
    if undeclared:
        rid, step = undeclared[0]
        found.append(failure("calls_per_step", (
            f"job.py calls effect() with step {step!r}, which job.STEPS does not declare ({sorted(declared)}), "
            f"for {len(undeclared)} records, e.g. record {rid}; add the step to job.STEPS")))
    return found
