"""Render a list of relative file paths as an indented tree (plain text)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def file_tree(files: Iterable[str], root: str = ".") -> str:
    tree: dict[str, Any] = {}
    for path in sorted(files):
        node = tree
        for part in path.replace("\\", "/").strip("/").split("/"):
            node = node.setdefault(part, {})
    lines = [root]

    def walk(node: dict[str, Any], prefix: str) -> None:
        names = sorted(node, key=lambda n: (not node[n], n))  # folders first
        for i, name in enumerate(names):
            last = i == len(names) - 1
            lines.append(f"{prefix}{'└── ' if last else '├── '}{name}{'/' if node[name] else ''}")
            walk(node[name], prefix + ("    " if last else "│   "))

    walk(tree, "")
    return "\n".join(lines)
