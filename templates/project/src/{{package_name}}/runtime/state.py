"""Versioned JSON state: never pickle.

State that outlives a process (checkpoint data, task payloads, checkpoint files)
is flat JSON wrapped in ``{"kind": ..., "version": N, "data": {...}}``. Pickle was
5-10x larger, CPU heavy and broke whenever a class changed; JSON with an explicit
version can be read by any tool and upgraded step by step:

* an older version is upgraded by the registered functions, one version at a time;
* a newer version is refused with a clear error (never guess at a future format).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .errors import CorruptStateError, StateVersionError
from .safe_read import MAX_STATE_BYTES, loads_json

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]


class StateCodec:
    """Encode and decode one kind of state at its current version."""

    def __init__(self, kind: str, version: int, upgrades: Mapping[int, Upgrade] | None = None) -> None:
        #: ``upgrades[v]`` turns version ``v`` data into version ``v + 1`` data.
        self.kind, self.version, self.upgrades = kind, version, dict(upgrades or {})

    def dumps(self, data: Mapping[str, Any]) -> str:
        # sort_keys + compact separators: the same state always gives the same bytes,
        # so a checksum over it is stable.
        doc = {"kind": self.kind, "version": self.version, "data": dict(data)}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    def loads(self, text: str | bytes) -> dict[str, Any]:
        if len(text) > MAX_STATE_BYTES:
            raise CorruptStateError(f"{self.kind} state is over {MAX_STATE_BYTES >> 20} MiB")
        doc = loads_json(text, f"{self.kind} state", f"{self.kind} state document")  # bounded depth
        if not isinstance(doc, dict) or doc.get("kind") != self.kind or not isinstance(doc.get("data"), dict):
            raise CorruptStateError(f"not a {self.kind!r} state document")
        version = doc.get("version")
        if not isinstance(version, int) or version < 1:
            raise CorruptStateError(f"{self.kind} state has no valid version: {version!r}")
        if version > self.version:
            raise StateVersionError(
                f"{self.kind} state version {version} is newer than this program understands "
                f"(up to {self.version}); upgrade the program instead of guessing the format"
            )
        data: dict[str, Any] = doc["data"]
        while version < self.version:
            upgrade = self.upgrades.get(version)
            if upgrade is None:
                raise StateVersionError(f"no upgrade from {self.kind} state version {version}")
            data = upgrade(data)
            version += 1
        return data
