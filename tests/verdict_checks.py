"""The drill's check ids, read from the template's drill/verdict.py (``CHECKS``) without
rendering it: the mutation catalogue may use any of them, and the docs must list each."""

from __future__ import annotations

import ast
from pathlib import Path

VERDICT = Path(__file__).resolve().parents[1] / "templates/project/src/{{package_name}}/drill/verdict.py"


def check_ids() -> tuple[str, ...]:
    for node in ast.parse(VERDICT.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CHECKS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError(f"no CHECKS in {VERDICT}")
