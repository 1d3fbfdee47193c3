"""What a freshly generated project looks like, and what to type next."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from advisor.tui.widgets.file_tree import file_tree


def next_steps(generated: Any, shown_dest: str) -> Text:
    """The tree of ``generated.files`` under ``shown_dest``, then the commands to run."""
    pkg = generated.package
    text = Text(file_tree(generated.files, shown_dest) + "\n\n")
    text.append("Next:\n", style="bold")
    text.append(
        f"  cd {shown_dest}\n  make test\n"
        f"  PYTHONPATH=src python -m {pkg} submit-demo --records 1000\n"
        f"  PYTHONPATH=src python -m {pkg} run        # kill it, run it again: it resumes\n"
        f"  PYTHONPATH=src python -m {pkg} drill --records 2000 --kills 10 --seed 1\n"
    )
    return text
