"""Shared by the strategy benchmarks: import the modules of a project generated into a temp dir.

The benchmarks call the generated code in-process (no subprocess start-up in the figures),
so they put the project's ``src/`` on ``sys.path`` and import its modules by name.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the advisor itself, when run from a checkout


def load_generated(dest: Path, package: str, modules: tuple[str, ...]) -> dict[str, ModuleType]:
    """``{name: module}`` for ``package.name`` of the project generated in ``dest``."""
    sys.path.insert(0, str(dest / "src"))
    return {name: importlib.import_module(f"{package}.{name}") for name in modules}


def drill_bench_parser(doc: str | None, *, drill_records: int) -> argparse.ArgumentParser:
    """The flags every strategy benchmark shares: best-of-N throughput runs, then a crash drill."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    parser.add_argument("--repeat", type=int, default=3, help="best of N throughput runs")
    parser.add_argument("--drill-records", type=int, default=drill_records)
    parser.add_argument("--kills", type=int, default=10)
    return parser
