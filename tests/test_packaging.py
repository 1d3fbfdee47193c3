"""The wheel carries the catalog and the template, so an installed advisor works outside the repo."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return next(out.glob("continuity_advisor-*.whl"))


def test_wheel_contains_catalog_and_template(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in (ROOT / "strategies").glob("*.yaml"):
        assert f"advisor/_data/strategies/{path.name}" in names
    assert "advisor/_data/templates/copier.yml" in names
    assert "advisor/cli.py" in names
    for package in ("model", "review", "scaffold", "inspect", "probe", "docgen", "commands", "tui"):
        assert f"advisor/{package}/__init__.py" in names, package


def test_installed_wheel_runs_outside_the_repo(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = (
        "import advisor.paths as p, advisor.cli as c, sys;"
        "print(p.strategies_dir()); print(p.templates_dir());"
        "sys.exit(c.main(['recommend', '--set', 'work_shape=multi_step_flow', '--json']))"
    )
    # PYTHONPATH puts the unpacked wheel ahead of the editable install of this checkout.
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == str(site / "advisor" / "_data" / "strategies")
    assert lines[1] == str(site / "advisor" / "_data" / "templates")
    assert '"top": "state-machine"' in done.stdout
