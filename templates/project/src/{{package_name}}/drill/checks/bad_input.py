"""Input that can never be worked on, refused whole (check ``bad_input``).

The malformed-input fault (drill/bad_input.py) sent flawed files to ``submit --file`` or
malformed messages to the queue. A file must be refused with exit 2, a message and no
traceback (one queued all the same shows as its records' unexpected effects, or undone); each malformed message must end in the queue's
dead-letter queue (never dropped silently, never worked on, never put back to come round
again) and no well-formed message beside it (that work would be lost). A message put back for ever
keeps the run from ending: the ``stalled`` check says so.
"""

from __future__ import annotations

from typing import Any

from ..verdict import Failure, failure


def check(ops: list[dict[str, Any]], report: dict[str, Any]) -> list[Failure]:
    sent = [o for o in ops if o.get("op") == "fault" and o.get("kind") == "malformed-input"]
    # A flawed file queued all the same shows in the run too: its records, ids of their own, are
    # then done (unexpected_effects) or left undone (incomplete).
    found = [f for o in ops if o.get("op") == "malformed-answers" for case in o.get("cases", []) for f in _file(case)]
    published = [name for o in sent if o.get("how") == "queue" for name in o.get("published", [])]
    dead = report.get("dead_lettered")
    if published and dead is not None:
        found += _queue(published, dead, report.get("queue"))
    if dead and dead.get("other"):
        found.append(failure("bad_input", f"{dead['other']} well-formed message(s) ended in the dead-letter queue "
                                          f"{report.get('queue')}.rejected, their work never done (e.g. correlation "
                                          f"id {dead['other_ids'][0]})"))
    return found


def _file(case: dict[str, Any]) -> list[Failure]:
    what = f"a file whose records have a flaw ({case['flaw']}) given to `submit --file`"
    if case["exit"] != 2 or case["traceback"]:
        said = case["said"].splitlines()[-1] if case["said"] else "nothing"
        how = "a traceback" if case["traceback"] else f"exit {case['exit']}"
        return [failure("bad_input", f"{what} was answered with {how}, not a refusal with exit 2 "
                                     f"({case['file']}; it said: {said})")]
    return []


def _queue(published: list[str], dead: dict[str, Any], queue: Any) -> list[Failure]:
    """Each malformed message dead-lettered. Not "exactly once": dead-lettering is at least once
    (a broker restarted mid-way may keep the message and dead-letter it again), and so is the
    drill's own publish (one cut off by a restart may have gone through before it is tried again)."""
    counts = dead.get("malformed", {})
    missing = [name for name in published if counts.get(name, 0) == 0]
    if not missing:
        return []
    return [failure("bad_input", f"{len(missing)} of {len(published)} malformed messages never reached the "
                                 f"dead-letter queue {queue}.rejected (dropped, or worked on), e.g. the one with a "
                                 f"flaw {missing[0]!r}")]
