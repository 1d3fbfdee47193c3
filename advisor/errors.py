"""Errors a user can act on.

Everything the user can cause (a bad answers file, a broken catalog, an occupied
destination) raises a subclass of :class:`AdvisorError`. The CLI and the TUI show
its message and, in the CLI, exit with code 2. Anything else is a bug.
"""

from __future__ import annotations

EXIT_USAGE = 2


class AdvisorError(Exception):
    """Base of every error meant for a person to read: say what, why, and how to fix it.

    Its message never carries a password: it often quotes what the user typed (a URL, a command).
    """

    def __init__(self, *args: object) -> None:
        from advisor.redact import redact

        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class CatalogError(AdvisorError):
    """A strategy, question or scenario file is missing, malformed or inconsistent."""

    def __init__(self, path: object, key: str, reason: str) -> None:
        self.path, self.key, self.reason = str(path), key, reason
        super().__init__(f"{self.path}: {key}: {reason}")


class InputError(AdvisorError):
    """A file the advisor reads is too large, too deep, binary, in another encoding or malformed
    (advisor/safe_read.py)."""


class AnswersError(AdvisorError):
    """Answers (file, --set flags, TUI) name an unknown question or value."""


class OutputExistsError(AdvisorError):
    """Refusing to overwrite something the user already has."""


class ScaffoldError(AdvisorError):
    """Generating a project failed (bad template answer, destination problem)."""


class DrillError(AdvisorError):
    """A generated project's crash drill could not be started or did not report."""


class ProbeError(AdvisorError):
    """``advisor probe`` cannot run: a bad flag, a command that cannot start, a missing folder,
    or a probe report that is missing, corrupt or not a probe report."""
