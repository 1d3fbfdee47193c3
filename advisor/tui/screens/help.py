"""Help: the screens and their keys."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]Continuity Advisor: keys[/]

[b]Everywhere[/]   [b]?[/]/F1 this help · [b]ctrl+p[/] command palette (every action by name)
             [b]q[/] or [b]ctrl+q[/] quit · [b]tab[/] next field · [b]escape[/] back

[b]Welcome[/]      [b]s[/] start the questions · [b]l[/] load a saved answers file (YAML)

[b]Questions[/]    [b]↑ ↓[/] choose · [b]enter[/] answer and go on · [b]1-9[/] answer by number
             [b]0[/] I don't know · [b]←[/]/escape back · [b]→[/] next (keep the answer)

[b]Recommendation[/]  [b]↑ ↓[/] read about a strategy · [b]enter[/] choose it instead of the top one
             [b]1-4[/] tabs: why, scenario table, trade-offs, pitfalls
             [b]r[/] revise the answers · [b]g[/] generate · [b]e[/] export

[b]Generate[/]     fill in name, destination and store; [b]ctrl+g[/] or the button generates
             then [b]t[/] runs the crash drill on the new project

[b]Try it[/]       runs the project's drill: kills it, restarts it, verifies the
             external service's log. [b]r[/] runs it again.

[b]Export[/]       writes the decision record (Markdown) and the answers file (YAML);
             tick "overwrite" to replace existing files.

[dim]escape or q closes this help[/]
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(HELP, id="help-text")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss()
