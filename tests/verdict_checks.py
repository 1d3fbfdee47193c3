"""The drill's check ids, read from the template's drill/verdict.py (``CHECKS``) without
rendering it: the mutation catalogue may use any of them, and the docs must list each.

``CHECKS`` is a tuple of strings, possibly joined with ``+`` to tuples named in
drill/checks/ (``NEMESIS_CHECKS``): those are read from there, the same way."""

from __future__ import annotations

import ast
from pathlib import Path

DRILL = Path(__file__).resolve().parents[1] / "templates/project/src/{{package_name}}/drill"
VERDICT = DRILL / "verdict.py"


def _assigned(path: Path, name: str) -> ast.expr | None:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return node.value
    return None


def _ids(node: ast.expr) -> tuple[str, ...]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _ids(node.left) + _ids(node.right)
    if isinstance(node, ast.Name):  # a tuple of a module in drill/checks/
        for path in sorted((DRILL / "checks").glob("*.py")):
            found = _assigned(path, node.id)
            if found is not None:
                return _ids(found)
        raise AssertionError(f"{node.id} in CHECKS is defined in no module of {DRILL / 'checks'}")
    return tuple(ast.literal_eval(node))


def check_ids() -> tuple[str, ...]:
    value = _assigned(VERDICT, "CHECKS")
    if value is None:
        raise AssertionError(f"no CHECKS in {VERDICT}")
    return _ids(value)
