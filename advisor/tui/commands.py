"""Command palette (ctrl+p): one entry per action of the advisor."""

from __future__ import annotations

from textual.command import DiscoveryHit, Hit, Hits, Provider

ACTIONS: tuple[tuple[str, str, str], ...] = (
    ("Start the walkthrough", "start", "Answer the recovery-point questions and the job's traits"),
    ("Load an answers file", "load", "Read a saved answers YAML file and show its recommendation"),
    ("Show the recommendation", "recommend", "Rank the strategies for the answers given so far"),
    ("Review my current design", "review", "What you saw, then the current strategy's controls; ranked findings, this week's fixes, the target design"),
    ("Probe my job", "probe", "Kill and restart your own job's command, then verify it: evidence for the record"),
    ("Generate a project", "generate", "Render the chosen strategy's starter project with Copier"),
    ("Try it: run the crash drill", "drill", "Kill and restart the generated project, then verify it"),
    ("Export the decision record", "export", "Write the decision record and the answers file"),
    ("Help", "help", "Screens and keys"),
    ("Quit", "quit", "Leave the advisor"),
)


class AdvisorCommands(Provider):
    """The advisor's actions, by name."""

    def _run(self, action: str):  # type: ignore[no-untyped-def]
        async def run() -> None:
            await self.app.run_action(action)

        return run

    async def discover(self) -> Hits:
        for name, action, help_text in ACTIONS:
            yield DiscoveryHit(name, self._run(action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, action, help_text in ACTIONS:
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), self._run(action), text=name, help=help_text)
