"""The malformed-input fault: input that can never be worked on arrives while the workers run.

Producers send broken input: a line cut off when they crashed mid-write, a record without
its id, a field of the wrong type (a JSON true where a number belongs among them), one id
twice; a message whose own fields are out of range. The job must refuse it whole and lose
nothing else:

* a file given to ``submit --file`` (the CLI, as a user runs it) is refused with exit 2
  and a message naming the line, no traceback, and queues none of its records;
* a queue's malformed message is rejected and dead-lettered to ``<queue>.rejected``,
  never put back on the queue (where it would come back for ever) and never half
  worked on; the consumer goes on with the other messages.

The good records inside broken input carry ids of their own (``malformed-...``): any
effect of theirs is an ``unexpected_effects`` failure. checks/bad_input.py judges the rest.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import store_away
from .. import settings as settings_module
from ..job import RECORD_FIELDS, demo_records
from ..runtime.errors import TransientError
from ..runtime.strategy import Context

#: The flaws of the files an event submits, one file each (a refused submit takes about 0.1 s).
FILE_FLAWS = ("cut-line", "no-id", "wrong-type", "bool-for-number", "fraction-for-integer", "duplicate-id")
#: Each flaw comes in every format ``submit --file`` reads (each format has a reader and conversions of its own).
FILE_FORMATS = ("jsonl", "csv", "json")
#: A JSON true or false where the job wants a number: Python counts a bool as an int (isinstance), JSON does not.
NUMBER_TYPES = (int, float)
#: How long one refused `submit --file` may take (an interpreter's start and a read).
SUBMIT_TIMEOUT_S = 60.0
DIR = "drill-malformed"
#: How often a submit waiting for the drill's store outage to end looks again.
STORE_AWAY_RETRY_S = 0.1


def good(record_id: str) -> dict[str, Any]:
    """A record the job would take, under an id no other input has."""
    return {**demo_records(1)[0], "record_id": record_id}


def flawed(flaw: str, name: str) -> dict[str, Any] | None:
    """One record with ``flaw`` (None: this job declares no field that could carry it)."""
    if flaw == "no-id":
        return {k: v for k, v in good(name).items() if k != "record_id"}
    if flaw == "wrong-type":
        if not RECORD_FIELDS:
            return None
        field, kind = next(iter(RECORD_FIELDS.items()))
        return {**good(name), field: 12 if kind is str else "not-a-" + kind.__name__}
    if flaw == "bool-for-number":
        numbers = [field for field, kind in RECORD_FIELDS.items() if kind in NUMBER_TYPES]
        return {**good(name), numbers[0]: True} if numbers else None
    if flaw == "fraction-for-integer":  # not a whole number: rounding it would change the record
        integers = [field for field, kind in RECORD_FIELDS.items() if kind is int]
        return {**good(name), integers[0]: 12.5} if integers else None
    return good(name)


def records_with(flaw: str, tag: str) -> list[dict[str, Any]] | None:
    """Three good records and the flawed one third (a duplicate id: the first's again)."""
    first = [good(f"malformed-{tag}-{i}") for i in (1, 2)]
    if flaw == "duplicate-id":
        return [*first, good(f"malformed-{tag}-1"), good(f"malformed-{tag}-4")]
    bad = flawed(flaw, f"malformed-{tag}-3")
    return None if bad is None else [*first, bad, good(f"malformed-{tag}-4")]


def file_text(flaw: str, tag: str, form: str = "jsonl") -> str | None:
    """The submitted file in ``form`` (FILE_FORMATS); a cut line: the file ends mid-record, as a
    producer killed mid-write leaves it. None: the flaw cannot be written in that form (a CSV
    holds only texts: a number where a text belongs is a text there)."""
    cut = flaw == "cut-line"
    found = [good(f"malformed-{tag}-{i}") for i in (1, 2, 3, 4)] if cut else records_with(flaw, tag)
    if found is None or (form == "csv" and flaw == "wrong-type" and next(iter(RECORD_FIELDS.values())) is str):
        return None
    if form == "json":
        text = json.dumps(found, indent=1)
        return text[: len(text) * 3 // 4] if cut else text
    lines = [json.dumps(r) for r in found] if form == "jsonl" else _csv_lines(found)
    if cut:  # the last line ends half-way (a CSV row with fewer fields than the header)
        lines[-1] = lines[-1][: len(lines[-1]) // 2]
        return "".join(line + "\n" for line in lines[:-1]) + lines[-1]
    return "".join(line + "\n" for line in lines)


def _csv_lines(records: list[dict[str, Any]]) -> list[str]:
    """A header, then a row per record (a field it lacks: empty; true and false as JSON writes them)."""
    header = list(good("header"))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for record in records:
        writer.writerow([json.dumps(record[k]) if isinstance(record.get(k), bool) else record.get(k, "") for k in header])
    return out.getvalue().splitlines()


def submit_files(ctx: Context, env: dict[str, str], flaws: list[str], event: int,
                 spells: store_away.Spells) -> list[dict[str, Any]]:
    """Each flawed file submitted with the project's CLI: its exit code and what it printed. A file
    queued all the same shows in the run: its records (ids of their own) are then done
    (``unexpected_effects``) or left undone (``incomplete``). A file is submitted while the drill
    holds no store outage, and again if one began meanwhile and the submit was refused: that
    refusal may be the store's (locked, unreachable), whatever else it printed."""
    where = ctx.data_dir / DIR
    where.mkdir(exist_ok=True)
    cases = []
    for flaw in flaws:
        for form in FILE_FORMATS:
            text = file_text(flaw, f"{event}-{flaw}-{form}", form)
            if text is None:
                continue
            path = where / f"event-{event}-{flaw}.{form}"
            path.write_text(text, encoding="utf-8")
            code, said = _submit(ctx, env, path, spells)
            cases.append({"flaw": flaw, "format": form, "file": str(path), "exit": code, "said": said.strip()[-400:],
                          "traceback": "Traceback (most recent call last)" in said})
    return cases


def _submit(ctx: Context, env: dict[str, str], path: Path, spells: store_away.Spells) -> tuple[int | None, str]:
    """``submit --file path``: its exit code (None: no answer in time) and what it printed."""
    cmd = [sys.executable, "-m", settings_module.PACKAGE, "submit", "--file", str(path), "--data-dir", str(ctx.data_dir)]
    deadline = time.monotonic() + SUBMIT_TIMEOUT_S
    while True:
        while spells.held and time.monotonic() < deadline:
            time.sleep(STORE_AWAY_RETRY_S)
        spell = spells.count
        try:
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, env=env,
                                  timeout=max(1.0, deadline - time.monotonic()), check=False)
        except subprocess.TimeoutExpired:
            return None, f"no answer within {SUBMIT_TIMEOUT_S:g} s"
        if done.returncode != 2 or not spells.overlapped(spell) or time.monotonic() >= deadline:
            return done.returncode, (done.stdout + done.stderr).decode(errors="replace")


class FileSubmissions(threading.Thread):
    """The flawed files submitted beside the drill's loop, which goes on meanwhile (an interpreter
    starting per file, a flaw in each format, take seconds: a short run would end while the loop
    waited; and the drill's own store outage may come meanwhile)."""

    def __init__(self, ctx: Context, env: dict[str, str], flaws: list[str], event: int,
                 spells: store_away.Spells) -> None:
        super().__init__(name=f"malformed-input-{event}", daemon=True)
        self.args, self.event = (ctx, env, flaws, event, spells), event
        self.cases: list[dict[str, Any]] = []

    def run(self) -> None:
        self.cases = submit_files(*self.args)


def poison_messages(event: int) -> list[tuple[bytes, str | None, str]]:
    """The malformed messages, ``(body, correlation id, name)``: each of a kind the consumer must refuse."""
    def body(records: Any) -> bytes:
        return json.dumps({"records": records, "work_ms": 0}).encode()

    tag = f"{event}"
    made = [(b'{"records": [{"record_id": "malformed-' + tag.encode() + b'-cut", "va', "not-json"),
            (body({"record_id": f"malformed-{tag}-not-a-list"}), "not-a-list"),
            (body([good(f"malformed-{tag}-nocid")]), "no-correlation-id"),
            # The message's own field out of its range (an hour of simulated work per record).
            (json.dumps({"records": [good(f"malformed-{tag}-slow")], "work_ms": 3_600_000}).encode(),
             "work-ms-out-of-range")]
    for flaw in [f for f in FILE_FLAWS if f != "cut-line"]:  # the record flaws (a cut line: not JSON, above)
        found = records_with(flaw, f"{tag}-{flaw}")
        if found is not None:
            made.append((body(found), flaw))
    return [(raw, None if name == "no-correlation-id" else f"drill-malformed-{tag}-{name}", f"{tag}-{name}")
            for raw, name in made]


def inject(ctx: Context, env: dict[str, str], event: dict[str, Any],
           spells: store_away.Spells) -> tuple[dict[str, Any], FileSubmissions | None] | None:
    """The fault: what was sent, and for files the submissions under way (their answers are collected
    once the workers ended: ``FileSubmissions.cases``). None: the broker is away (the drill tries later)."""
    if settings_module.INPUT_SOURCE == "rabbitmq":
        from ..runtime import amqp_input  # only a queue project has it

        messages = poison_messages(event["n"])
        try:
            amqp_input.drill_publish_raw(ctx, messages)
        except TransientError:
            return None
        return {"how": "queue", "published": [name for _, _, name in messages]}, None
    flaws = list(event.get("flaws") or FILE_FLAWS)
    submissions = FileSubmissions(ctx, env, flaws, event["n"], spells)
    submissions.start()
    return {"how": "file", "flaws": flaws}, submissions
