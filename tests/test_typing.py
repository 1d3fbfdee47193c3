"""The whole advisor package (model → review/scaffold/inspect/probe → cli/tui) passes mypy --strict (STYLE.md 13)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_core_is_strictly_typed():
    # The files and strictness are configured in pyproject.toml's [tool.mypy].
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
