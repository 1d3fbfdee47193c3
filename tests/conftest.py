"""Shared fixtures for the toolkit's own tests."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from advisor.model.catalog import Catalog
from advisor.model.loader import load_catalog
from advisor.paths import strategies_dir
from suite_share import spread_for_workers


@pytest.hookimpl(trylast=True)  # after pytest's own reordering (by fixtures' scopes), which would undo it
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Every xdist worker collects, and all must agree: the count comes from xdist's environment.
    items[:] = spread_for_workers(items, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))

sys.path.insert(0, str(Path(__file__).parent))  # tests/pg_server.py


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture
def catalog_copy(tmp_path: Path) -> Path:
    """A writable copy of the bundled catalog, for tests that break or extend it."""
    dest = tmp_path / "strategies"
    shutil.copytree(strategies_dir(), dest)
    return dest


@pytest.fixture(scope="session")
def postgres_url():
    """DATABASE_URL of a throwaway PostgreSQL server (one per xdist worker)."""
    from pg_server import find_bin, postgres_server

    if not find_bin("initdb"):
        pytest.fail("PostgreSQL is not installed: `make test` installs it (make postgres)")
    with postgres_server() as url:
        yield url
