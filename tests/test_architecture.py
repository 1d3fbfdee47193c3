"""The advisor's layout, checked: no import cycles, imports only down the layers, small modules.

Every module under advisor/ is parsed with ``ast``. Every import counts: at module level, inside
a function (a lazy import is still a dependency, only a later one) and under ``TYPE_CHECKING``
(a cycle in the types is a cycle in the design). The layers are data, below: a module may import
its own layer and the layers beneath it, never one above; packages listed together in ``APART``
stand side by side and never import each other. The checks run on a planted package too, so
each one is seen to fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Bottom to top. A unit is a package (it and everything under it) or a single module.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("shared helpers", ("advisor", "advisor.errors", "advisor.redact", "advisor.paths", "advisor.safe_read",
                        "advisor.safe_write")),
    ("model", ("advisor.model",)),
    ("features", ("advisor.review", "advisor.scaffold", "advisor.inspect", "advisor.probe", "advisor.docgen")),
    ("interfaces", ("advisor.cli", "advisor.__main__", "advisor.commands", "advisor.tui")),
)  # fmt: skip

#: Packages of one layer that never import each other: each stands on the layers below alone.
APART: tuple[tuple[str, ...], ...] = (
    ("advisor.review", "advisor.scaffold", "advisor.inspect", "advisor.probe", "advisor.docgen"),
    ("advisor.commands", "advisor.tui"),
)

MAX_LINES = 400
#: Modules allowed over MAX_LINES, each with the reason it stays whole. None today.
LONG_MODULES: dict[str, str] = {}


# --- the graph ---------------------------------------------------------------------


def modules(root: Path, package: str = "advisor") -> dict[str, Path]:
    """Dotted module name → file, for every .py file of the package under ``root``."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imported(name: str, path: Path, known: set[str], package: str) -> set[str]:
    """The package's modules that ``name`` imports (a name imported from a package counts as the package)."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's own package upwards
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module for alias in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] != package:
                continue
            resolved = target
            while resolved not in known and "." in resolved:  # `import advisor.x.y` → the deepest module
                resolved = resolved.rpartition(".")[0]
            if resolved == package and target != package:
                continue  # names no module of the package (importing it would fail anyway)
            if resolved != name:
                out.add(resolved)
    return out


def import_graph(root: Path, package: str = "advisor") -> dict[str, set[str]]:
    found = modules(root, package)
    return {name: _imported(name, path, set(found), package) for name, path in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every set of modules that import each other, directly or around a loop (Tarjan's SCCs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def unit_of(module: str) -> str | None:
    """The LAYERS unit a module belongs to: the longest one naming it or a package above it."""
    units = [u for _, layer in LAYERS for u in layer]
    # The root package is a unit of its own (its __init__), not a catch-all for every module.
    matches = [u for u in units if module == u or (u != "advisor" and module.startswith(u + "."))]
    return max(matches, key=len) if matches else None


def layer_index(unit: str) -> int:
    return next(i for i, (_, layer) in enumerate(LAYERS) if unit in layer)


def against_the_layers(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a higher layer, and imports between packages kept APART."""
    wrong = []
    for module, targets in sorted(graph.items()):
        unit = unit_of(module)
        for target in sorted(targets):
            other = unit_of(target)
            if unit is None or other is None:
                continue  # reported by test_every_module_has_a_layer
            if layer_index(other) > layer_index(unit):
                wrong.append(f"{module} ({LAYERS[layer_index(unit)][0]}) imports {target}"
                             f" ({LAYERS[layer_index(other)][0]}, a layer above)")
            elif unit != other and any(unit in group and other in group for group in APART):
                wrong.append(f"{module} imports {target}: {unit} and {other} stand apart")
    return wrong


def too_long(root: Path, package: str = "advisor", allowed: dict[str, str] | None = None) -> list[str]:
    allowed = LONG_MODULES if allowed is None else allowed
    out = []
    for name, path in modules(root, package).items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and name not in allowed:
            out.append(f"{path.relative_to(root)}: {lines} lines (over {MAX_LINES}; split it, or list it in"
                       " LONG_MODULES with the reason it stays whole)")
    return out


# --- the advisor -------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT)


def test_no_import_cycles(graph: dict[str, set[str]]) -> None:
    found = cycles(graph)
    assert not found, "modules that import each other (around a loop):\n" + "\n".join(" ↔ ".join(c) for c in found)


def test_imports_go_down_the_layers(graph: dict[str, set[str]]) -> None:
    wrong = against_the_layers(graph)
    assert not wrong, "\n".join(wrong)


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    """A new package or top-level module is placed in LAYERS on purpose, not by default."""
    assert [m for m in sorted(graph) if unit_of(m) is None] == []


def test_no_module_over_the_limit() -> None:
    assert too_long(ROOT) == []
    assert set(LONG_MODULES) <= set(modules(ROOT)), "LONG_MODULES names a module that no longer exists"


def test_every_package_says_what_lives_there() -> None:
    """Each package's __init__.py opens with a docstring (two lines: what lives there)."""
    bare = []
    for name, path in modules(ROOT).items():
        if path.name == "__init__.py" and not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))):
            bare.append(str(path.relative_to(ROOT)))
    assert bare == []


def test_the_graph_sees_lazy_and_type_only_imports(graph: dict[str, set[str]]) -> None:
    """The CLI imports the TUI inside a function; the review's plan imports its Finding only for types."""
    assert "advisor.tui.app" in graph["advisor.cli"]
    assert "advisor.review.result" in graph["advisor.review.plan"]


# --- the checks can fail -----------------------------------------------------------


def _plant(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


PLANTED = {
    "advisor/__init__.py": '"""root"""\n',
    "advisor/errors.py": "",
    "advisor/model/__init__.py": '"""model"""\n',
    # The model reaching up into a feature, lazily, and back: a cycle and an upward import.
    "advisor/model/catalog.py": "def load():\n    from advisor.review.judge import review\n",
    "advisor/review/__init__.py": '"""review"""\n',
    "advisor/review/judge.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                               "    from advisor.review import plan\nfrom advisor.model.catalog import load\n",
    "advisor/review/plan.py": "from .judge import review\n",  # relative: plan ↔ judge
    "advisor/scaffold/__init__.py": '"""scaffold"""\nfrom advisor.review.judge import review\n',  # siblings apart
}  # fmt: skip


def test_a_planted_cycle_is_found(tmp_path: Path) -> None:
    _plant(tmp_path, PLANTED)
    found = cycles(import_graph(tmp_path))
    assert ["advisor.model.catalog", "advisor.review.judge", "advisor.review.plan"] in found


def test_a_planted_upward_import_and_a_sibling_import_are_found(tmp_path: Path) -> None:
    _plant(tmp_path, PLANTED)
    wrong = against_the_layers(import_graph(tmp_path))
    assert any(w.startswith("advisor.model.catalog (model) imports advisor.review.judge") for w in wrong), wrong
    assert "advisor.scaffold imports advisor.review.judge: advisor.scaffold and advisor.review stand apart" in wrong


def test_a_planted_long_module_is_found_unless_listed(tmp_path: Path) -> None:
    _plant(tmp_path, {"advisor/__init__.py": "", "advisor/big.py": "x = 1\n" * (MAX_LINES + 1)})
    assert len(too_long(tmp_path, allowed={})) == 1
    assert too_long(tmp_path, allowed={"advisor.big": "generated table"}) == []
