"""The store an older release left, continued by this code (check ``upgrade``).

The default drill's ``upgrade`` fault (finals.py, upgrade.py) loads the newest upgrade fixture the
project ships into a directory of its own once every worker ended and continues it with this code,
killing its first worker at the schema check and at each migration, then at the first pass of every
persistence point: what ``drill --upgrade-from VERSION`` does alone. Each of its findings is one here.
"""

from __future__ import annotations

from typing import Any

from ..verdict import Failure, failure


def check(ops: list[dict[str, Any]]) -> list[Failure]:
    found = []
    for o in ops:
        if o.get("op") != "fault" or o.get("kind") != "upgrade":
            continue
        for f in o.get("failures") or []:  # o["rerun"]: the drill's own command (its interpreter, its --work-ms)
            found.append(failure("upgrade", f"the store schema version {o['from_version']} left mid-run "
                                            f"({o['fixture']}), continued by this code in {o['data_dir']}: "
                                            f"{f['check']}: {f['message']} (alone: `{o['rerun']}`)"))
    return found
