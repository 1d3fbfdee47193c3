"""What a freshly generated project looks like, and what to type next."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from advisor.tui.widgets.file_tree import file_tree


def next_steps(generated: Any, shown_dest: str) -> Text:
    """The tree of ``generated.files`` under ``shown_dest``, then the commands to run."""
    from advisor.scaffold.generation import next_commands
    from advisor.scaffold.project import recorded_answer, strategy_of

    text = Text(file_tree(generated.files, shown_dest) + "\n\n")
    text.append("Next, in a shell:\n", style="bold")
    lines = next_commands(generated.package, shown_dest, strategy_of(generated.dest),
                          recorded_answer(generated.dest, "input_source") or "cli")  # fmt: skip
    text.append("".join(f"  {line}\n" for line in lines))
    return text
