"""The generated package's rooms, checked on every strategy and variant rendered.

    src/<package>/            yours: job.py, settings.py, cli.py, __main__.py, schema.sql
    src/<package>/<strategy>/ yours to read: how progress is kept (a folder named like runtime_module)
    src/<package>/runtime/    the shared runtime every strategy uses
    src/<package>/drill/      the proof (the crash drill, its oracle, verdict and probe)
    src/<package>/ops/        operations (status, reset, reconcile)

The import graph, read with `ast` from the rendered files (lazy imports inside functions
included), has no circle, and points one way: the user's files and the strategy use the
runtime; drill/ and ops/ use the runtime; the runtime imports nothing from drill/, ops/, cli
or a strategy. The runtime reaches the strategy only through `strategy.load()` (importlib,
the plug-in interface) and the drill's probe only through `runtime/probe_hook.py`, which
the drill assigns into: the documented hooks (docs/template-internals.md).
"""

from __future__ import annotations

import ast
from pathlib import Path

import copier
import pytest

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE_PACKAGE = ROOT / "templates" / "project" / "src" / "{{package_name}}"

#: Every strategy and variant whose files differ: the queue variants add amqp_input and the
#: strategies' queue blocks (idempotent-retry and state-machine are covered by theirs).
VARIANTS = {
    "checkpoint-table": {"strategy": "checkpoint"},
    "checkpoint-file": {"strategy": "checkpoint", "checkpoint_store": "file"},
    "checkpoint-queue": {"strategy": "checkpoint", "input_source": "rabbitmq"},
    "idempotent-retry-queue": {"strategy": "idempotent-retry", "input_source": "rabbitmq"},
    "state-machine-queue": {"strategy": "state-machine", "input_source": "rabbitmq"},
    "event-sourcing": {"strategy": "event-sourcing"},
    "event-sourcing-idempotent": {"strategy": "event-sourcing-idempotent"},
    "stream-checkpoint": {"strategy": "stream-checkpoint"},
}
ROOMS = ("runtime", "drill", "ops")
#: What each room may import (rooms, or top-level modules by name). "strategy" is the
#: strategy's own folder; the top-level package ``__init__`` imports nothing.
ALLOWED = {
    "runtime": {"runtime", "settings", "job"},
    "drill": {"drill", "runtime", "settings", "job"},
    "ops": {"ops", "runtime", "settings"},
    "strategy": {"strategy", "runtime", "settings", "job"},
    "job": {"runtime"},
    "settings": {"runtime"},
    "": set(),
}
#: No module of the template's package over this many lines; the exceptions, with the reason.
MAX_LINES = 400
LONG_MODULES: dict[str, str] = {
    # One standard-library file on purpose: `make lazyfs` runs it as a script and the toolkit's
    # power-loss tests load it by path, before any package is installed (docs/power-loss.md).
    "drill/lazyfs.py": "one self-contained file: run as a script and loaded by path",
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each variant rendered once: its package directory."""
    out = {}
    for name, answers in VARIANTS.items():
        dest = tmp_path_factory.mktemp(name)
        copier.run_copy(str(ROOT / "templates"), dest, data={"project_name": "layout job", **answers},
                        defaults=True, unsafe=False, quiet=True)
        out[name] = dest / "src" / "layout_job"
    return out


def modules(package: Path) -> dict[str, Path]:
    """Dotted name (relative to the package, "" for its __init__) -> file."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path], package: str) -> set[str]:
    """The package's modules ``name`` imports, anywhere in the file."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if name else []
    base_of_level = here if is_package else here[:-1]
    found: set[str] = set()

    def resolve(dotted: list[str], names: list[str]) -> None:
        target = ".".join(dotted)
        for alias in names:  # `from x import y`: y may be a module of x, or a name in x
            sub = f"{target}.{alias}" if target else alias
            found.add(sub if sub in known else target)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = base_of_level[:len(base_of_level) - (node.level - 1)]
                resolve(base + (node.module.split(".") if node.module else []), [a.name for a in node.names])
            elif node.module and node.module.split(".")[0] == package:
                resolve(node.module.split(".")[1:], [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == package:
                    found.add(".".join(alias.name.split(".")[1:]))
    found.discard(name)
    return {m for m in found if m in known}


def graph(package: Path) -> dict[str, set[str]]:
    known = modules(package)
    return {name: imports(name, path, known, package.name) for name, path in known.items()}


def room(module: str, strategies: set[str]) -> str:
    head = module.split(".")[0]
    if head in ROOMS:
        return head
    return "strategy" if head in strategies else module


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every circle, one per strongly connected component (Tarjan), as a path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_no_import_circles_and_the_runtime_points_one_way(rendered: dict[str, Path], variant: str) -> None:
    package = rendered[variant]
    edges = graph(package)
    assert cycles(edges) == [], f"{variant}: import circles"
    strategies = {p.name for p in package.iterdir() if p.is_dir() and p.name not in ROOMS
                  and (p / "__init__.py").is_file()}
    assert len(strategies) == 1, strategies  # the strategy's own folder, named like runtime_module
    wrong = []
    for source, targets in edges.items():
        allowed = ALLOWED.get(room(source, strategies))
        if allowed is None:  # cli, __main__: the entry points wire every room together
            continue
        for target in targets:
            if room(target, strategies) not in allowed:
                wrong.append(f"{source} -> {target}")
    assert wrong == [], f"{variant}: imports against the direction"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_rooms_are_where_the_readme_says(rendered: dict[str, Path], variant: str) -> None:
    package = rendered[variant]
    top = {p.name for p in package.iterdir() if p.name != "__pycache__"}
    assert {"job.py", "settings.py", "cli.py", "__main__.py", "__init__.py", *ROOMS} <= top
    assert not [name for name in top if name.endswith(".py")
                and name not in {"job.py", "settings.py", "cli.py", "__main__.py", "__init__.py"}], top
    for folder in ROOMS:
        assert (package / folder / "__init__.py").read_text().startswith('"""'), folder  # says what lives there
    readme = (package.parents[1] / "README.md").read_text()
    first = readme[:readme.index("## ")]
    assert "job.py" in first and "runtime/" in first and "copier update" in first


def test_no_module_of_the_template_package_is_long() -> None:
    long = {}
    for path in TEMPLATE_PACKAGE.rglob("*"):
        if path.is_file() and ".py" in path.name:
            lines = len(path.read_text(encoding="utf-8").splitlines())
            name = str(path.relative_to(TEMPLATE_PACKAGE))
            if lines > MAX_LINES and name not in LONG_MODULES:
                long[name] = lines
    assert long == {}, f"split these by responsibility (or list them in LONG_MODULES with the reason): {long}"


def test_the_checker_sees_a_circle_and_a_wrong_direction(tmp_path: Path) -> None:
    """The checks above can fail: a planted runtime -> drill import and a circle are found."""
    package = tmp_path / "pkg"
    for folder in ("runtime", "drill"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text('"""x"""\n')
    (package / "__init__.py").write_text("")
    (package / "runtime" / "store.py").write_text("def f():\n    from ..drill import durability\n")
    (package / "drill" / "durability.py").write_text("from ..runtime.store import f\n")
    edges = graph(package)
    assert edges["runtime.store"] == {"drill.durability"} and edges["drill.durability"] == {"runtime.store"}
    assert cycles(edges) == [["drill.durability", "runtime.store"]]
    assert "drill" not in ALLOWED["runtime"]
