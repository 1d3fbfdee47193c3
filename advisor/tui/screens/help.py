"""Help: the screens and their keys."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]Continuity Advisor: keys[/]   (↑ ↓ scroll · escape closes this help)

[b]Everywhere[/]
  [b]?[/] or [b]F1[/] help · [b]ctrl+p[/] command palette: every action by name
  [b]q[/] or [b]ctrl+q[/] quit · [b]tab[/] next field · [b]escape[/] back

[b]Welcome[/]
  [b]s[/] start the questions · [b]l[/] load a saved answers file (YAML)
  [b]v[/] review my current design

[b]Questions[/] (● answered · ○ to ask · [dim]·[/] skipped: can't change the pick)
  [b]↑ ↓[/] move · [b]enter[/] answer and go on · [b]1-9[/] answer by number
  [b]0[/] I don't know · [b]←[/] back · [b]→[/] next, keeping the answer
  [b]a[/] ask all questions, also those that can no longer change the pick

[b]Recommendation[/]
  [b]↑ ↓[/] read about a strategy · [b]enter[/] choose it instead of the top one
  [b]1-4[/] tabs: why · scenario table · trade-offs · pitfall checklist
  [b]c[/] revisit conflicting answers · [b]s[/] answer what settles a close call
  [b]r[/] revise the answers · [b]v[/] review my design · [b]g[/] generate · [b]e[/] export

[b]Review my current design[/]
  1 what you saw: [b]space[/] or [b]1-7[/] toggle symptoms, [b]tab[/] who owns the engine, [b]→[/] on
  2 the strategy used today (enter) · 3 its essential controls: [b]y[/] yes,
  [b]n[/] no, [b]u[/] unknown (why and how to check under the list), [b]→[/] on
  4 findings ranked by what you saw (each says why), this week's fixes, the
  target design, the verification plan · 5 [b]e[/] export
  [b]p[/] on the findings: probe my job — kill and restart your own job's
  command at random moments, then verify it; the record carries the result

[b]Generate[/]
  fill in project name, destination and store, then [b]ctrl+g[/] generates;
  [b]ctrl+t[/] then runs the crash drill on the new project

[b]Try it[/] (the crash drill)
  kills and restarts the generated project, then checks the external
  service's log: lost, duplicated, recovery time. [b]r[/] runs it again;
  [b]s[/] runs it again killing with SIGTERM (graceful) instead of SIGKILL;
  [b]q[/] asks before it stops the drill and quits.

[b]Export[/]
  [b]ctrl+s[/] writes the decision record (Markdown) and the answers (YAML);
  tick "overwrite existing files" to replace files that exist. After a
  review both carry the current design: [b]advisor review --answers FILE[/]
  writes the same record.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(HELP, id="help-text")

    def on_mount(self) -> None:
        self.query_one("#help", VerticalScroll).focus()  # ↑ ↓ scroll it at once

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss()
