"""The generated project's LazyFS mount manager, loaded by its path (it imports nothing from the package),
and why LazyFS cannot run here when it cannot: the power-loss tests skip with that reason."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
MODULE_PATH = REPO / "templates/project/src/{{package_name}}/drill/lazyfs.py"
CHECKOUT_BINARY = REPO / ".lazyfs/bin/lazyfs"  # where `make lazyfs` builds it when not root


def load_lazyfs() -> ModuleType:
    if "lazyfs_mount_manager" not in sys.modules:
        spec = importlib.util.spec_from_file_location("lazyfs_mount_manager", MODULE_PATH)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclass-free, but keep one instance per session
        spec.loader.exec_module(module)
    return sys.modules["lazyfs_mount_manager"]


def skip_reason() -> str | None:
    """None when this process can mount LazyFS; else what is missing and how to get it."""
    return load_lazyfs().unavailable_reason([CHECKOUT_BINARY])


def binary() -> Path:
    found = load_lazyfs().find_binary([CHECKOUT_BINARY])
    assert found is not None, skip_reason()
    return Path(found)
