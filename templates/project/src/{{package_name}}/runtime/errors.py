"""Errors a person can act on.

Anything raised as a :class:`JobError` is printed as one line on stderr and the
command exits with code 2 (bad input, missing or locked database, a checkpoint
that cannot be recovered). Any other exception is a bug and keeps its traceback.

:func:`redact` keeps passwords out of every message, log line and report: the
state store's URL (``postgresql://bob:***@db/app``), a broker's (``amqps://``)
and a key/value DSN's ``password=***``.
"""

import re

_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@'\"]*:)[^\s/'\"]*@")
_KEYVALUE = re.compile(r"(?i)\b(password|passwd|pwd)(\s*=\s*)('[^']*'|\"[^\"]*\"|[^\s&;,'\"]*)")

EXIT_OK = 0
EXIT_USAGE = 2
#: The grace period after SIGTERM/SIGINT ran out before a safe point was reached.
EXIT_GRACE_EXPIRED = 3
#: ``run``: the state store stayed unreachable for longer than ``store_outage_s``.
EXIT_STORE_UNAVAILABLE = 4


def redact(text: str) -> str:
    """``text`` with the password of every URL (``scheme://user:PASSWORD@``) and every
    ``password=`` setting replaced by ``***``."""
    text = _USERINFO.sub(r"\1***@", text)
    return _KEYVALUE.sub(r"\1\2***", text)


class JobError(Exception):
    """Base of every user-facing error: say what, why and how to fix it (never a password)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class BadInput(JobError):
    """A record or input file that cannot be queued, named with where (``file:line`` or
    ``record N``) and why; nothing of that submission is queued."""


class StoreError(JobError):
    """The state database is missing, locked, unreadable or too new."""


class StoreUnavailable(StoreError):
    """The state store cannot be reached for now (a PostgreSQL restart, a lost
    connection, SQLite busy beyond busy_timeout). ``run`` rides this out with bounded
    backoff and resumes from the committed state; past the configured time it exits
    non-zero with this message."""


class StateVersionError(JobError):
    """Stored JSON state has a version this code cannot read."""


class CorruptStateError(JobError):
    """Stored state is not valid JSON or fails its checksum."""


class BadRecord(Exception):
    """Raised by the job for input it cannot process; the task is marked failed with this reason."""


class TransientError(Exception):
    """The external service failed in a way that is worth retrying."""


class InDoubt(TransientError):
    """A call whose outcome is unknown: a timeout after the request was sent (a real
    adapter, http_service.py; the drill's simulated service when told to time out). Retried
    like a transient error, but as a call that may have got through (effects.py)."""
