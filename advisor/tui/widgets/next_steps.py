"""What to type after generating a project, and what the project looks like."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from advisor.tui.widgets.file_tree import file_tree


def next_steps(generated: Any, shown_dest: str) -> Text:
    """The commands to run first (they are what the user came for: above the fold), then how the
    project takes later template changes, then the tree of ``generated.files`` under ``shown_dest``."""
    from advisor.scaffold.generation import next_commands, update_commands
    from advisor.scaffold.project import recorded_answer, strategy_of

    text = Text()
    text.append("Next, in a shell:\n", style="bold")
    lines = next_commands(generated.package, shown_dest, strategy_of(generated.dest),
                          recorded_answer(generated.dest, "input_source") or "cli")  # fmt: skip
    text.append("".join(f"  {line}\n" for line in lines))
    text.append("\nTemplate updates, in the project:\n", style="bold")
    text.append("".join(f"  {line}\n" for line in update_commands(generated)))
    text.append("\nThe files it wrote:\n", style="bold")
    text.append(file_tree(generated.files, shown_dest) + "\n")
    return text
