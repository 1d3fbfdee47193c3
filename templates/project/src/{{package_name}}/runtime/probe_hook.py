"""Where the drill's probe listens inside the runtime: a hook, never an import of drill/.

In a worker the drill started, ``drill/durability.py`` installs its probe here (``observer``)
before anything else runs (``__main__``). The runtime tells it what cannot be observed from
outside the process: the settings a PostgreSQL connection commits with (store.py: at connect,
and inside every transaction just before its COMMIT), a store outage ridden out (outage.py),
and, through cli.py's ``run``, when the run started and how it ended (the drill then reads
what the worker still holds: drill/witness.py). Everywhere else ``observer`` stays None: one
attribute read, no call, so production pays nothing.
"""

from __future__ import annotations

from typing import Any, Protocol


class Observer(Protocol):
    def saw_postgresql(self, settings: dict[str, str]) -> None: ...

    def committing(self, store: Any) -> None: ...

    def saw_outage(self) -> None: ...

    def run_started(self, ctx: Any) -> None: ...

    def run_ended(self, ctx: Any, signal_name: str | None, code: int) -> None: ...


#: The probe of this process, set by drill/durability.py in a drilled worker; None otherwise.
observer: Observer | None = None
