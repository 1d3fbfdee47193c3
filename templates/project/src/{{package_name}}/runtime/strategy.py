"""How a continuity strategy plugs into the shared runtime.

The CLI, the drill and ``status`` are the same in every generated project; they
talk to the strategy only through the package named by ``settings.RUNTIME_MODULE``
(e.g. ``checkpoint/``, beside ``runtime/``), whose ``__init__`` provides:

``NAME: str``
    the strategy id (``"checkpoint"``).
``MULTI_WORKER: bool``
    whether several ``run`` processes may share one data directory.
``STORE_TABLES: tuple[str, ...]``
    every table the strategy keeps in the state store (its schema.sql's, and a
    library's own); ``reset`` drops them, so the next ``submit-demo`` starts from
    an empty store. ``()`` when the state lives in files.
``STATE_FILES: tuple[str, ...]`` (optional)
    names in the data directory that hold state outside the store (input files,
    checkpoint files, landing files); ``reset`` removes them too.
``submit(ctx, records, *, work_ms=0.0, correlation_id=None) -> list[str]``
    queue work (the demo workload or your own records); returns the task ids.
    Without ``correlation_id`` (the demo) it refuses a store that already holds a
    workload (JobError). With one (``submit --file``, a queue message) it adds the
    records as new work, unless that id was submitted before: then it returns the
    existing task ids and adds nothing, in the same transaction that would have
    added them (a redelivered submission finds the existing work). The answer is a
    :class:`Submitted` (a list of task ids whose ``added`` says which case it was).
    The records are taken as given: check them first (submission.check_records).
``submit_many(ctx, store, submissions) -> list[Submitted]`` (optional; the queue input uses it)
    ``submissions`` is a list of ``(correlation_id, records, work_ms)``; all of them
    are added in ONE transaction on ``store`` (an open store of this strategy, the
    caller's to close), each deduped by its own correlation id exactly as ``submit``
    does, and the answers come in the same order. One submission refused (JobError)
    rolls back them all: the caller then submits them one by one. A consumer thus
    commits once per batch of messages, not once per message.
``run(ctx, shutdown, *, limit=None) -> int``
    work until nothing is left (or ``limit`` records were processed, or
    ``shutdown.requested``), checkpointing as it goes; returns the exit code.
    The strategies a queue feeds also take ``store=`` (an open store of this
    strategy) and ``external=`` (an open ExternalService): the consumer's own,
    used and left open, so a pass per batch of messages opens no connection.
``status(ctx) -> dict``
    ``{"strategy", "total", "done", "failed", "percent", "tasks": [{"task_id",
    "status", "done", "total", "percent", "last_checkpoint_age_s", "rate_per_s",
    "attempts", "error"}]}``.
``expected_effects(records) -> set[tuple[str, str]]``
    the (record_id, step) pairs a complete run must apply (records x
    ``job.STEPS``; the drill does not ask the strategy, it derives them itself).
``REDONE_CALLS_PER_KILL: int``
    the promise the drill holds the strategy to: how many external calls one kill
    may make twice. ``effects.promise(unit)``: the calls of one uncommitted unit
    (a batch, a task, a step) when the service is idempotent (re-sent with their
    keys) or a plain call is re-sent in doubt (at least once; the drill bounds those
    by the calls in doubt too), 0 for the other kinds (looked up, or held: effects.py).
``stored_results(ctx) -> list[tuple[str, Any]] | None`` (read-only)
    every result the run stored, as ``(record_id, result)`` pairs, one per stored
    row (a record stored twice appears twice); ``None`` when the strategy keeps
    no per-record results (the file variant keeps only the running state).
``stored_final_states(ctx) -> list[dict] | None`` (read-only)
    per task or stream: ``{"task_id", "record_ids": [...its input, in order],
    "state": the saved running state (job.fold's) or None}``; ``None`` when the
    strategy keeps no running state (one record per task).

The drill compares what the last two return with its oracle (oracle.py), which
knows job.py and the input only.
``EFFECT_ANSWERS: str`` (optional, default ``"service"``)
    what job.py's ``effect()`` returns in this strategy: ``"service"``, the external
    service's answer (``external.answer``: its ``reference`` is what a job may keep);
    ``"recorded"`` when the effect is only recorded and sent later (event sourcing),
    so the job never sees an answer. The drill's oracle answers the same way.
``WINDOWS: dict[str, str]`` (optional; every generated strategy has it)
    the critical windows: name -> what a kill there proves. The module calls
    ``faults.window(name)`` at each; ``drill --aim NAME|all`` kills exactly there.
``add_commands(subparsers, common) -> None`` (optional)
    extra subcommands (``common`` is the parent parser holding ``--data-dir``);
    each sets ``func=callable(args, ctx) -> int``.
``drill_submit(ctx, records, *, work_ms=0.0, more=None) -> list[str]`` (optional)
    how the drill hands its input to the workers instead of ``submit``: a queue
    input (runtime/amqp_input/) publishes the records as messages the workers consume;
    ``more`` (a tag) adds records to the same queue when the drill extends its work.
``held_claims(ctx, store=None) -> list[dict]`` (optional, read-only)
    every claim or lease held right now, ``{"what", "owner"}`` (``held_rows`` reads them), with
    ``"heartbeat"`` (the time the holder last renewed it) and ``"progress"`` (a number that grows
    as the holder moves the unit on) where the claim has them: the drill watches that a holder
    never moves its unit on without renewing the heartbeat (drill/claims_watch.py); ``store``: an
    open store to read on (the watch keeps one) instead of a connection of its own;
    a worker the drill started reads it after its run ended and must find none under its
    own owner id (drill/witness.py, check ``held_after_exit``).
``stored_history(ctx) -> dict`` (optional, read-only)
    the history the strategy keeps (transitions, event streams, positions), in the shape
    drill/checks/history.py documents; the drill checks it is complete and in order.
``CALL_ATTEMPTS: int`` (optional; none: a refused call is retried until it goes through)
    after this many refusals in a row a call fails its unit (a task, an order) with the reason;
    the drill's longest refusal burst stays one below (drill/moments.py, long_burst).
``KILLS_IN_RECOVERY: bool`` (optional, default True)
    whether the drill's default schedule kills some restarted workers while they recover
    (drill/schedule.py); False where a recovery makes no call for seconds (a JVM start).
``CUT_FIRST_WRITES: bool`` (optional, default True)
    whether the drill's default schedule also kills workers just before each of their first writes
    in turn (drill/moments.py, own_chain); False where each of those restarts takes seconds (a JVM start).
``drill_report(ctx) -> dict`` (optional)
    the strategy's own figures, added to the drill report (a queue input: messages
    ``redelivered``, ``deduped``, ``rejected``, ``queue_left``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import settings as settings_module
from .external import ExternalService
from ..settings import Settings


@dataclass(frozen=True)
class Context:
    """What every command gets: where the data lives and how the job is tuned."""

    data_dir: Path
    settings: Settings
    #: The strategy module (set by the CLI; the drill and status use it).
    strategy: ModuleType | None = None

    @property
    def external_dir(self) -> Path:
        """Where external.db lives: the ``external_dir`` setting, else the data directory."""
        return Path(self.settings.external_dir) if self.settings.external_dir else self.data_dir

    def external(self) -> ExternalService:
        return ExternalService(self.external_dir, failure_rate=self.settings.external_failure_rate,
                               busy_timeout_ms=self.settings.busy_timeout_ms)


class Submitted(list[str]):
    """The task ids a ``submit`` answered with; ``added`` is False when the correlation
    id had been submitted before and these are the ids of that earlier submission."""

    def __init__(self, task_ids: list[str], *, added: bool = True, correlation_id: str | None = None) -> None:
        super().__init__(task_ids)
        self.added = added
        #: Set by submission.py: the id this submission went in under (made there when none was given).
        self.correlation_id = correlation_id


def run_worker(ctx: Context, make_worker: Callable[[Any, ExternalService], Any], open_store: Callable[[Context], Any],
               *, limit: int | None, store: Any = None, external: ExternalService | None = None) -> int:
    """The body of a claiming strategy's ``run``: send what ``reconcile`` released, work, close.

    ``store``/``external``: connections the caller holds open (the queue consumer, one pass
    per batch of messages), used and left open; without them, opened and closed here.
    ``make_worker(store, external)`` builds the strategy's worker (``.effects``, ``.log``,
    ``.run(limit)``)."""
    own_store, own_external = store is None, external is None
    store = open_store(ctx) if store is None else store
    external = ctx.external() if external is None else external
    worker = make_worker(store, external)
    try:
        worker.effects.send_released(worker.log)
        return int(worker.run(limit))
    finally:
        worker.effects.close()
        if own_external:
            external.close()
        if own_store:
            store.close()


def held_rows(ctx: Context, open_store: Callable[[Context], Any], sql: str, what: str,
              params: tuple[Any, ...] = (), store: Any = None) -> list[dict[str, Any]]:
    """The body of a strategy's ``held_claims``: each row (``id``, ``owner``, and ``heartbeat`` and
    ``progress`` when ``sql`` selects them) as ``{"what": "<what> <id>", "owner", ...}``, read on
    ``store``, else on a connection of its own (read-only)."""
    own = store is None
    store = open_store(ctx) if own else store
    try:
        return [{"what": f"{what} {row['id']}", **{k: v for k, v in row.items() if k != "id"}}
                for row in store.all(sql, params)]
    finally:
        if own:
            store.close()


REQUIRED = ("NAME", "MULTI_WORKER", "STORE_TABLES", "submit", "run", "status", "expected_effects", "REDONE_CALLS_PER_KILL",
            "stored_results", "stored_final_states")


def load(module_name: str | None = None) -> ModuleType:
    """Import the strategy of this project (its folder beside runtime/) and check it has the interface.

    The one way the runtime reaches the strategy: an import by name, so runtime/ never
    imports a strategy module itself."""
    name = module_name or settings_module.RUNTIME_MODULE
    module = importlib.import_module(f"..{name}", __package__)  # beside runtime/: <package>.<name>
    missing = [attr for attr in REQUIRED if not hasattr(module, attr)]
    if missing:
        raise TypeError(f"strategy module {name} lacks {', '.join(missing)}")
    return module


def percent(done: int, total: int) -> float:
    """A status dict's ``percent``: done of total, 100 when there is nothing to do."""
    return 100.0 * done / total if total else 100.0
