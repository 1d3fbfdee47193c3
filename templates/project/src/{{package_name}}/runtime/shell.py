"""Commands printed for the user to type next: they must work from any directory of a new shell."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from .. import settings as settings_module


def fresh_shell_command(command: str, data_dir: Path) -> str:
    """The command line for ``command`` that works from any directory of a new shell:
    this interpreter (the project's venv) and the data directory, by absolute path."""
    line = (f"{shlex.quote(sys.executable)} -m {settings_module.PACKAGE} {command} "
            f"--data-dir {shlex.quote(str(data_dir.resolve()))}")
    if os.environ.get("DATABASE_URL"):
        line += "   (with the same DATABASE_URL)"
    return line
