"""Errors a person can act on.

Anything raised as a :class:`JobError` is printed as one line on stderr and the
command exits with code 2 (bad input, missing or locked database, a checkpoint
that cannot be recovered). Any other exception is a bug and keeps its traceback.
"""

EXIT_OK = 0
EXIT_USAGE = 2
#: The grace period after SIGTERM/SIGINT ran out before a safe point was reached.
EXIT_GRACE_EXPIRED = 3


class JobError(Exception):
    """Base of every user-facing error: say what, why and how to fix it."""


class StoreError(JobError):
    """The state database is missing, locked, unreadable or too new."""


class StateVersionError(JobError):
    """Stored JSON state has a version this code cannot read."""


class CorruptStateError(JobError):
    """Stored state is not valid JSON or fails its checksum."""


class BadRecord(Exception):
    """Raised by the job for input it cannot process; the task is marked failed with this reason."""


class TransientError(Exception):
    """The external service failed in a way that is worth retrying."""
