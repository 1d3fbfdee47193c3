"""The drill's oracle: what a correct run must have produced, from job.py alone.

``python -m <package>.oracle --input RECORDS.json --output ORACLE.json`` runs in a
clean process of its own (the drill starts it; nothing of the strategy module is
imported): it calls :func:`job.process_record` on every input record with a
*recording* effect (no external call is made; it answers what the simulated service
would, ``external.answer``: the same ``reference``) and writes, per record, the
result and every effect the job asked for, in order, plus the steps job.py declares.

Run twice by the drill, in different record orders and with the clock of the
second run moved (``--shuffle-seed``, ``--clock-shift-s``): a job that keeps
state across records, reads the clock or draws random numbers gives a different
answer for some record, and the drill names it (check ``nondeterministic_job``).

JSON in, JSON out (never pickle). Bad input: one ``error:`` line, exit 2.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import random
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from ..runtime.errors import JobError
from ..runtime.external import answer
from ..runtime.safe_read import read_json


def shift_clock(seconds: float) -> None:
    """Move this process's wall clock: a result that depends on the time then differs
    from the other oracle run's, even for a job that rounds the time to the second
    or the day. Patched before process_record runs, for ``time`` and ``datetime``."""
    real_time, real_time_ns = time.time, time.time_ns
    shift_ns = int(seconds * 1e9)
    time.time = lambda: real_time() + seconds  # type: ignore[assignment]
    time.time_ns = lambda: real_time_ns() + shift_ns  # type: ignore[assignment]
    delta = datetime.timedelta(seconds=seconds)

    class ShiftedDateTime(datetime.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return super().now(tz) + delta

        @classmethod
        def utcnow(cls) -> Any:
            return super().utcnow() + delta

        @classmethod
        def today(cls) -> Any:
            return super().today() + delta

    class ShiftedDate(datetime.date):
        @classmethod
        def today(cls) -> Any:
            return super().today() + delta

    datetime.datetime = ShiftedDateTime  # type: ignore[misc]
    datetime.date = ShiftedDate  # type: ignore[misc]


def load_job() -> ModuleType:
    """job.py, imported only now: after shift_clock, so even ``from time import time``
    in job.py sees the moved clock."""
    return importlib.import_module(f"{__package__.rpartition('.')[0]}.job")  # <package>.job, beside drill/


#: What ``effect()`` answers in the run: ``service``, the simulated service's answer (its
#: deterministic ``reference`` included, runtime/external.py), for strategies whose effect calls
#: the service at once; ``recorded``, for those that only record the effect to send it later
#: (event sourcing: the command side never calls out), whose job sees no service answer.
ANSWERS = ("service", "recorded")


def compute(job: ModuleType, record: dict[str, Any], answers: str = "service") -> dict[str, Any]:
    """One record: the job's result and EVERY effect it asked for, in order, as [step, payload]
    pairs (two calls in one step are two entries: the drill counts them, verdict.py)."""
    effects: list[list[Any]] = []

    def effect(payload: Any = None, step: str = "") -> dict[str, Any]:
        effects.append([step or job.RECORD_STEP, payload])
        if answers == "recorded":
            return {"status": "recorded", "record_id": record.get("record_id"), "step": step}
        # What the service answers a first call (a re-sent one gets the same reference).
        return answer("applied", str(record.get("record_id")), step or job.RECORD_STEP, payload)

    try:
        # work_ms only sleeps (it stands in for work); the answer must not depend on it.
        result: Any = job.process_record(record, effect, work_ms=0.0)
    except Exception as exc:  # the run marks such a record failed; the oracle says why
        return {"error": f"{type(exc).__name__}: {exc}", "effects": effects}
    step_payload = getattr(job, "step_payload", None)
    if step_payload is not None:  # a flow: the other steps send declared payloads
        for step in job.STEPS:
            if step != job.RECORD_STEP:
                effects.append([step, step_payload(step, record)])
    return {"result": result, "effects": effects}


def run(records: list[dict[str, Any]], shuffle_seed: int | None, answers: str = "service") -> dict[str, Any]:
    job = load_job()
    order = list(range(len(records)))
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(order)
    computed: dict[str, Any] = {}
    for i in order:
        computed[str(records[i]["record_id"])] = compute(job, records[i], answers)
    # Round-trip through JSON now, so results compare as the stored (JSON) ones do.
    return json.loads(json.dumps({
        "steps": list(job.STEPS), "record_step": job.RECORD_STEP, "initial_state": job.INITIAL_STATE,
        "order": "input order" if shuffle_seed is None else f"shuffled (seed {shuffle_seed})",
        "records": computed,
    }, default=repr))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {__package__}.oracle",
                                description="recompute every record's result with job.py, calling nothing")
    p.add_argument("--input", type=Path, required=True, help="a JSON list of records (each with a record_id)")
    p.add_argument("--output", type=Path, required=True, help="where to write the oracle's JSON")
    p.add_argument("--shuffle-seed", type=int, default=None, help="process the records in a shuffled order")
    p.add_argument("--clock-shift-s", type=float, default=0.0, help="move this process's wall clock")
    p.add_argument("--answers", choices=ANSWERS, default="service",
                   help="what effect() answers: the simulated service's answer, or 'recorded' (event sourcing)")
    args = p.parse_args(argv)
    try:
        records = read_json(args.input, "oracle input", error=JobError)  # bounded (safe_read.py)
    except JobError as exc:
        print(f"error: --input {exc}", file=sys.stderr)
        return 2
    if not isinstance(records, list) or not all(isinstance(r, dict) and "record_id" in r for r in records):
        print(f"error: --input {args.input}: expected a JSON list of objects with a 'record_id'", file=sys.stderr)
        return 2
    if args.clock_shift_s:
        shift_clock(args.clock_shift_s)
    report = run(records, args.shuffle_seed, args.answers)
    tmp = args.output.with_name(args.output.name + ".tmp")
    tmp.write_text(json.dumps(report, sort_keys=True), encoding="utf-8")
    tmp.replace(args.output)  # the drill never reads half a file
    return 0


if __name__ == "__main__":
    sys.exit(main())
