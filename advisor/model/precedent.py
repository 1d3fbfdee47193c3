"""A past incident the review compares a team's answers with (``strategies/precedents.yaml``)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Precedent:
    """A past incident (``precedents.yaml``): a public thread, the design its team ran, the
    control whose absence a reviewer found behind it, and its answers as (question, value) pairs."""

    id: str
    source: str  # owner/repo#N or a URL: where a reader finds the thread
    current: str  # strategy id
    fix: str  # control id of ``current``
    features: frozenset[tuple[str, str]]

    @property
    def link(self) -> str:
        """The thread as a Markdown link (GitHub serves a pull request at its issues/N address too)."""
        github = re.fullmatch(r"([\w.-]+/[\w.-]+)#(\d+)", self.source)
        if github:
            return f"[{self.source}](https://github.com/{github[1]}/issues/{github[2]})"
        return f"<{self.source}>" if self.source.startswith(("http://", "https://")) else self.source
