"""Shared fixtures for the toolkit's own tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from advisor.catalog import Catalog, load_catalog
from advisor.paths import strategies_dir


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture
def catalog_copy(tmp_path: Path) -> Path:
    """A writable copy of the bundled catalog, for tests that break or extend it."""
    dest = tmp_path / "strategies"
    shutil.copytree(strategies_dir(), dest)
    return dest
