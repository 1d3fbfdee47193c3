"""Where the drill's durability probe listens inside the runtime: a hook, never an import of drill/.

In a worker the drill started, ``drill/durability.py`` installs its probe here (``observer``)
before anything else runs (``__main__``). The runtime tells it what cannot be observed from
outside the process: the settings a PostgreSQL connection commits with (store.py) and a store
outage ridden out (outage.py). Everywhere else ``observer`` stays None: one attribute read.
"""

from __future__ import annotations

from typing import Protocol


class Observer(Protocol):
    def saw_postgresql(self, settings: dict[str, str]) -> None: ...

    def saw_outage(self) -> None: ...


#: The probe of this process, set by drill/durability.py in a drilled worker; None otherwise.
observer: Observer | None = None
