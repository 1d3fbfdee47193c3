"""The generated project's LazyFS mount manager, loaded by its path (it imports nothing from the package),
and why LazyFS cannot run here when it cannot: the power-loss tests skip with that reason."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from advisor.probe import power_cut

MODULE_PATH = power_cut.module_path()
CHECKOUT_BINARY = power_cut.checkout_binary()  # where `make lazyfs` builds it when not root


def load_lazyfs() -> ModuleType:
    """The one loaded copy: the advisor's probe loads the same file by its path."""
    return power_cut.lazyfs()


def skip_reason() -> str | None:
    """None when this process can mount LazyFS; else what is missing and how to get it."""
    return power_cut.unavailable_reason()


def binary() -> Path:
    found = load_lazyfs().find_binary([CHECKOUT_BINARY])
    assert found is not None, skip_reason()
    return Path(found)
