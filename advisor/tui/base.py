"""What a screen may ask of the app: the session, a start-up error, and the steps it can open.

The screens annotate ``app: AdvisorAppBase``; :class:`~advisor.tui.app.AdvisorApp` implements
the steps by importing the screens. So the screens never import the module that imports them.
"""

from __future__ import annotations

from textual.app import App

from advisor.tui.session import Session


class AdvisorAppBase(App[None]):
    """The app's state and the steps one screen hands over to the next (app.py opens their screens)."""

    def __init__(self, session: Session | None, *, error: str | None = None, blink: bool = True) -> None:
        super().__init__()
        self.session = session
        self.startup_error = error
        """A catalog or answers problem found before the app started: shown on the welcome screen."""
        self.blink = blink
        """Cursor blink in text inputs; the snapshot tests turn it off."""

    def action_start(self) -> None:
        """Open the walkthrough at its first question."""
        raise NotImplementedError

    def action_recommend(self) -> None:
        """Show the recommendation for the answers so far."""
        raise NotImplementedError

    def action_review(self) -> None:
        """Open the "review my current design" walkthrough at its first step."""
        raise NotImplementedError

    def action_drill(self) -> None:
        """Crash-drill the generated project."""
        raise NotImplementedError
